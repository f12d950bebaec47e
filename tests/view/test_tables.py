"""The Markdown lines of finished runs: a run's summary names how it ended and its mode's own counts; a race ends
with one line that names the fastest correct lane, every lane's rate and whether each answer matches the reference."""

from dg.engine import race
from dg.engine.runner import InProcess
from dg.engine.runs import LiveRun
from dg.ui.kept import History
from dg.prompts import build_inputs
from dg.examples import Check
from dg.trace import RunEnd, Trace
from dg.view import tables
from tests.engine.test_race import PROMPT, finish


def test_the_race_ends_with_one_line_naming_the_fastest_correct_lane_and_each_answers_check(loaded, config):
    d, a, h = finish(race.start_race(InProcess.of(loaded), PROMPT, config=config, seed=0))
    lanes = {"diffusion": d, "AR": a, "hybrid": h}
    rate = {name: t.metrics()["effective_tok_s"] for name, t in lanes.items()}
    checks = {"diffusion": Check("42", True), "AR": Check("42", False), "hybrid": Check("42", True)}
    line = tables.verdict(lanes, checks)
    winner = max(("diffusion", "hybrid"), key=rate.get)  # AR is wrong: never the winner, however fast
    assert line.startswith(f"**{winner[0].upper() + winner[1:]} wins**: the fastest correct lane") and "\n" not in line
    assert f"{rate[winner] / rate['AR']:.2f}× AR's rate" in line
    assert "Reference answer `42`: diffusion ✓, AR ✗, hybrid ✓." in line
    only_ar = tables.verdict(lanes, {name: Check("42", name == "AR") for name in lanes})
    assert only_ar.startswith("**AR wins**: the fastest correct lane.")
    assert tables.verdict(lanes, {name: Check("42", False) for name in lanes}).startswith("**No lane is right**")
    unchecked = tables.verdict(lanes, {name: None for name in lanes})
    assert "Reference" not in unchecked and "no reference answer to check" in unchecked
    assert tables.verdict({"diffusion": Trace(), "AR": Trace()}).startswith("**No winner**")


def test_a_stopped_run_is_labelled_and_the_summary_names_how_each_run_ended(loaded, config):
    run = LiveRun.of(InProcess.of(loaded), "diffusion", build_inputs(loaded.processor, PROMPT), config, seed=0).start()
    run.wait(60)
    trace = run.snapshot()
    assert tables.summary(trace).startswith("**Done**")
    trace.end = RunEnd("cancelled", 1, 1, 0.1)
    assert "(stopped)" in History().keep(PROMPT, trace).labels[-1]
    assert tables.summary(trace).startswith("**Stopped**")
    trace.end = RunEnd("error", 1, 1, 0.1)
    assert tables.summary(trace).startswith("**Failed**")
