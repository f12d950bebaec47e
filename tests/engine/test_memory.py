"""Kept runs stay within bounds: a session's history by bytes, every session's together by shedding
the oldest runs' steps; a run nobody keeps frees its share at once."""

import gc

from dg.trace import Trace
from dg.engine import memory
from dg.engine.memory import KeptTraces, newest_within, nbytes
from dg.engine.session import History


def copy_of(trace: Trace) -> Trace:
    return Trace(start=trace.start, steps=list(trace.steps), canvases=list(trace.canvases), tokens=list(trace.tokens),
                 end=trace.end)


def test_a_trace_s_bytes_grow_with_its_steps(diffusion_trace):
    half = copy_of(diffusion_trace)
    half.steps = half.steps[: len(half.steps) // 2]
    assert 0 < nbytes(half) < nbytes(diffusion_trace)


def test_a_session_keeps_its_newest_runs_within_its_bytes(diffusion_trace, monkeypatch):
    size = nbytes(diffusion_trace)
    monkeypatch.setattr(memory, "SESSION_BYTES", int(2.5 * size))
    history = History()
    for _ in range(6):
        history = history.keep("What is 12 + 30?", copy_of(diffusion_trace))
    assert len(history) == 2 and [r.n for r in history.runs] == [5, 6]
    assert len(newest_within(history.runs, budget=0)) == 1  # the newest run always stays


def test_past_the_total_the_oldest_kept_runs_shed_their_steps(diffusion_trace):
    size = nbytes(diffusion_trace)
    kept = KeptTraces(limit=3 * size)
    traces = [copy_of(diffusion_trace) for _ in range(5)]
    for trace in traces:
        kept.add(trace)
    assert kept.total <= 3 * size and len(kept) == 3
    assert [bool(t.steps) for t in traces] == [False, False, True, True, True]
    assert traces[0].canvases and traces[0].end is not None  # text, canvases and metrics stay


def test_a_run_nobody_keeps_frees_its_share(diffusion_trace):
    kept = KeptTraces(limit=10**12)
    trace = copy_of(diffusion_trace)
    kept.add(trace)
    assert len(kept) == 1
    del trace
    gc.collect()
    assert len(kept) == 0 and kept.total == 0


def test_trim_hands_freed_pages_back_at_most_every_few_seconds(monkeypatch):
    monkeypatch.setattr(memory, "_last_trim", 0.0)
    if not hasattr(memory._libc, "malloc_trim"):
        assert not memory.trim()  # not glibc: nothing to do
        return
    assert memory.trim() and not memory.trim()  # the second call within TRIM_EVERY_S does nothing
