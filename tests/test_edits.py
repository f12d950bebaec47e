"""An edited canvas (dg.edits): a run's committed canvases all pinned at first; clicks free, pin, blank and
write; the draft it gives holds every pinned token through a real re-denoised run and draws the blanks."""

import pytest
import torch

from dg.edits import CanvasEdit
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion

PROMPT = "Write a story."


@pytest.fixture(scope="module")
def run(loaded, config):
    torch.manual_seed(0)
    return generate_diffusion(loaded.model, build_inputs(loaded.processor, PROMPT), config)


def test_an_edit_starts_from_every_committed_canvas_with_every_position_pinned(run):
    edit = CanvasEdit.of_trace(run)
    assert list(edit.ids) == [int(t) for c in run.canvases for t in c.committed]
    assert all(edit.pinned) and edit.counts == {"pinned": len(edit), "free": 0, "blank": 0}
    assert len(edit) % run.start.canvas_length == 0


def test_an_ar_run_or_a_run_without_a_canvas_cannot_be_edited_and_says_why(ar_trace, run):
    with pytest.raises(ValueError, match="only a diffusion run"):
        CanvasEdit.of_trace(ar_trace)
    with pytest.raises(ValueError, match="committed no canvas"):
        CanvasEdit.of_trace(type(run)(start=run.start))


def test_a_click_toggles_a_pin_a_range_blanks_and_written_text_is_pinned(run, processor):
    edit = CanvasEdit.of_trace(run)
    freed = edit.toggled(2)
    assert not freed.pinned[2] and freed.toggled(2).pinned[2]
    blank = edit.blanked(edit.span("6-3"))  # either order, ends included
    assert blank.ids[3:7] == (None,) * 4 and not any(blank.pinned[3:7]) and blank.counts["blank"] == 4
    assert blank.toggled(4) == blank  # a blank stays blank until a token is written there
    tokens = processor.tokenizer.encode(" the cat", add_special_tokens=False)
    written = blank.written(processor.tokenizer, 3, "␣the cat")  # a shown ␣ is a space
    assert list(written.ids[3:3 + len(tokens)]) == tokens and all(written.pinned[3:3 + len(tokens)])


@pytest.mark.parametrize("cells, message", [("x", "a position or a range"), ("5-999", "past the canvas"),
                                            ("", "a position or a range")])
def test_bad_cells_are_one_line_that_names_them(run, cells, message):
    with pytest.raises(ValueError, match=message):
        CanvasEdit.of_trace(run).span(cells)


def test_text_that_runs_past_the_canvas_is_refused(run, processor):
    edit = CanvasEdit.of_trace(run)
    with pytest.raises(ValueError, match="run past the canvas"):
        edit.written(processor.tokenizer, len(edit) - 1, "one two three")


def test_a_re_denoised_run_keeps_every_pinned_token_in_every_step_and_fills_the_blanks(run, loaded, config):
    edit = CanvasEdit.of_trace(run)
    middle = edit.span(f"{len(edit) // 4}-{len(edit) // 2}")
    edit = edit.blanked(middle)
    draft = edit.to_draft(loaded.model.config.text_config.vocab_size, torch.Generator().manual_seed(0))
    assert draft.init_canvas.shape == draft.pinned.shape == (1, len(edit))
    assert not draft.pinned[0, list(middle)].any() and int(draft.pinned.sum()) == edit.counts["pinned"]
    torch.manual_seed(0)
    again = generate_diffusion(loaded.model, build_inputs(loaded.processor, PROMPT), config, draft=draft)
    length = run.start.canvas_length
    for step in again.steps:
        held = draft.pinned[0, step.canvas * length:(step.canvas + 1) * length].numpy()
        fixed = draft.init_canvas[0, step.canvas * length:(step.canvas + 1) * length].numpy()
        assert (step.pinned == held).all() and (step.argmax[held] == fixed[held]).all()
    committed = [int(t) for c in again.canvases for t in c.committed]
    kept = [p for p in range(len(edit)) if edit.pinned[p] and p < len(committed)]
    assert [committed[p] for p in kept] == [edit.ids[p] for p in kept]


def test_the_same_generator_draws_the_same_blanks(run):
    edit = CanvasEdit.of_trace(run).blanked(range(0, 4))
    a, b = (edit.to_draft(1000, torch.Generator().manual_seed(7)) for _ in range(2))
    assert torch.equal(a.init_canvas, b.init_canvas)
