"""`python -m dg.bench.hybrid`: a row per draft-step count and skill, every reply greedy AR's, one JSON line."""

import json

import pytest

from dg.bench.hybrid import ROWS, main


def test_the_design_dial_reports_every_skill_equal_to_ar(capsys, positive_finite):
    rows = main(["--draft-steps", "1", "--n", "1"])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == rows
    assert len(rows) == len(ROWS) and all(row["equals_ar"] == 1.0 for row in rows)
    assert all(positive_finite(row[k]) for row in rows for k in ("tokens_per_round", "tpf", "speedup_vs_ar"))


def test_a_draft_step_count_below_one_is_refused():
    with pytest.raises(SystemExit) as err:
        main(["--draft-steps", "0"])
    assert err.value.code == 2
