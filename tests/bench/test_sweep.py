"""The latency-dial sweep: its measurement on the embedded model, its options, and the committed result."""

import json
from pathlib import Path

import pytest

from dg.bench import sweep
from dg.loading import load
from tests.test_revisions import step, trace_of

COMMITTED = Path(__file__).resolve().parents[2] / "assets" / "measurements" / "sweep.json"


def test_caps_parse_and_bad_caps_are_one_line_errors():
    assert sweep.parse_caps("1,2,48") == (1, 2, 48)
    for bad in ("", "2,1", "0,1", "1,x", "1,1"):
        with pytest.raises(ValueError, match="caps must"):
            sweep.parse_caps(bad)


def test_convergence_counts_the_committed_tokens_the_draft_already_holds():
    steps = [step(1, [20, 21], [7, 4], [7, 4], [True, False]), step(2, [7, 22], [7, 5], [7, 5], [True, True])]
    assert sweep.convergence(trace_of(steps, [7, 5]), 3) == [0.5, 1.0, 1.0]


def test_a_small_sweep_on_the_embedded_model_obeys_its_caps():
    result = sweep.sweep(load(), n=2, seed=0, caps=(1, 2), skill_names=("json", "arithmetic"))
    for name, row in result["skills"].items():
        one, two = row["caps"]["1"], row["caps"]["2"]
        assert one["steps_per_canvas"] == 1.0 and 1.0 <= two["steps_per_canvas"] <= 2.0
        assert 0.0 <= one["accuracy"] <= 1.0 and one["wall_ms"] > 0
        assert sum(row["steps_histogram"].values()) >= 2 and max(row["steps_histogram"]) <= 2
        assert all(0.0 <= c <= 1.0 for c in row["convergence"]) and row["convergence"][-1] == 1.0
        assert row["step_ms"] > 0 and row["ar_token_ms"] > 0
    assert result["cpu"]["copy_gb_s"] > 0 and result["cpu"]["matmul_gflop_s"] > 0


def test_bad_options_exit_with_code_2_and_one_line(capsys):
    with pytest.raises(SystemExit) as info:
        sweep.main(["--caps", "3,2"])
    assert info.value.code == 2 and capsys.readouterr().err.strip().count("\n") == 0


def test_the_committed_sweep_says_how_it_was_made_and_covers_every_cap_and_skill():
    data = json.loads(COMMITTED.read_text())
    assert data["command"].startswith("python -m dg.bench.sweep") and data["date"] and data["machine"]["processor"]
    assert data["caps"] == list(sweep.CAPS)
    for row in data["skills"].values():
        assert list(row["caps"]) == [str(c) for c in sweep.CAPS]
        assert all(r["steps_per_canvas"] <= int(cap) for cap, r in row["caps"].items())
