"""Drafts and pinned tokens: the blank syntax, one-line errors, pinned tokens never change in any step,
a draft over two canvases seeds both, and a draft without blanks is generate()'s warm start."""

from dataclasses import replace

import pytest
import torch

from dg.drafts import Draft, build_draft, parse_draft
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion


@pytest.fixture(scope="module")
def embedded():
    return load()


def draft_for(embedded, text, max_new_tokens=256):
    model = embedded.model
    return build_draft(embedded.tokenizer, text, canvas_length=model.config.canvas_length,
                       max_new_tokens=max_new_tokens, vocab_size=model.config.text_config.vocab_size,
                       eos_token_id=embedded.eos_token_ids[0], pad_token_id=embedded.pad_token_id)


def test_the_blank_syntax_reads_text_sizes_and_the_rest():
    assert parse_draft("A {{3}} B {{ 2 }}C{{...}}") == ["A ", 3, " B ", 2, "C", None]
    assert parse_draft("just text") == ["just text"]


@pytest.mark.parametrize("text, message", [
    ("a {{...}} b", r"^draft: \{\{\.\.\.\}\} \(the rest of the budget\) can only end a draft$"),
    ("a {{0}} b", r"^draft: a blank \{\{n\}\} needs n >= 1$"),
    ("   ", r"^draft is empty"),
])
def test_a_bad_draft_is_one_line(text, message):
    with pytest.raises(ValueError, match=message):
        parse_draft(text)


def test_a_draft_longer_than_the_budget_is_one_line(embedded):
    with pytest.raises(ValueError, match=r"^draft is \d+ tokens; the token budget holds 64 \(") as err:
        draft_for(embedded, "{{40}} {{40}}", max_new_tokens=64)
    assert "\n" not in str(err.value)


def test_an_infill_pins_its_text_and_ends_its_turn_after_the_last_piece(embedded):
    draft = draft_for(embedded, "Tom had a dog. {{12}} The dog was happy.")
    assert draft.infill and draft.init_canvas.shape == draft.pinned.shape == (1, 64)
    free = ~draft.pinned[0]
    assert int(free.sum()) == 12 and free.nonzero()[0, 0] > 0  # the blank, after the first sentence
    eos = draft.tokens - 1
    assert int(draft.init_canvas[0, eos]) == embedded.eos_token_ids[0] and draft.pinned[0, eos:].all()


def test_pinned_tokens_never_change_in_any_step_and_are_committed(embedded, one_thread):
    draft = draft_for(embedded, "Tom had a dog. {{12}} The dog was happy.")
    inputs = build_inputs(embedded.processor, "Write a story.")
    torch.manual_seed(0)
    trace = generate_diffusion(embedded.model, inputs, embedded.sampler_config, draft=draft)
    held = draft.pinned[0].numpy()
    want = draft.init_canvas[0].numpy()[held]
    for step in trace.steps:
        assert (step.pinned == held).all() and (step.noisy[held] == want).all() and (step.argmax[held] == want).all()
        assert not step.accepted[held].any() and step.accepted.any()
    committed = trace.canvases[0].committed  # pad after the pinned EOS is pad either way
    assert (committed[:draft.tokens][held[:draft.tokens]] == draft.init_canvas[0, :draft.tokens].numpy()[
        held[:draft.tokens]]).all()


def test_a_draft_over_two_canvases_seeds_both_and_holds_their_pins(embedded, one_thread):
    draft = draft_for(embedded, "Tom had a dog. " * 12 + "The dog {{4}} home.")
    assert draft.init_canvas.shape == (1, 128) and draft.pinned[0, 64:].any()
    inputs = build_inputs(embedded.processor, "Write a story.")
    torch.manual_seed(0)
    config = replace(embedded.sampler_config, max_denoising_steps=6)
    trace = generate_diffusion(embedded.model, inputs, config, draft=draft)
    assert len(trace.canvases) == 2
    second = [s for s in trace.steps if s.canvas == 1]
    held = draft.pinned[0, 64:].numpy()
    assert second and all((s.noisy[held] == draft.init_canvas[0, 64:].numpy()[held]).all() for s in second)


def test_a_draft_without_blanks_is_generate_s_warm_start(embedded, one_thread):
    draft = draft_for(embedded, "Tom had a dog.")
    assert not draft.infill and draft.init_canvas.shape == (1, 64)
    inputs = build_inputs(embedded.processor, "Write a story.")
    config = replace(embedded.sampler_config, backend="torch", end_on_pad_canvas=False, max_new_tokens=64)
    torch.manual_seed(5)
    ours = generate_diffusion(embedded.model, inputs, config, draft=Draft.of(draft.init_canvas))
    torch.manual_seed(5)
    out = embedded.model.generate(**inputs, decoder_input_ids=draft.init_canvas, **config.generate_kwargs())
    new = out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
    assert [int(i) for c in ours.canvases for i in c.committed] == new[:64]


def test_pinned_needs_a_seed_canvas_and_its_shape(embedded):
    inputs = build_inputs(embedded.processor, "Write a story.")
    with pytest.raises(ValueError, match="^pinned positions need init_canvas"):
        generate_diffusion(embedded.model, inputs, embedded.sampler_config,
                           draft=Draft(None, torch.ones(1, 64, dtype=torch.bool), 64))
    with pytest.raises(ValueError, match="^pinned must be a bool tensor"):
        generate_diffusion(embedded.model, inputs, embedded.sampler_config,
                           draft=Draft.of(torch.zeros(1, 64, dtype=torch.long), torch.ones(1, 32, dtype=torch.bool)))
