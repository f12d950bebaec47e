"""The forward process (one home for training and the Learn tab) and one decoder pass that undoes it."""

import numpy as np
import pytest
import torch

from dg.config import SamplerConfig
from dg.drafts import Draft
from dg.denoise import denoise_once
from dg.noise import corrupt, sample_t
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion

PROMPT = "Compute 12 + 30."


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_corrupt_at_t0_is_the_identity_and_at_t1_replaces_every_token():
    ids = torch.arange(100, 300)[None]
    noisy, replaced = corrupt(ids, 1000, 0.0)
    assert noisy.tolist() == ids.tolist() and not replaced.any()
    noisy, replaced = corrupt(ids, 1000, 1.0, seeded(1))
    assert replaced.all()
    assert (noisy != ids).sum() >= 0.98 * ids.numel()
    assert ((0 <= noisy) & (noisy < 1000)).all()


def test_corrupt_replaces_a_fraction_that_tracks_t_and_is_seeded():
    ids = torch.full((1, 20_000), 7)
    for t in (0.1, 0.5, 0.9):
        noisy, replaced = corrupt(ids, 50_000, t, seeded(3))
        assert abs(replaced.float().mean().item() - t) < 0.02
        assert (noisy[~replaced] == 7).all()
    short = ids[:, :50]
    assert torch.equal(corrupt(short, 100, 0.5, seeded(4))[0], corrupt(short, 100, 0.5, seeded(4))[0])
    assert not torch.equal(corrupt(short, 100, 0.5, seeded(4))[0], corrupt(short, 100, 0.5, seeded(5))[0])


def test_corrupt_takes_one_level_per_row():
    noisy, replaced = corrupt(torch.full((2, 4000), 7), 50_000, torch.tensor([0.0, 1.0]), seeded(0))
    assert not replaced[0].any() and replaced[1].all() and (noisy[0] == 7).all()


@pytest.mark.parametrize("t", [-0.1, 1.5])
def test_corrupt_rejects_t_outside_the_unit_interval(t):
    with pytest.raises(ValueError, match="t must be in"):
        corrupt(torch.tensor([[1, 2, 3]]), 10, t)


def test_noise_levels_are_drawn_from_eps_to_one():
    t = sample_t(10_000, 0.2, seeded(0))
    assert t.shape == (10_000,) and t.min() >= 0.2 and t.max() < 1.0
    with pytest.raises(ValueError, match="eps must be in"):
        sample_t(4, 0.0)


def test_denoise_once_is_the_samplers_first_step_on_the_same_canvas(model, processor):
    canvas_length = model.config.canvas_length
    canvas = list(range(20, 20 + canvas_length))
    out = denoise_once(model, processor, PROMPT, canvas)
    assert {len(out[k]) for k in ("argmax", "entropy", "topk_ids", "topk_probs")} == {canvas_length}
    config = SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=1,
                                                  max_new_tokens=canvas_length, backend="torch")
    first = generate_diffusion(model, build_inputs(processor, PROMPT), config,
                               draft=Draft.of(torch.tensor([canvas]))).steps[0]
    config_t_max = SamplerConfig.from_generation_config(model.generation_config).t_max
    assert first.temperature == pytest.approx(config_t_max) == out["temperature"]
    assert out["argmax"] == first.argmax.tolist()
    np.testing.assert_allclose(out["entropy"], first.entropy, atol=1e-4)
    np.testing.assert_allclose(out["topk_probs"], first.topk_probs, atol=1e-5)


def test_denoise_once_pads_short_canvases_and_truncates_long_ones(model, processor):
    canvas_length = model.config.canvas_length
    short = denoise_once(model, processor, PROMPT, [30, 31, 32])
    assert short["canvas"] == [30, 31, 32] + [model.generation_config.pad_token_id] * (canvas_length - 3)
    long = denoise_once(model, processor, PROMPT, list(range(40, 40 + 2 * canvas_length)))
    assert len(long["argmax"]) == canvas_length
    with pytest.raises(ValueError, match="canvas ids must be in"):
        denoise_once(model, processor, PROMPT, [10 ** 9])


def test_learn_s_vaguer_story_prompt_makes_recovery_fall_with_noise_where_the_full_one_ignores_it(one_thread):
    """What Learn's forward process says: the embedded model answers the story's full prompt by heart at any t,
    while from the vaguer prompt it shows fewer of the answer's tokens recovered as t rises."""
    from dg.examples import SkillExamples
    from dg.loading import EMBEDDED_MODEL, load
    from dg.prompts import encode_text
    from dg.ui.learn_tab import vaguer

    embedded = load(EMBEDDED_MODEL)
    story = next(row for row in SkillExamples.load().rows if row.skill == "story")
    ids = encode_text(embedded.tokenizer, story.answer, "answer")[:embedded.model.config.canvas_length]
    vocab = embedded.model.config.text_config.vocab_size

    def recovered(prompt, t):
        total = 0
        for seed in range(3):
            noisy, _ = corrupt(torch.tensor([ids]), vocab, t, torch.Generator().manual_seed(seed))
            out = denoise_once(embedded.model, embedded.processor, prompt, noisy[0].tolist())
            total += sum(a == c for a, c in zip(out["argmax"], ids))
        return total

    assert recovered(story.prompt, 0.9) == 3 * len(ids)  # by heart
    low, high = recovered(vaguer(story.prompt), 0.1), recovered(vaguer(story.prompt), 0.9)
    assert low >= high + 10, (low, high)  # measured: 43 and 22 of 93
