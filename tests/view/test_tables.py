"""The Markdown lines of finished runs: a run's summary names how it ended; a race ends with one line that says
who won, by how much, and whether each side's answer matches the reference."""

from dg.engine import race
from dg.engine.runner import InProcess
from dg.engine.runs import diffusion_run
from dg.engine.session import History
from dg.prompts import build_inputs
from dg.tiny.examples import Check
from dg.trace import RunEnd, Trace
from dg.view import tables
from tests.engine.test_race import PROMPT, finish


def test_the_race_ends_with_one_line_who_won_by_how_much_and_each_answers_check(loaded, config):
    d, a = finish(race.start_race(InProcess.of(loaded), PROMPT, config=config, seed=0))
    line = tables.verdict(d, a, {"diffusion": Check("42", True), "AR": Check("42", False)})
    x = tables.speedup(d, a)
    winner = "Diffusion" if x >= 1 else "AR"
    assert line.startswith(f"**{winner} wins**") and f"{max(x, 1 / x):.2f}×" in line and "\n" not in line
    assert "Reference answer `42`: diffusion ✓, AR ✗." in line
    assert "Reference" not in tables.verdict(d, a, {"diffusion": None, "AR": None})
    assert tables.verdict(Trace(), Trace()).startswith("**No winner**")


def test_a_stopped_run_is_labelled_and_the_summary_names_how_each_run_ended(loaded, config):
    run = diffusion_run(InProcess.of(loaded), build_inputs(loaded.processor, PROMPT), config, seed=0).start()
    run.wait(60)
    trace = run.snapshot()
    assert tables.summary(trace).startswith("**Done**")
    trace.end = RunEnd("cancelled", 1, 1, 0.1)
    assert "(stopped)" in History().keep(PROMPT, trace).labels[-1]
    assert tables.summary(trace).startswith("**Stopped**")
    trace.end = RunEnd("error", 1, 1, 0.1)
    assert tables.summary(trace).startswith("**Failed**")
