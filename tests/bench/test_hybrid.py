"""`python -m dg.bench.hybrid`: a row per layout, draft-step count and skill, every reply greedy AR's, one JSON
line."""

import json

import pytest
import torch

from dg.ar import generate_ar
from dg.bench.hybrid import ROWS, main, restart_hybrid
from dg.loading import load
from dg.prompts import build_inputs


def test_the_design_dials_report_every_skill_equal_to_ar_in_both_layouts(capsys, positive_finite):
    rows = main(["--layouts", "aligned", "restart", "--draft-steps", "2", "--n", "1"])
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == rows
    assert [row["layout"] for row in rows] == ["aligned"] * len(ROWS) + ["restart"] * len(ROWS)
    assert all(row["equals_ar"] == 1.0 and row["draft_steps"] == 2 for row in rows)
    assert all(positive_finite(row[k]) for row in rows for k in ("tokens_per_round", "tpf", "speedup_vs_ar"))


def test_the_restart_layout_gives_greedy_ar_s_reply_to_its_eos_a_round_at_a_time(one_thread):
    """A three-term sum with the trace (the layout's hard case): AR's reply to its EOS, at least a token
    per round, one decoder and one encoder pass a round."""
    tiny = load()
    inputs = build_inputs(tiny.processor, "What is 716 + 230 + 95794?", thinking=True)
    torch.manual_seed(0)
    out = restart_hybrid(tiny.model, inputs, tiny.sampler_config, draft_steps=1)
    ar = generate_ar(tiny.model, inputs, tiny.sampler_config)
    assert out["token_ids"] == ar.token_ids and out["token_ids"][-1] in tiny.eos_token_ids
    assert 1 <= out["rounds"] <= len(ar.token_ids) and out["nfe"] == 1 + 2 * out["rounds"]


def test_a_draft_step_count_below_one_is_refused():
    with pytest.raises(SystemExit) as err:
        main(["--draft-steps", "0"])
    assert err.value.code == 2
