"""The edited canvas drawn (dg.view.edit) and the note beside a reply outside the tiny model's skills
(dg.view.notes): one fragment per cell with its position, pinned cells in the theme's pinned state, blanks
marked, a re-denoised run's pinned cells pinned in the live canvas too."""

import re

import torch

from dg.config import SamplerConfig
from dg.edits import CanvasEdit
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.view import notes, render
from dg.view.edit import BLANK_MARK, edit_parts
from dg.view.theme import STATES


def cells(parts) -> list[str]:
    return [p for p in parts if p.startswith('<div class="dg-cell')]


def test_every_position_is_one_cell_with_its_position_and_its_pinned_free_or_blank_state(diffusion_trace, processor):
    edit = CanvasEdit.of_trace(diffusion_trace).toggled(1).blanked(range(4, 6))
    drawn = cells(edit_parts(edit, processor.tokenizer, selected=7))
    assert len(drawn) == len(edit)
    assert [int(re.search(r'data-pos="(\d+)"', c).group(1)) for c in drawn] == list(range(len(edit)))
    assert "dg-pinned" in drawn[0] and "dg-free" in drawn[1] and "dg-blank" in drawn[4] and BLANK_MARK in drawn[5]
    assert "dg-inspected" in drawn[7] and sum("dg-inspected" in c for c in drawn) == 1
    assert "pinned" in STATES  # the one table of token states has it (legend, colours)
    html = "".join(edit_parts(edit, processor.tokenizer))
    assert f"{len(edit) - 3} positions pinned · 1 free · 2 blank" in html


def test_without_an_edit_the_view_says_what_to_do_or_why_not():
    assert "generate a run" in "".join(edit_parts(None, None))
    assert "only a diffusion run" in "".join(edit_parts(None, None, note="only a diffusion run's canvases"))


def test_a_re_denoised_run_shows_its_pinned_cells_as_pinned_in_every_step(diffusion_trace, model, processor):
    edit = CanvasEdit.of_trace(diffusion_trace).blanked(range(2, 6))
    draft = edit.to_draft(model.config.text_config.vocab_size, torch.Generator().manual_seed(0))
    torch.manual_seed(0)
    config = SamplerConfig.from_generation_config(model.generation_config, max_new_tokens=len(edit), backend="torch")
    again = generate_diffusion(model, build_inputs(processor, "Hi"), config, draft=draft)
    assert again.steps
    for i, step in enumerate(again.steps):
        states = render.position_states(again, i)
        assert [s == "pinned" for s in states] == step.pinned.tolist()


def test_the_outside_skills_note_says_the_reply_has_no_meaning_and_how_to_load_the_real_checkpoint():
    html = notes.outside_skills_html()
    assert "no meaning" in html and "five skills" in html and "Using the real checkpoint" in html
    assert notes.REAL_CHECKPOINT in html
