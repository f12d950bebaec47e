"""Slow motion for a live run: the canvas shows step i no sooner than i × pace after the first step.

The sampler still runs at full speed in its thread (its timings stay true) and every step stays in
the trace; only the drawing is held back, so a run that takes 0.2 s can be narrated step by step. A
paced view can lag the sampler: once the run has finished, `Pace.behind` says the view still has steps
to show, and `Pace.tail` waits out the rest (a presenter can stop it early).

A race is slowed by a factor instead (`SlowMotion`): its lanes make different numbers of steps, tokens and
rounds, so each lane shows the records it had made at (time since the first frame) / factor, and the lanes
keep the order and the gaps they ran with: the race a presenter narrates is the race that ran.

    python -m pytest tests/ui/test_pace.py -q
"""

import asyncio
import threading
import time
from collections.abc import AsyncIterator

MAX_PACE_MS = 2000  # the slider's range: 0 (as fast as the model runs) … two seconds a step
MAX_SLOW_MOTION = 100  # the race's range: 1 (as it ran) … a hundred times slower


class Pace:
    def __init__(self, ms_per_step: float, clock=time.perf_counter):
        if not 0 <= ms_per_step <= MAX_PACE_MS:
            raise ValueError(f"pace must be in [0, {MAX_PACE_MS}] ms per step, got {ms_per_step}")
        self.seconds = ms_per_step / 1000
        self.clock = clock
        self.t0: float | None = None

    def index(self, n_steps: int) -> int | None:
        """The 0-based step to show now, of the `n_steps` recorded so far (None before the first)."""
        if n_steps == 0:
            return None
        if self.seconds <= 0:
            return n_steps - 1
        now = self.clock()
        if self.t0 is None:
            self.t0 = now
        return min(n_steps - 1, int((now - self.t0) / self.seconds))

    def behind(self, n_steps: int) -> bool:
        """Whether the view has not reached the last of `n_steps` yet."""
        i = self.index(n_steps)
        return i is not None and i < n_steps - 1

    async def tail(self, n_steps: int, stop: threading.Event) -> AsyncIterator[int]:
        """The steps still to show once the run has finished, each at its time; ends early on `stop`."""
        shown = None
        while self.behind(n_steps) and not stop.is_set():
            i = self.index(n_steps)
            if i != shown:
                shown = i
                yield i
            await asyncio.sleep(min(self.seconds, 0.05))


class SlowMotion:
    """A race replayed `factor` times slower than it ran: every lane at the same race time."""

    def __init__(self, factor: float, clock=time.perf_counter):
        if not 1 <= factor <= MAX_SLOW_MOTION:
            raise ValueError(f"slow motion must be in [1, {MAX_SLOW_MOTION}] times slower, got {factor:g}")
        self.factor = factor
        self.clock = clock
        self.t0: float | None = None

    @property
    def slowed(self) -> bool:
        return self.factor > 1

    def now(self) -> float:
        """The race time shown now: seconds since the first frame over the factor (all of it when not slowed)."""
        if not self.slowed:
            return float("inf")
        if self.t0 is None:
            self.t0 = self.clock()
        return (self.clock() - self.t0) / self.factor

    def at(self, trace):
        """`trace` as it stood at the race time shown now (dg.trace.Trace.at)."""
        return trace.at(self.now()) if self.slowed else trace

    def behind(self, traces) -> bool:
        """Whether some lane has made records the view has not reached yet."""
        return self.slowed and any(trace.last_t() > self.now() for trace in traces)

    async def tail(self, traces, stop: threading.Event) -> AsyncIterator[float]:
        """The race times still to show once every lane has ended, a frame each 50 ms; ends early on `stop`."""
        while self.behind(traces) and not stop.is_set():
            yield self.now()
            await asyncio.sleep(0.05)
