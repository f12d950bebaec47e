"""Hybrid views on a real run of the embedded model: every verify round colours its draft as verified, agreed,
AR's own token and rejected, in the counts the round recorded; the canvas shows AR's token in its cell; a trace
up to a step holds the tokens verified by then; one round reads in four pictures; every other view (inspector,
panel, walkthrough, GIF, replay, JSON) takes a hybrid run."""

import re

import pytest

from dg.trace import Trace
from dg.view import export, hybrid, render, walkthrough
from dg.view.theme import STATE_COLORS, STATES


def test_every_round_colours_its_draft_in_the_counts_it_recorded(hybrid_trace):
    length = hybrid_trace.start.canvas_length
    for j, rnd in enumerate(hybrid_trace.rounds):
        i = (j + 1) * hybrid.draft_steps(hybrid_trace) - 1
        states = render.position_states(hybrid_trace, i)
        assert len(states) == length and states[:rnd.held] == ["verified"] * rnd.held
        assert states.count("agreed") == min(rnd.accepted, length - rnd.held)
        assert states.count("bonus") == (1 if rnd.bonus is not None and rnd.held + rnd.accepted < length else 0)
        assert set(states[rnd.held + rnd.accepted + 1:]) <= {"rejected", "pad"}
    last = render.position_states(hybrid_trace, len(hybrid_trace.steps) - 1)
    assert "pad" in last and "rejected" not in last  # the run ended at EOS: nothing after it is rejected


def test_the_canvas_shows_ar_s_own_token_in_its_cell_and_names_the_round(hybrid_trace, embedded_tokenizer):
    j = next(j for j, r in enumerate(hybrid_trace.rounds) if r.held + r.accepted < len(r.draft))
    rnd = hybrid_trace.rounds[j]
    cells = render.canvas_cells(hybrid_trace, embedded_tokenizer, j)
    bonus = cells[rnd.held + rnd.accepted]
    assert bonus["state"] == "bonus" and bonus["id"] == rnd.bonus != int(rnd.draft[rnd.held + rnd.accepted])
    html = render.canvas_html(hybrid_trace, embedded_tokenizer, j)
    assert f"verify round {j + 1}: AR kept {rnd.accepted} draft tokens" in html
    later = render.canvas_html(hybrid_trace, embedded_tokenizer, len(hybrid_trace.steps) - 1)
    assert "canvas 1 · verified by AR" in later  # earlier canvases as rows of verified tokens


def test_a_trace_up_to_a_step_holds_the_tokens_verified_by_then(hybrid_trace):
    ids = hybrid_trace.token_ids
    for i in range(len(hybrid_trace.steps) - 1):
        until = render.trace_until(hybrid_trace, i)
        assert len(until.rounds) == i + 1 and until.token_ids == ids[:len(until.token_ids)]
        following = hybrid_trace.rounds[i + 1]
        assert len(until.tokens) == following.canvas * hybrid_trace.start.canvas_length + following.held
        assert "verify round" in render.step_panel_html(until)


def test_one_round_reads_in_four_pictures_draft_ar_accepted_bonus(hybrid_trace, embedded_tokenizer, ar_trace):
    j = hybrid.instructive_round(hybrid_trace)
    rnd = hybrid_trace.rounds[j]
    stages = hybrid.verify_round(hybrid_trace, embedded_tokenizer, j)
    assert [s["stage"] for s in stages] == list(hybrid.VERIFY_STAGES)
    assert rnd.accepted > 0 and rnd.bonus is not None and stages[0]["numbers"]["accepted"] == rnd.accepted
    fills = [re.findall(r"background:(#[0-9a-f]{6})33", s["html"]) for s in stages]
    assert fills[0].count(STATE_COLORS["verified"]) == rnd.held
    assert fills[1].count(STATE_COLORS["agreed"]) == rnd.accepted and fills[1].count(STATE_COLORS["bonus"]) == 1
    assert fills[2].count(STATE_COLORS["rejected"]) == len(rnd.draft) - rnd.held - rnd.accepted
    assert fills[3].count(STATE_COLORS["bonus"]) == 1 and f"gained {rnd.accepted + 1} tokens" in stages[3]["html"]
    with pytest.raises(ValueError, match="hybrid round"):
        hybrid.verify_round(ar_trace, embedded_tokenizer, 0)
    with pytest.raises(ValueError, match="round must be in"):
        hybrid.verify_round(hybrid_trace, embedded_tokenizer, len(hybrid_trace.rounds))


def test_every_other_view_takes_a_hybrid_run(hybrid_trace, embedded_tokenizer, tmp_path):
    tok, last = embedded_tokenizer, len(hybrid_trace.steps) - 1
    assert "argmax flips so far" in render.inspector_html(hybrid_trace, tok, last, 3)
    assert len(walkthrough.walkthrough(hybrid_trace, tok, 1)) == len(walkthrough.STAGES)
    assert export.trace_gif(hybrid_trace, tok, tmp_path / "run.gif").stat().st_size > 0
    assert "verify round 1: AR kept" in export._frame_content(hybrid_trace, tok, 0)[0]  # the GIF frame's header
    assert "verify round" in export.trace_html(hybrid_trace, tok, tmp_path / "replay.html").read_text()
    again = Trace.from_json(export.trace_json(hybrid_trace, tmp_path / "trace.json").read_text())
    assert [r.accepted for r in again.rounds] == [r.accepted for r in hybrid_trace.rounds]
    assert again.metrics()["tokens_per_round"] == hybrid_trace.metrics()["tokens_per_round"]
    assert {"verified", "agreed", "bonus", "rejected"} <= set(STATES)
