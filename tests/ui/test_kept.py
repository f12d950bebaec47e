"""What a session keeps: its newest runs under unique labels, found by label; kept runs stay within bounds (a
session's history by bytes, every session's together by shedding the oldest runs' steps); a run nobody keeps
frees its share at once."""

import gc

from dg.prompts import build_inputs
from dg.trace import Trace
from dg.ui import kept
from dg.ui.kept import History, KeptTraces, nbytes, newest_within
from dg.engine.runs import LiveRun
from tests.engine.conftest import PROMPT


def test_run_history_keeps_the_newest_runs_and_finds_them_by_label(loaded, config):
    run = LiveRun.of(loaded, "diffusion", build_inputs(loaded.processor, PROMPT), config, seed=0).start()
    run.wait(60)
    history = kept.History()
    for _ in range(kept.MAX_RUNS + 2):
        history = history.keep(PROMPT, run.trace)
    runs = history.runs
    assert len(history) == kept.MAX_RUNS
    assert len(set(history.labels)) == kept.MAX_RUNS and runs[-1].label.startswith(f"#{kept.MAX_RUNS + 2} ")
    assert history.find(runs[3].label) is runs[3].trace
    assert history.find("no such run") is runs[-1].trace
    assert kept.History().find(None) is None


def copy_of(trace: Trace) -> Trace:
    return Trace(start=trace.start, steps=list(trace.steps), canvases=list(trace.canvases), tokens=list(trace.tokens),
                 end=trace.end)


def test_a_trace_s_bytes_grow_with_its_steps(diffusion_trace):
    half = copy_of(diffusion_trace)
    half.steps = half.steps[: len(half.steps) // 2]
    assert 0 < nbytes(half) < nbytes(diffusion_trace)


def test_a_session_keeps_its_newest_runs_within_its_bytes(diffusion_trace, monkeypatch):
    size = nbytes(diffusion_trace)
    monkeypatch.setattr(kept, "SESSION_BYTES", int(2.5 * size))
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
