"""Educator helpers: the forward process, one bare decoder pass, and a recorded step in six stages."""

import numpy as np
import pytest
import torch

from dg import learn
from dg.config import SamplerConfig
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from tests.trace_fixtures import PROMPT, ar_trace, diffusion_trace, model  # noqa: F401


def test_corrupt_at_t0_is_the_identity_and_at_t1_replaces_every_token():
    ids = list(range(100, 300))
    assert learn.corrupt(ids, 0.0, 1000) == (ids, [False] * len(ids))
    noisy, replaced = learn.corrupt(ids, 1.0, 1000, seed=1)
    assert all(replaced)
    assert sum(a != b for a, b in zip(noisy, ids)) >= 0.98 * len(ids)
    assert all(0 <= t < 1000 for t in noisy)


def test_corrupt_replaces_a_fraction_that_tracks_t_and_is_seeded():
    ids = [7] * 20_000
    for t in (0.1, 0.5, 0.9):
        noisy, replaced = learn.corrupt(ids, t, 50_000, seed=3)
        assert abs(np.mean(replaced) - t) < 0.02
        assert all(n == 7 for n, r in zip(noisy, replaced) if not r)
    assert learn.corrupt(ids[:50], 0.5, 100, seed=4) == learn.corrupt(ids[:50], 0.5, 100, seed=4)
    assert learn.corrupt(ids[:50], 0.5, 100, seed=4) != learn.corrupt(ids[:50], 0.5, 100, seed=5)


@pytest.mark.parametrize("t", [-0.1, 1.5])
def test_corrupt_rejects_t_outside_the_unit_interval(t):
    with pytest.raises(ValueError, match="t must be in"):
        learn.corrupt([1, 2, 3], t, 10)


def test_denoise_once_is_the_samplers_first_step_on_the_same_canvas(model, processor):
    canvas_length = model.config.canvas_length
    canvas = list(range(20, 20 + canvas_length))
    out = learn.denoise_once(model, processor, PROMPT, canvas)
    assert {len(out[k]) for k in ("argmax", "entropy", "topk_ids", "topk_probs")} == {canvas_length}
    config = SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=1,
                                                  max_new_tokens=canvas_length, backend="torch")
    first = generate_diffusion(model, build_inputs(processor, PROMPT), config,
                               init_canvas=torch.tensor([canvas])).steps[0]
    config_t_max = SamplerConfig.from_generation_config(model.generation_config).t_max
    assert first.temperature == pytest.approx(config_t_max) == out["temperature"]
    assert out["argmax"] == first.argmax.tolist()
    np.testing.assert_allclose(out["entropy"], first.entropy, atol=1e-4)
    np.testing.assert_allclose(out["topk_probs"], first.topk_probs, atol=1e-5)


def test_denoise_once_pads_short_canvases_and_truncates_long_ones(model, processor):
    canvas_length = model.config.canvas_length
    short = learn.denoise_once(model, processor, PROMPT, [30, 31, 32])
    assert short["canvas"] == [30, 31, 32] + [model.generation_config.pad_token_id] * (canvas_length - 3)
    long = learn.denoise_once(model, processor, PROMPT, list(range(40, 40 + 2 * canvas_length)))
    assert len(long["argmax"]) == canvas_length
    with pytest.raises(ValueError, match="canvas ids must be in"):
        learn.denoise_once(model, processor, PROMPT, [10 ** 9])


def test_walkthrough_has_the_six_stages_with_the_records_numbers(diffusion_trace, processor):
    for i, rec in enumerate(diffusion_trace.steps):
        stages = learn.walkthrough(diffusion_trace, processor.tokenizer, i)
        assert [s["stage"] for s in stages] == list(learn.STAGES)
        by = {s["stage"]: s["numbers"] for s in stages}
        assert by["temperature"]["temperature"] == rec.temperature
        assert by["sort_bound"]["k"] == by["accept"]["accepted"] == rec.n_accepted
        assert by["accept"]["positions"] == np.flatnonzero(rec.accepted).tolist()
        assert by["accept"]["tokens"] == rec.sampled[rec.accepted].tolist()
        assert by["renoise"]["renoised"] == len(rec.accepted) - rec.n_accepted
        assert by["decode"]["self_conditioning"] == (rec.step > 1)
        assert sorted(by["sort_bound"]["sorted_entropy"]) == by["sort_bound"]["sorted_entropy"]
        assert all(s["title"] and s["html"].count("<table") == 1 for s in stages)


def test_walkthrough_sees_the_accepted_tokens_fed_into_the_next_step(diffusion_trace, processor):
    rec = diffusion_trace.steps[0]
    renoise = learn.walkthrough(diffusion_trace, processor.tokenizer, 0)[-1]["numbers"]
    assert renoise["next_step_kept"] == rec.n_accepted
    nxt = learn.walkthrough(diffusion_trace, processor.tokenizer, 1)[0]["numbers"]
    assert nxt["kept_from_previous_step"] == rec.n_accepted


def test_walkthrough_rejects_ar_traces_and_steps_out_of_range(diffusion_trace, ar_trace, processor):
    with pytest.raises(ValueError, match="step_index"):
        learn.walkthrough(diffusion_trace, processor.tokenizer, len(diffusion_trace.steps))
    with pytest.raises(ValueError, match="ar trace"):
        learn.walkthrough(ar_trace, processor.tokenizer, 0)
