"""Slow motion: the live view shows step i no sooner than i × pace, never ahead of the sampler, and
its tail after the run ends can be stopped; a slowed race shows every lane at one race time."""

import asyncio
import threading

import pytest

from dg.ui.pace import MAX_PACE_MS, MAX_SLOW_MOTION, Pace, SlowMotion


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_at_pace_zero_the_view_shows_the_newest_step():
    pace = Pace(0)
    assert pace.index(0) is None and pace.index(7) == 6 and not pace.behind(7)


def test_a_paced_view_shows_one_step_per_interval_and_never_a_step_not_yet_recorded():
    clock = Clock()
    pace = Pace(250, clock)
    assert pace.index(40) == 0  # the first step starts the clock
    clock.now = 0.6
    assert pace.index(40) == 2 and pace.behind(40)
    assert pace.index(2) == 1  # the sampler has only two steps so far
    clock.now = 100.0
    assert pace.index(40) == 39 and not pace.behind(40)


def test_the_tail_yields_the_remaining_steps_in_order_and_stops_when_asked():
    async def collect(pace, n, stop, limit=None):
        shown = []
        async for i in pace.tail(n, stop):
            shown.append(i)
            if limit and len(shown) == limit:
                stop.set()
        return shown

    pace = Pace(20)
    pace.index(5)
    shown = asyncio.run(collect(pace, 5, threading.Event()))
    assert shown == sorted(set(shown)) and all(i < 4 for i in shown) and not pace.behind(5)  # then the final view
    stopped = Pace(20)
    stopped.index(50)
    assert len(asyncio.run(collect(stopped, 50, threading.Event(), limit=2))) == 2


@pytest.mark.parametrize("ms", [-1, MAX_PACE_MS + 1])
def test_a_pace_out_of_range_is_refused_by_name(ms):
    with pytest.raises(ValueError, match="pace must be in"):
        Pace(ms)


def test_a_slowed_race_shows_every_lane_at_the_same_race_time_and_keeps_their_order(diffusion_trace, ar_trace):
    clock = Clock()
    motion = SlowMotion(10, clock)
    lanes = (diffusion_trace, ar_trace)
    ends = [trace.end.t for trace in lanes]
    assert motion.at(diffusion_trace).steps == []  # the first frame starts the clock at race time 0
    clock.now = 10 * min(ends) / 2
    shown = [motion.at(trace) for trace in lanes]
    assert all(not trace.done and trace.last_t() <= min(ends) / 2 for trace in shown)
    assert motion.behind(lanes)
    clock.now = 10 * max(ends)
    assert [motion.at(trace) for trace in lanes] == list(lanes) and not motion.behind(lanes)  # every record shown


def test_at_one_times_the_race_is_drawn_as_it_runs_and_the_range_is_refused_by_name():
    motion = SlowMotion(1)
    assert not motion.slowed and motion.now() == float("inf") and not motion.behind([])
    for factor in (0.5, MAX_SLOW_MOTION + 1):
        with pytest.raises(ValueError, match=rf"slow motion must be in \[1, {MAX_SLOW_MOTION}\] times slower"):
            SlowMotion(factor)


def test_the_race_tail_ends_when_every_lane_is_shown_or_when_asked(diffusion_trace):
    async def collect(motion, stop, limit=None):
        times = []
        async for t in motion.tail([diffusion_trace], stop):
            times.append(t)
            if limit and len(times) == limit:
                stop.set()
        return times

    fast = SlowMotion(2)
    times = asyncio.run(collect(fast, threading.Event()))
    assert times == sorted(times) and not fast.behind([diffusion_trace])
    slow = SlowMotion(MAX_SLOW_MOTION)
    assert len(asyncio.run(collect(slow, threading.Event(), limit=2))) == 2
