"""The instrumented sampler is transformers' generate(), token for token (torch path, CPU), with the
reference option `end_on_pad_canvas=False` (dg's all-pad rule is tested in test_pad_canvas.py)."""

import pytest
import torch

from dg.config import SamplerConfig
from dg.drafts import Draft
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.testing import tiny_model_for


def reference_ids(model, inputs, config, seed, **kwargs):
    torch.manual_seed(seed)
    out = model.generate(**inputs, **config.generate_kwargs(), **kwargs)
    return out.sequences[0, inputs["input_ids"].shape[1]:].tolist()


def dg_ids(model, inputs, config, seed, **kwargs):
    torch.manual_seed(seed)
    trace = generate_diffusion(model, inputs, config, **kwargs)
    return [int(i) for c in trace.canvases for i in c.committed], trace


KNOBS = [
    {},
    {"entropy_bound": 0.5},
    {"entropy_bound": 3.0},
    {"t_min": 0.2, "t_max": 1.2},
    {"stability_threshold": 0},
    {"stability_threshold": 2, "confidence_threshold": 0.5},
    {"confidence_threshold": 0.3},
    {"max_denoising_steps": 3},
    {"max_new_tokens": 20},
]


@pytest.mark.parametrize("knobs", KNOBS, ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "defaults")
def test_sampler_matches_generate_for_every_knob_setting(processor, knobs):
    model = tiny_model_for(processor, sharpen=40.0)
    inputs = build_inputs(processor, "Compute 12 + 30.")
    base = dict(max_denoising_steps=12, max_new_tokens=48, backend="torch", end_on_pad_canvas=False)
    config = SamplerConfig.from_generation_config(model.generation_config, **{**base, **knobs})
    mine, trace = dg_ids(model, inputs, config, seed=3)
    assert mine == reference_ids(model, inputs, config, seed=3)
    assert len(trace.canvases) >= 2 or config.max_new_tokens <= 16


def test_sampler_matches_generate_when_canvases_settle_early(processor):
    model = tiny_model_for(processor, sharpen=40.0)
    inputs = build_inputs(processor, "Write a sentence about a cat.")
    config = SamplerConfig.from_generation_config(
        model.generation_config, confidence_threshold=0.5, max_new_tokens=48, backend="torch", end_on_pad_canvas=False)
    mine, trace = dg_ids(model, inputs, config, seed=0)
    assert mine == reference_ids(model, inputs, config, seed=0)
    assert any(c.stop_reason == "stable_confident" for c in trace.canvases)


@pytest.mark.parametrize("thinking", [False, True])
def test_sampler_matches_generate_with_eos_inside_a_canvas(processor, thinking):
    model = tiny_model_for(processor, sharpen=40.0)
    inputs = build_inputs(processor, "Describe the picture.", thinking=thinking)
    config = SamplerConfig.from_generation_config(
        model.generation_config, max_denoising_steps=8, max_new_tokens=64, backend="torch", end_on_pad_canvas=False)
    # a seed whose free run reaches canvas 2 and writes there a token it has not written before (the
    # random weights depend on the test tokenizer's corpus)
    seed, free = next((s, ids) for s in range(1, 50) for ids in [dg_ids(model, inputs, config, seed=s)[0]]
                      if len(ids) > 16 + 5 and ids[16 + 5] not in ids[:16 + 5])
    # Declare a token the model writes mid-way through canvas 2 as EOS, so generation must stop there.
    eos = free[16 + 5]
    model.generation_config.eos_token_id = [eos]
    mine, trace = dg_ids(model, inputs, config, seed=seed)
    assert mine == reference_ids(model, inputs, config, seed=seed)
    assert trace.end.finish_reason == "eos" and trace.canvases[-1].eos
    assert len(trace.canvases) == 2 and mine[-1] == 0, "tokens after the EOS must become pad"


def test_sampler_matches_generate_with_an_image_and_thinking(processor, picture):
    model = tiny_model_for(processor, sharpen=20.0)
    inputs = build_inputs(processor, "What colour is the circle?", images=[picture], thinking=True)
    assert "pixel_values" in inputs
    config = SamplerConfig.from_generation_config(
        model.generation_config, max_denoising_steps=6, max_new_tokens=32, backend="torch", end_on_pad_canvas=False)
    mine, _ = dg_ids(model, inputs, config, seed=7)
    assert mine == reference_ids(model, inputs, config, seed=7)


def test_seed_canvas_warm_start_matches_generate_decoder_input_ids(processor):
    model = tiny_model_for(processor, sharpen=40.0)
    inputs = build_inputs(processor, "Solve the sudoku: 12.4/3.12/2.41/41.3")
    config = SamplerConfig.from_generation_config(
        model.generation_config, max_denoising_steps=6, max_new_tokens=32, backend="torch", end_on_pad_canvas=False)
    seed_canvas = torch.arange(16).unsqueeze(0) + 20
    mine, trace = dg_ids(model, inputs, config, seed=5, draft=Draft.of(seed_canvas))
    ref = reference_ids(model, inputs, config, seed=5, decoder_input_ids=seed_canvas.clone())
    assert mine == ref
    assert trace.steps[0].noisy.tolist() == seed_canvas[0].tolist()
