"""The release-shaped rehearsal's parts: a release-sized vocabulary that decodes every id, the random
checkpoint with the release's canvas and EOS ids, and the frame measures (bytes on the wire, draw cost)."""

import torch

from dg.bench.release import (RELEASE_EOS, WIRE_BYTES_PER_POSITION, draw_cost_ms, pseudo_words,
                              release_shaped_checkpoint, release_vocab_processor)
from dg.bench.served import wire_bytes
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.view.render import canvas_parts

VOCAB = 4096  # the rehearsal uses 262,144; the code path is the same


def test_pseudo_words_are_distinct_word_like_and_the_same_every_time():
    words = pseudo_words(5000)
    assert len(set(words)) == 5000 and words == pseudo_words(5000)
    assert 0.4 < sum(w.startswith("▁") for w in words) / len(words) < 0.6
    assert all(w.lstrip("▁").isalpha() for w in words)


def test_the_filled_vocabulary_decodes_every_id_and_encodes_as_before(processor):
    big = release_vocab_processor(processor, VOCAB)
    assert len(big.tokenizer) == VOCAB
    text = "Convert to JSON: Rosa is 65 years old and lives in Prague."
    assert big.tokenizer(text)["input_ids"] == processor.tokenizer(text)["input_ids"]
    messages = [{"role": "user", "content": text}]
    assert big.apply_chat_template(messages, add_generation_prompt=True, tokenize=False) == \
        processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    tail = big.tokenizer.convert_ids_to_tokens(list(range(VOCAB - 50, VOCAB)))
    assert all(piece and piece.lstrip("▁").isalpha() for piece in tail)


def test_the_release_shaped_checkpoint_loads_with_the_release_canvas_and_eos_and_runs(processor, tmp_path):
    release_shaped_checkpoint(tmp_path, processor, vocab_size=VOCAB, canvas_length=64, max_denoising_steps=3)
    loaded = load(str(tmp_path))
    assert loaded.model.config.canvas_length == 64 and len(loaded.tokenizer) == VOCAB
    assert list(loaded.model.generation_config.eos_token_id) == list(RELEASE_EOS)
    assert loaded.sampler_config.max_denoising_steps == 3 and loaded.sampler_config.max_new_tokens == 64
    torch.manual_seed(0)
    trace = generate_diffusion(loaded.model, build_inputs(loaded.processor, "Hi", thinking=False),
                               loaded.sampler_config)
    assert 1 <= len(trace.steps) <= 3
    costs = draw_cost_ms(trace, loaded.tokenizer)
    assert len(costs) == len(trace.steps) and all(c > 0 for c in costs)
    whole = canvas_parts(trace, loaded.tokenizer)
    assert sum(len(p) for p in whole) <= WIRE_BYTES_PER_POSITION * 64  # a whole canvas fits the per-frame bound


def test_a_frame_on_the_wire_is_its_changed_cells_not_the_whole_canvas():
    cells = [f'<div class="dg-cell dg-noise" data-pos="{p}" title="#{p} x · H=3.10 · renoised">x</div>'
             for p in range(256)]
    moved = list(cells)
    moved[7] = moved[7].replace("dg-noise", "dg-accepted")
    first, second = wire_bytes([(0.0, (cells, "panel")), (0.1, (moved, "panel"))])
    assert first > 256 * 60  # the first update goes whole
    assert second < 300  # one changed cell, and the panel that did not change costs nothing
