"""Slow motion for a live run: the canvas shows step i no sooner than i × pace after the first step.

The sampler still runs at full speed in its thread (its timings stay true) and every step stays in
the trace; only the drawing is held back, so a run that takes 0.2 s can be narrated step by step. A
paced view can lag the sampler: once the run has finished, `Pace.behind` says the view still has steps
to show, and `Pace.tail` waits out the rest (a presenter can stop it early).

    python -m pytest tests/ui/test_pace.py -q
"""

import asyncio
import threading
import time
from collections.abc import AsyncIterator

MAX_PACE_MS = 2000  # the slider's range: 0 (as fast as the model runs) … two seconds a step


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
