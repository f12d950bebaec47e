"""Live runs: a dg stream running in a background thread into a growing `Trace`, for the UI to watch.

The sampler (or AR decoding) runs in its own thread at full speed and appends every record to a
`Trace` under a lock; the UI polls it at a frame interval (`watch`, or `awatch` inside an event
loop) and gets a consistent snapshot whenever new records arrived. Generation never waits for
drawing; every step stays in the trace for the replay, however many frames were drawn.
A `threading.Event` stops a run between two steps; what was produced so far stays in the trace.

Runs of every session share the model through `dg.engine.turns`: a fair line for a place, then one
step per turn, each run within a budget; a seeded run keeps its own RNG state across turns, so a
seed gives the same canvas however many users run at once.

A run's records come from its runner (dg.engine.runner: in this process, or the app's worker process,
dg.engine.worker, whose run's thread asks that process for each record in its turn and waits on the pipe
outside the GIL); everything else here is the same whichever runner it is.

`prepare_run` validates what a user set (prompt, image, seed, knobs) before any thread starts.
A run whose thread raises ends with finish_reason "error" and keeps its partial trace.

    python -m pytest tests/engine/test_runs.py -q
"""

import asyncio
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent import futures
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import fields

from dg.config import SamplerConfig, check_seed
from dg.prompts import build_inputs, check_inputs, open_image
from dg.trace import RunEnd, Trace
from dg.engine.memory import trim
from dg.engine.turns import TURNS, Ticket, Turns

# Runs reuse worker threads: a fresh thread per run left ~0.1 MB of torch's per-thread state behind each
# time (measured). Room for every run the open events can start, so a race's three lanes always all start.
WORKERS = ThreadPoolExecutor(max_workers=512, thread_name_prefix="dg-live")
DEFAULT_FPS = 14.0  # ≥ 10 frames/s on screen; each frame costs the sampler CPU on a small machine
HEARTBEAT_S = 0.5  # a frame at least this often, so a waiting UI can say why


class LiveRun:
    """One run in a background thread. A run of a decoding mode (`LiveRun.of`) takes its records straight from
    its runner's stream; any other `body(emit, cancel)` (a separate model's `generate()`) calls `emit` for each."""

    def __init__(self, body: Callable | None = None, *, seed: int | None = None, label: str = "",
                 start_gate: threading.Barrier | None = None, turns: Turns | None = None):
        self.body, self.seed, self.label, self.start_gate = body, seed, label, start_gate
        self.request: tuple | None = None  # (runner, mode, inputs, settings, draft) of a run of a decoding mode
        self.trace = Trace()
        self.cancel = threading.Event()
        self.turns = turns or TURNS
        self.ticket = Ticket(seed, self.cancel, group=start_gate)  # a race's lanes are placed together
        self.error: str | None = None
        self.queued = True  # True until the run first holds the model
        self.started_at: float | None = None  # perf_counter() when it did
        self._count = 0
        self._finished = False
        self._lock = threading.Lock()
        self._future: Future | None = None

    @classmethod
    def of(cls, runner, mode: str, inputs: dict, settings: SamplerConfig, seed: int | None = None, *,
           draft=None, **kwargs) -> "LiveRun":
        """A run of decoding `mode` (dg.config.MODES) on `runner`'s model, not yet started: seeded (None for
        greedy AR, which draws nothing); a diffusion run warm-starts from `draft` (a `dg.drafts.Draft`) with its
        pinned positions held; `kwargs` as `LiveRun`'s (label, start_gate, turns)."""
        run = cls(seed=seed, **kwargs)
        run.request = (runner, mode, inputs, settings, draft)
        return run

    def start(self) -> "LiveRun":
        self._future = WORKERS.submit(self._work)
        return self

    def _emit(self, record) -> None:
        with self._lock:
            self.trace.add(record)
            self._count += 1
        if record.kind == "start" and record.config.get("replica"):
            self.ticket.model = record.config["replica"]  # from now on it takes turns with its replica's runs
        # a hybrid run's verified tokens come out of its verify pass (its round record took the turn): handing
        # the model on at each of them would pace hybrid to one token per turn, as AR
        if record.kind != "end" and not (record.kind == "token" and self.trace.mode == "hybrid"):
            self.turns.step_done(self.ticket, counted=record.kind in ("step", "token"))

    def _work(self) -> None:
        try:
            if self.start_gate is not None:
                self.start_gate.wait()
            if self.turns.place(self.ticket):  # False: stopped while waiting in line
                self.turns.take(self.ticket)  # seeds torch's RNG right before the run, as the CLI does
                self.queued, self.started_at = False, time.perf_counter()
                if self.request is not None and not self.cancel.is_set():  # a decoding mode: its runner's records
                    runner, mode, inputs, settings, draft = self.request
                    for record in runner.stream(mode, inputs, settings, self.seed, self.cancel, draft):
                        self._emit(record)
                elif not self.cancel.is_set():
                    self.body(self._emit, self.cancel)
        except Exception as err:  # the UI shows it; the partial trace stays
            self.error = f"{type(err).__name__}: {err}"
            if self.trace.start is not None and self.trace.end is None:
                self._emit(RunEnd("error", 0, 0, self.trace.last_t()))
        finally:
            self.turns.leave(self.ticket)
            self._finished = True
            trim()  # what the run freed goes back to the system, so a long-serving app stays flat

    @property
    def over_budget(self) -> str | None:
        """What the run used up when its budget stopped it (e.g. '60.0 s of model time'), else None."""
        return self.ticket.over_budget

    @property
    def finished(self) -> bool:
        return self._finished

    def stop(self) -> None:
        self.cancel.set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once the run has ended (False after `timeout` seconds, or if it was never started)."""
        return self._future is not None and not futures.wait([self._future], timeout).not_done

    def result(self, timeout: float, what: str = "the run") -> Trace:
        """The started run's trace once it has ended; a ValueError saying why not when it raised, or when it
        has not ended within `timeout` seconds (it is stopped then)."""
        if not self.wait(timeout) or self.error:
            self.stop()
            raise ValueError(self.error or f"{what} did not finish in {timeout:g} s")
        return self.snapshot()

    def snapshot(self) -> Trace:
        """A consistent copy of the trace so far (records are never mutated, so a copy of each list is enough)."""
        with self._lock:
            t = self.trace
            return Trace(**{f.name: list(v) if isinstance(v := getattr(t, f.name), list) else v for f in fields(Trace)})

    def frames(self, fps: float = DEFAULT_FPS) -> Iterator[Trace]:
        """Snapshots as records arrive, at most `fps` a second; the last one is the finished trace."""
        for (snapshot,) in watch([self], fps):
            yield snapshot


def watch(runs: list[LiveRun], fps: float = DEFAULT_FPS) -> Iterator[tuple[Trace, ...]]:
    """Snapshots of several runs together, polled at the frame interval; the last tuple is final."""
    for snaps, deadline in _polls(runs, fps):
        if snaps is not None:
            yield snaps
        if deadline is not None:
            time.sleep(max(0.0, deadline - time.perf_counter()))


async def awatch(runs: list[LiveRun], fps: float = DEFAULT_FPS) -> AsyncIterator[tuple[Trace, ...]]:
    """`watch` for an event loop: one timer wake-up per frame and no thread hand-offs, so a server
    streaming frames steals as little CPU as possible from the sampler thread."""
    for snaps, deadline in _polls(runs, fps):
        if snaps is not None:
            yield snaps
        if deadline is not None:
            await asyncio.sleep(max(0.0, deadline - time.perf_counter()))


def _polls(runs, fps):
    """(snapshots or None, deadline of the next poll or None once finished): snapshots only when new
    records arrived (or a heartbeat is due), deadlines one frame interval apart."""
    interval, seen, last = 1.0 / fps, None, -HEARTBEAT_S
    while True:
        finished = all(r.finished for r in runs)
        counts = tuple(r._count for r in runs)
        now = time.perf_counter()
        fresh = counts != seen or finished or now - last >= HEARTBEAT_S
        if fresh:
            seen, last = counts, now
        # one frame interval even while in line: a run that starts at once (the usual case) shows its
        # first step a frame later, not a heartbeat later; a poll that finds nothing new costs no snapshot
        yield (tuple(r.snapshot() for r in runs) if fresh else None), (None if finished else now + interval)
        if finished:
            return


class Sessions:
    """The live runs of each browser session, so a Stop click reaches the run its session started; a
    session has one live action (a run, an A/B pair or a race) at a time, and nothing once it ended."""

    def __init__(self):
        self._runs: dict[str, list[LiveRun]] = {}
        self._lock = threading.Lock()

    def add(self, session: str, *runs: LiveRun) -> None:
        """Register the runs of one action; a ValueError (and the runs stopped) if the session already
        has unfinished runs: one client cannot queue many runs ahead of other sessions."""
        with self._lock:
            busy = any(not r.finished for r in self._runs.get(session, []))
            if not busy:
                self._runs[session] = list(runs)
        if busy:
            for run in runs:
                run.stop()
            raise ValueError("this session already has a run going: wait for it to finish or press Stop")
        for run in runs:
            run.ticket.session = session

    def discard(self, session: str, *runs: LiveRun) -> None:
        """Forget these runs (they ended or their page went away): no session keeps finished runs here."""
        with self._lock:
            left = [r for r in self._runs.get(session, []) if r not in runs]
            if left:
                self._runs[session] = left
            else:
                self._runs.pop(session, None)

    def __len__(self) -> int:
        with self._lock:
            return sum(len(runs) for runs in self._runs.values())

    def stop(self, session: str) -> int:
        """Set the cancel event of every unfinished run of `session`; return how many there were."""
        with self._lock:
            runs = [r for r in self._runs.pop(session, []) if not r.finished]
        for run in runs:
            run.stop()
        return len(runs)


def prepare_run(runner, prompt: str, image, thinking: bool, seed, knobs: dict) -> tuple[dict, SamplerConfig, int]:
    """Validate what a user set (prompt, image path, seed, knob values) and build the model inputs.

    Raises ValueError naming the offending value; nothing has started yet when it does.
    """
    config = runner.sampler_config.with_values(knobs)
    seed = check_seed(seed)
    try:
        picture = open_image(image) if image else None
    except ValueError as err:  # name the upload, not the server's temp path
        raise ValueError(str(err).replace(str(image), f"'{os.path.basename(str(image))}'")) from None
    inputs = build_inputs(runner.processor, prompt, images=picture, thinking=bool(thinking), device=runner.device)
    check_inputs(runner.model, inputs, config)
    return inputs, config, seed


def with_knob(runner, inputs: dict, config: SamplerConfig, knob: str, value) -> SamplerConfig:
    """`config` with one more knob set (A/B's B), held to the same ranges and context check as a run."""
    changed = config.with_values({knob: value})
    check_inputs(runner.model, inputs, changed)
    return changed


def waiting_message(run: LiveRun) -> str:
    """The status of a run that has no step yet: its place in line, or that it is starting."""
    if run.queued:
        place = run.turns.position(run.ticket)
        if place is not None:
            return (f"⏳ waiting in line: **{place}** of {run.turns.load()['waiting']}. {run.turns.slots} runs share "
                    f"the model step by step, each within its budget; yours starts when one ends.")
        return "⏳ starting…"
    return "running… (encoder pass and first decoder step)"
