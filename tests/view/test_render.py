"""The HTML views draw what the trace recorded: one cell per position, coloured by its state."""

import re
from html import unescape

import numpy as np
import pytest

from dg.config import SamplerConfig
from dg.prompts import THOUGHT_CLOSE, THOUGHT_OPEN, build_inputs
from dg.sampler import generate_diffusion
from dg.testing import tiny_model_for
from dg.trace import STOP_LABELS, CanvasRecord, RunEnd, Trace
from dg.view import render, theme


def cells(html: str) -> list[tuple[int, str]]:
    """(position, state) of every grid cell, in order."""
    return [(int(pos), state) for state, pos in re.findall(r'class="dg-cell dg-(\w+)[^"]*" data-pos="(\d+)"', html)]


def test_token_piece_shows_spaces_newlines_bytes_and_special_tokens_visibly(processor):
    tok = processor.tokenizer
    assert theme.token_piece(tok, tok.convert_tokens_to_ids("<0x0A>")) == "⏎"
    assert theme.token_piece(tok, tok.convert_tokens_to_ids("<0x1B>")) == "0x1B"
    assert theme.token_piece(tok, tok.convert_tokens_to_ids("<turn|>")) == "<turn|>"
    spaced = next(t for t in tok.get_vocab() if t.startswith("▁") and len(t) > 1)
    assert theme.token_piece(tok, tok.convert_tokens_to_ids(spaced)) == "␣" + spaced[1:]
    assert theme.token_piece(tok, len(tok) + 10) == f"[{len(tok) + 10}]"


def test_every_step_renders_exactly_canvas_length_cells(diffusion_trace, processor):
    canvas_length = diffusion_trace.start.canvas_length
    for i in range(len(diffusion_trace.steps)):
        for show in render.SHOWS:
            found = cells(render.canvas_html(diffusion_trace, processor.tokenizer, i, show=show))
            assert [pos for pos, _ in found] == list(range(canvas_length))


def test_accepted_positions_are_in_the_accepted_state_and_the_others_follow_the_definitions(diffusion_trace):
    for i, rec in enumerate(diffusion_trace.steps):
        states = render.position_states(diffusion_trace, i)
        earlier = [r for r in diffusion_trace.steps[:i] if r.canvas == rec.canvas]
        for pos, state in enumerate(states):
            if state == "pad":
                continue
            assert (state == "accepted") == bool(rec.accepted[pos])
            if state == "remelted":
                assert any(r.accepted[pos] for r in earlier)
            if state == "changed":
                assert earlier and earlier[-1].argmax[pos] != rec.argmax[pos]
            if state == "noise":
                assert not any(r.accepted[pos] for r in earlier)
                assert not earlier or earlier[-1].argmax[pos] == rec.argmax[pos]


def test_cells_carry_the_state_of_their_position(diffusion_trace, processor):
    i = len(diffusion_trace.steps) // 2
    html = render.canvas_html(diffusion_trace, processor.tokenizer, i)
    assert [state for _, state in cells(html)] == render.position_states(diffusion_trace, i)


def test_positions_after_eos_render_as_pad(eos_trace, processor):
    canvas = eos_trace.canvases[0]
    assert canvas.eos and eos_trace.end.finish_reason == "eos"
    last = max(i for i, r in enumerate(eos_trace.steps) if r.canvas == 0)
    eos_at = int(np.flatnonzero(np.isin(eos_trace.steps[last].argmax, eos_trace.start.eos_token_ids))[0])
    states = [state for _, state in cells(render.canvas_html(eos_trace, processor.tokenizer, last))]
    assert states[eos_at] != "pad"
    assert states[eos_at + 1:] == ["pad"] * (len(states) - eos_at - 1)
    assert all(t == eos_trace.start.pad_token_id for t in canvas.committed[eos_at + 1:])


def test_committed_canvases_are_drawn_above_the_live_one(diffusion_trace, processor):
    first_of_second = next(i for i, r in enumerate(diffusion_trace.steps) if r.canvas == 1)
    html = render.canvas_html(diffusion_trace, processor.tokenizer, first_of_second, title="demo")
    assert "canvas 1 ·" in html and html.index('<div class="dg-committed-rows"') < html.index('<div class="dg-grid"')
    assert len(cells(html)) == diffusion_trace.start.canvas_length
    assert '<div class="dg-committed-rows"' not in render.canvas_html(diffusion_trace, processor.tokenizer, 0)


def test_thought_positions_are_marked_and_token_text_is_escaped(diffusion_trace, processor, with_thought):
    tok = processor.tokenizer
    trace = with_thought(diffusion_trace, tok, open_at=2, close_at=6)
    html = render.canvas_html(trace, tok)
    thought = re.findall(r'class="dg-cell dg-\w+ dg-thought" data-pos="(\d+)"', html)
    assert [int(p) for p in thought] == [2, 3, 4, 5, 6]
    assert "&lt;|channel&gt;" in html and "<|channel>" not in html


def test_show_picks_the_row_drawn_and_rejects_unknown_rows(diffusion_trace, processor):
    tok = processor.tokenizer
    rec = diffusion_trace.steps[3]
    noisy = render.canvas_cells(diffusion_trace, tok, 3, show="noisy")
    assert [c["id"] for c in noisy] == rec.noisy.tolist()
    assert [c["id"] for c in render.canvas_cells(diffusion_trace, tok, 3, show="sampled")] == rec.sampled.tolist()
    with pytest.raises(ValueError, match="show must be one of"):
        render.canvas_html(diffusion_trace, tok, 3, show="logits")


def test_an_idle_page_says_what_to_do_and_a_just_started_run_waits_for_its_first_step(diffusion_trace, processor):
    tok = processor.tokenizer
    assert "waiting" not in render.canvas_html(Trace(), tok) + render.step_panel_html(Trace())
    assert "then Generate" in render.step_panel_html(Trace())
    started = Trace(start=diffusion_trace.start)
    html = render.canvas_html(started, tok)
    assert "waiting for first step" in html
    assert html.count('data-pos="') == started.start.canvas_length
    assert "waiting for first step" in render.step_panel_html(started)
    assert "no committed text yet" in render.text_view_html(started, tok)


def test_a_finished_run_without_text_or_answer_says_so_not_that_text_is_still_to_come(diffusion_trace, processor):
    tok = processor.tokenizer
    empty = Trace(start=diffusion_trace.start, end=RunEnd("pad_canvas", 1, 3, 0.2))
    assert "the run ended with no text (finish: pad_canvas)" in render.text_view_html(empty, tok)
    assert "yet" not in render.text_view_html(empty, tok)
    thought = tok.encode(f"{THOUGHT_OPEN}thought\nsome steps{THOUGHT_CLOSE}", add_special_tokens=False)
    only_thought = Trace(start=diffusion_trace.start, tokens=[], end=RunEnd("eos", 1, 3, 0.2))
    only_thought.canvases = [CanvasRecord(0, 1, "stable_confident", np.array(thought), len(thought), True, 0.1)]
    assert "no answer after the thought" in render.text_view_html(only_thought, tok)
    running = Trace(start=diffusion_trace.start, canvases=only_thought.canvases)
    assert "no answer after the thought" not in render.text_view_html(running, tok)  # the answer may come


def test_ar_traces_render_as_a_growing_committed_row(ar_trace, processor):
    tok = processor.tokenizer
    assert [s for _, s in cells(render.canvas_html(ar_trace, tok, 4))] == ["committed"] * 5
    assert len(cells(render.canvas_html(ar_trace, tok))) == len(ar_trace.tokens)
    assert "AR token" in render.step_panel_html(ar_trace)
    assert "entropy" in render.inspector_html(ar_trace, tok, 0, 0)


def test_legend_lists_every_state_in_order_with_its_meaning_visible_not_only_on_hover():
    html = render.legend_html()
    assert re.findall(r'dg-cell dg-(\w+)"', html) == [*theme.STATES, "thought"]
    visible = re.sub(r'title="[^"]*"', "", html)
    assert all(theme.STATE_SHORT[s] in visible for s in theme.STATES) and theme.THOUGHT_MARK in visible


def test_each_mode_s_legend_holds_every_state_its_runs_draw_and_no_other_mode_s(diffusion_trace, eos_trace, ar_trace,
                                                                                 hybrid_trace, processor):
    drawn = {mode: set() for mode in ("diffusion", "ar", "hybrid")}
    for trace in (diffusion_trace, eos_trace, ar_trace, hybrid_trace):
        steps = len(trace.tokens) if trace.mode == "ar" else len(trace.steps)
        for i in range(steps):
            drawn[trace.mode] |= set(render.position_states(trace, i))
    drawn["hybrid"].add("verified")  # its earlier canvases' rows (render.canvas_html)
    for mode, states in drawn.items():
        legend = re.findall(r'dg-cell dg-(\w+)"', render.legend_html(mode))
        assert legend[-1] == "thought" and states <= set(legend), (mode, states - set(legend))
    assert "verified" not in render.legend_html("diffusion") and "remelted" not in render.legend_html("ar")
    assert {"agreed", "bonus", "rejected"} <= drawn["hybrid"]  # the fixtures reach every verdict
    with pytest.raises(ValueError, match="mode must be one of"):
        theme.mode_states("fast")


def test_cells_show_whole_tokens_and_the_css_never_cuts_them(diffusion_trace, processor):
    tok = processor.tokenizer
    html = render.canvas_html(diffusion_trace, tok)
    shown = [re.sub(r"<[^>]+>", "", c) for c in re.findall(r'data-pos="\d+"[^>]*>(.*?)</div>', html)]
    pieces = [c["piece"] for c in render.canvas_cells(diffusion_trace, tok)]
    assert [unescape(c) for c in shown] == pieces
    cell_rule = re.search(r"\.dg-cell\{[^}]*\}", theme.CSS).group(0)
    assert "ellipsis" not in cell_rule and "overflow" not in cell_rule and "repeat(" not in theme.CSS


def test_a_256_token_canvas_like_the_release_s_shows_every_token_whole(processor):
    model = tiny_model_for(processor, canvas_length=256)
    config = SamplerConfig(max_denoising_steps=1, max_new_tokens=256, backend="torch")
    trace = generate_diffusion(model, build_inputs(processor, "hi"), config)
    html = render.canvas_html(trace, processor.tokenizer)
    shown = [unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r'data-pos="\d+"[^>]*>(.*?)</div>', html)]
    assert shown == [c["piece"] for c in render.canvas_cells(trace, processor.tokenizer)] and len(shown) == 256


def test_the_inspected_cell_is_outlined(diffusion_trace, processor):
    html = render.canvas_html(diffusion_trace, processor.tokenizer, 2, inspect=5)
    assert re.findall(r'dg-inspected" data-pos="(\d+)"', html) == ["5"]
    assert "dg-inspected" not in render.canvas_html(diffusion_trace, processor.tokenizer, 2)


def test_replay_labels_count_steps_from_one_as_the_slider_does(diffusion_trace, processor):
    n = len(diffusion_trace.steps)
    html = render.canvas_html(diffusion_trace, processor.tokenizer, 0)
    assert "canvas 1 · step 1 · showing argmax" in html and f"run step 1 of {n}" in html
    second = next(i for i, r in enumerate(diffusion_trace.steps) if r.canvas == 1)
    assert f"canvas 2 · step 1 · showing argmax · run step {second + 1} of {n}" in \
        render.canvas_html(diffusion_trace, processor.tokenizer, second)


def test_the_step_panel_labels_this_step_apart_from_the_run_up_to_it(diffusion_trace):
    first = render.step_panel_html(diffusion_trace, 0)
    this_step, run = first.split("run up to this step")
    assert "this step" in this_step and "accepted" in this_step and "NFE" not in this_step
    assert "NFE <b>2</b>" in run and "steps <b>1</b>" in run and "tokens committed <b>0</b>" in run
    assert "TPF" not in run and "still denoising" in run  # nothing committed yet: no rate to show
    last = render.step_panel_html(diffusion_trace).split("run up to this step")[1]
    m = diffusion_trace.metrics()
    assert f"NFE <b>{m['nfe']}</b>" in last and f"tokens committed <b>{m['tokens']}</b>" in last


def test_trace_until_is_the_run_as_it_stood_after_a_step(diffusion_trace):
    first_canvas_end = max(i for i, r in enumerate(diffusion_trace.steps) if r.canvas == 0)
    before = render.trace_until(diffusion_trace, first_canvas_end - 1)
    assert len(before.steps) == first_canvas_end and not before.canvases and before.end is None
    assert [c.canvas for c in render.trace_until(diffusion_trace, first_canvas_end).canvases] == [0]
    assert render.trace_until(diffusion_trace, None) is diffusion_trace


def test_a_reference_check_shows_the_answer_and_its_mark(processor):
    right, wrong = render.check_html("4528", True), render.check_html("<b>4528</b>", False)
    assert "✓" in right and "4528" in right and "✗" not in right
    assert "✗" in wrong and "&lt;b&gt;4528" in wrong


def test_step_panel_shows_where_the_run_is_and_why_a_canvas_stopped(diffusion_trace, eos_trace):
    panel = render.step_panel_html(diffusion_trace, 1)
    assert "canvas <b>1/2</b>" in panel and "step <b>2/4</b>" in panel and "τ" in panel and "NFE" in panel
    last = diffusion_trace.steps[-1]
    assert STOP_LABELS[last.stop_reason] in render.step_panel_html(diffusion_trace)
    eos_last = max(i for i, r in enumerate(eos_trace.steps) if r.canvas == 0)
    assert "EOS" in render.step_panel_html(eos_trace, eos_last)


def test_inspector_counts_argmax_flips_and_explains_out_of_range_requests(diffusion_trace, processor):
    tok = processor.tokenizer
    i = max(i for i, r in enumerate(diffusion_trace.steps) if r.canvas == 0)
    history = [r.argmax[5] for r in diffusion_trace.steps_of(0)]
    flips = sum(a != b for a, b in zip(history, history[1:]))
    html = render.inspector_html(diffusion_trace, tok, i, 5)
    assert f"argmax flips so far <b>{flips}</b>" in html
    assert html.count("<tr>") == diffusion_trace.steps[i].topk_ids.shape[1]
    assert "no position 99" in render.inspector_html(diffusion_trace, tok, i, 99)
    assert "no step 999" in render.inspector_html(diffusion_trace, tok, 999, 0)


def test_text_view_separates_thought_and_answer_and_flags_a_thought_that_never_closed(processor, text_trace):
    tok = processor.tokenizer
    closed = render.text_view_html(text_trace(tok, "<|channel>thought\nadd them<channel|>42"), tok)
    assert "<details" in closed and "add them" in closed and "42" in closed and "never closed" not in closed
    open_ = render.text_view_html(text_trace(tok, "<|channel>thought\nstill thinking"), tok)
    assert "thinking filled the canvas" in open_
    live = render.text_view_html(text_trace(tok, "<|channel>thought\nstill thinking", done=False), tok)
    assert "thinking filled the canvas" not in live and "thinking…" in live
