"""Slow motion: the live view shows step i no sooner than i × pace, never ahead of the sampler, and
its tail after the run ends can be stopped."""

import asyncio
import threading

import pytest

from dg.ui.pace import MAX_PACE_MS, Pace


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
