"""Sampler distillation (report §5): trajectory rows, the self-conditioning they carry, the loss."""

import re

import pytest
import torch

from dg.config import SamplerConfig
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.testing import tiny_model_for
from dg.tiny import distill, skills
from dg.tiny.data import make_batch
from dg.tiny.train import TrainConfig, decoder_kwargs, encoder_pass


@pytest.fixture(scope="module")
def run(processor):
    """A sharpened random tiny model (peaky logits, so top-k carries nearly all the mass) and its trace
    over two 16-token canvases. One full-attention layer: a training batch places the canvas after the
    (hidden) clean reply, so a sliding window shorter than that layout would see less of the prompt
    than the sampler does (the embedded model's window, 512, is longer than any of its sequences)."""
    torch.set_num_threads(1)
    model = tiny_model_for(processor, sharpen=40.0, layers=1)
    inputs = build_inputs(processor, "Compute 12 + 30.")
    config = SamplerConfig.from_generation_config(model.generation_config, max_new_tokens=32,
                                                  max_denoising_steps=5, backend="torch")
    torch.manual_seed(0)
    return model, inputs, generate_diffusion(model, inputs, config)


def test_every_step_of_every_canvas_becomes_a_row_aimed_at_its_committed_canvas(run):
    model, inputs, trace = run
    rows = distill.trajectory_rows(trace, inputs)
    assert len(rows) == len(trace.steps)
    for row, record in zip(rows, trace.steps):
        assert row.noisy == record.noisy.tolist() and row.encoded.canvas_index == record.canvas
        assert (row.sc_ids is None) == (record.step == 1)
        assert row.encoded.reply_ids == trace.token_ids


def test_a_corrected_trajectory_aims_its_own_states_at_the_reference_reply(run):
    model, inputs, trace = run
    assert len(trace.canvases) == 2
    two = list(range(100, 120))  # a reference spanning both 16-token canvases
    rows = distill.trajectory_rows(trace, inputs, reply=two)
    assert [r.noisy for r in rows] == [s.noisy.tolist() for s in trace.steps]
    assert all(r.encoded.reply_ids == two for r in rows)
    one = list(range(100, 110))  # a reference that ends in the first canvas: the second has no context
    rows = distill.trajectory_rows(trace, inputs, reply=one)
    assert [r.encoded.canvas_index for r in rows] == [s.canvas for s in trace.steps if s.canvas == 0]


def test_rows_feed_the_decoder_the_self_conditioning_the_sampler_fed_it(run, processor):
    """Rebuilt from top-k, the SC input gives (nearly) the logits the sampler saw at that step."""
    model, inputs, trace = run
    rows = [r for r in distill.trajectory_rows(trace, inputs) if r.encoded.canvas_index == 0]
    steps = trace.steps_of(0)
    batch = make_batch([r.encoded for r in rows], 16, processor.tokenizer, None)
    with torch.no_grad():
        enc, _ = encoder_pass(model, batch)
        sc, mask = distill.self_conditioning(rows, 16, model.config.text_config.vocab_size)
        logits = model(**decoder_kwargs(batch, enc, torch.tensor([r.noisy for r in rows])),
                       self_conditioning_logits=sc, self_conditioning_mask=mask).logits
    for i, record in enumerate(steps):
        scaled = logits[i] / record.temperature
        agree = (scaled.argmax(-1).numpy() == record.argmax).mean()
        assert agree >= 0.9, (record.step, agree)
    assert not mask[0] and mask[1:].all()


def test_the_distillation_loss_trains_the_decoder_towards_the_committed_canvas(run, processor):
    model, inputs, trace = run
    rows = distill.trajectory_rows(trace, inputs)[:4]
    cfg = distill.DistillConfig(init="unused")
    parts = distill.distill_losses(model, rows, processor, cfg)
    assert torch.isfinite(parts["loss"]) and parts["diffusion"] > 0
    parts["loss"].backward()
    assert model.model.decoder.self_conditioning.down_proj.weight.grad.abs().sum() > 0


@pytest.mark.parametrize("field, value", [("prompts", 0), ("minutes", 0), ("batch_size", 0), ("lr", 0),
                                          ("sft_share", 1.0), ("mix", ("chess",)), ("add_terms", (1,))])
def test_impossible_distillation_settings_are_rejected_by_name(field, value):
    with pytest.raises(ValueError, match=field):
        distill.DistillConfig(**{field: value})


def test_sums_of_more_terms_reach_both_the_collected_prompts_and_the_sft_batches():
    cfg = distill.DistillConfig(prompts=20, mix=("arithmetic",), add_terms=(3,))
    sums = [ex.prompt for ex in distill.prompts(cfg)]
    assert len(sums) == 20 and all(len(re.findall(r"\d+", prompt)) == 3 for prompt in sums)
    sft = distill.sft_config(cfg)
    assert sft.add_terms == (3,)
    assert sft.model.max_new_tokens >= skills.longest_addition_reply(3)  # the budget holds the trace
    assert distill.prompts(distill.DistillConfig(prompts=20, mix=("arithmetic",))) != distill.prompts(cfg)


def test_the_sft_batches_follow_the_training_recipe_they_are_given():
    recipe = TrainConfig(mix=("arithmetic", "sudoku"), low_noise_p=0.3, plausible_p=0.5, self_renoise_p=1.0,
                         sc_noisier_p=0.7)
    cfg = distill.DistillConfig(lr=2e-4, minutes=3, batch_size=8, add_terms=(2, 3), train=recipe)
    sft = distill.sft_config(cfg)
    assert sft.mix == ("arithmetic", "sudoku")
    assert (sft.low_noise_p, sft.plausible_p, sft.self_renoise_p, sft.sc_noisier_p) == (0.3, 0.5, 1.0, 0.7)
    assert (sft.lr, sft.minutes, sft.batch_size, sft.add_terms) == (2e-4, 3, 8, (2, 3))
    default = distill.sft_config(distill.DistillConfig())
    assert default.mix == TrainConfig().mix and default.low_noise_p == TrainConfig().low_noise_p


def test_the_command_line_passes_the_sft_recipe_through(monkeypatch):
    seen = {}
    monkeypatch.setattr(distill, "distill", lambda cfg: seen.setdefault("cfg", cfg))
    monkeypatch.setattr("sys.argv", ["distill", "--sft-share", "0.5", "--sft-mix", "arithmetic=2,json=1",
                                     "--low-noise-p", "0.3", "--sc-noisier-p", "0.7", "--add-terms", "2,3"])
    distill.main()
    cfg = seen["cfg"]
    assert cfg.sft_share == 0.5 and cfg.add_terms == (2, 3)
    sft = distill.sft_config(cfg)
    assert sorted(sft.mix) == ["arithmetic", "arithmetic", "json"]
    assert (sft.low_noise_p, sft.sc_noisier_p, sft.add_terms) == (0.3, 0.7, (2, 3))
