"""A session's run history: newest runs kept under unique labels, found by label."""

from dg.prompts import build_inputs
from dg.engine import session
from dg.engine.runs import diffusion_run
from tests.engine.conftest import PROMPT


def test_run_history_keeps_the_newest_runs_and_finds_them_by_label(loaded, config):
    run = diffusion_run(loaded, build_inputs(loaded.processor, PROMPT), config, seed=0).start()
    run.wait(60)
    history = session.History()
    for _ in range(session.MAX_RUNS + 2):
        history = history.keep(PROMPT, run.trace)
    runs = history.runs
    assert len(history) == session.MAX_RUNS
    assert len(set(history.labels)) == session.MAX_RUNS and runs[-1].label.startswith(f"#{session.MAX_RUNS + 2} ")
    assert history.find(runs[3].label) is runs[3].trace
    assert history.find("no such run") is runs[-1].trace
    assert session.History().find(None) is None
