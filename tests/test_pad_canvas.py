"""dg's one divergence from generate(): a committed canvas of only pad ends the run; the reference
option `end_on_pad_canvas=False` keeps generate()'s behaviour, token for token."""

import torch

from dg.config import SamplerConfig
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.testing import tiny_model_for


def pad_only_model(processor):
    """A tiny random model whose logits favour pad at every position, as a model that answers with
    pad and never writes EOS (the lm_head hook raises the pad logit before the softcap)."""
    model = tiny_model_for(processor)
    pad = model.generation_config.pad_token_id
    model.lm_head.register_forward_hook(lambda module, args, out: out.index_add(
        -1, torch.tensor([pad]), torch.full((*out.shape[:-1], 1), 50.0, dtype=out.dtype)))
    return model


def run(model, processor, **knobs):
    config = SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=4,
                                                  max_new_tokens=64, backend="torch", **knobs)
    torch.manual_seed(0)
    return generate_diffusion(model, build_inputs(processor, "hi"), config)


def test_a_canvas_of_only_pad_ends_the_run(processor):
    model = pad_only_model(processor)
    trace = run(model, processor)
    assert trace.end.finish_reason == "pad_canvas"
    assert len(trace.canvases) == 1 and trace.canvases[0].tokens == 0
    assert trace.start.config["end_on_pad_canvas"] is True  # recorded with the run's settings


def test_the_reference_option_keeps_denoising_to_the_budget_as_generate_does(processor):
    model = pad_only_model(processor)
    trace = run(model, processor, end_on_pad_canvas=False)
    assert trace.end.finish_reason == "max_new_tokens" and len(trace.canvases) == 4
    inputs = build_inputs(processor, "hi")
    config = SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=4, max_new_tokens=64)
    torch.manual_seed(0)
    reference = model.generate(**inputs, **config.generate_kwargs()).sequences[0, inputs["input_ids"].shape[1]:]
    assert [int(t) for c in trace.canvases for t in c.committed] == reference.tolist()
    assert run(model, processor).canvases[0].committed.tolist() == trace.canvases[0].committed.tolist()
