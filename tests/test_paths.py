"""Every decoding mode on the graphed path (its CPU stand-in: the same static buffers and calls, run eagerly)
gives its reference's tokens: diffusion = transformers' generate(), hybrid = greedy AR, graphed AR = eager AR;
the forward counts match the eager path's; "auto" and the mode's path are picked in one place (dg.paths)."""

from dataclasses import replace

import pytest
import torch

from dg.ar import generate_ar
from dg.config import MODES, SamplerConfig
from dg.graphs import GraphedPasses
from dg.modes import stream_mode
from dg.paths import PATHS, choose_path, mode_path, open_passes
from dg.prompts import build_inputs
from dg.testing import tiny_model_for
from dg.trace import Trace


def nfe(trace):
    return trace.end.encoder_forwards, trace.end.decoder_forwards


def run(model, mode, inputs, config, path, seed=0, **options):
    torch.manual_seed(seed)
    return Trace.collect(stream_mode(model, mode, inputs, config, path=path, **options))


@pytest.fixture(scope="module")
def sharp(processor):
    return tiny_model_for(processor, sharpen=40.0)  # peaky logits: canvases settle, runs span canvases


@pytest.mark.parametrize("thinking", [False, True])
def test_diffusion_on_the_graphed_path_is_generate_token_for_token(sharp, processor, thinking):
    inputs = build_inputs(processor, "Compute 12 + 30.", thinking=thinking)
    config = SamplerConfig.from_generation_config(sharp.generation_config, max_new_tokens=48, backend="torch",
                                                  end_on_pad_canvas=False)
    trace = run(sharp, "diffusion", inputs, config, "graphs", seed=3)
    torch.manual_seed(3)
    reference = sharp.generate(**inputs, **config.generate_kwargs()).sequences[0, inputs["input_ids"].shape[1]:]
    assert [int(i) for c in trace.canvases for i in c.committed] == reference.tolist()  # pads after EOS too
    assert len(trace.canvases) >= 2 or trace.canvases[-1].eos  # past a canvas's commit, or to its EOS


def test_diffusion_with_an_image_on_the_graphed_path_is_the_eager_run(sharp, processor, picture):
    inputs = build_inputs(processor, "Describe the picture.", images=picture, thinking=True)
    config = SamplerConfig.from_generation_config(sharp.generation_config, max_new_tokens=40, backend="torch")
    eager, graphed = (run(sharp, "diffusion", inputs, config, path, seed=5) for path in ("eager", "graphs"))
    assert graphed.token_ids == eager.token_ids and nfe(graphed) == nfe(eager)
    assert [s.accepted.tolist() for s in graphed.steps] == [s.accepted.tolist() for s in eager.steps]


@pytest.mark.parametrize("budget", [27, 40])  # ends mid-canvas; spans three canvases
def test_hybrid_on_the_graphed_path_gives_greedy_ar_s_tokens(model, processor, config, budget):
    inputs = build_inputs(processor, "Tell me something.", thinking=True)
    config = replace(config, max_new_tokens=budget)
    graphed = run(model, "hybrid", inputs, config, "graphs")
    assert graphed.token_ids == generate_ar(model, inputs, config).token_ids
    eager = run(model, "hybrid", inputs, config, "eager")
    assert nfe(graphed) == nfe(eager) and len(graphed.rounds) == len(eager.rounds)


def test_graphed_ar_is_eager_ar_greedy_and_sampled(model, processor, config):
    inputs = build_inputs(processor, "Tell me something.")
    config = replace(config, max_new_tokens=40)
    for options in ({}, {"greedy": False, "temperature": 0.8}):
        eager, graphed = (run(model, "ar", inputs, config, path, seed=11, **options) for path in ("eager", "graphs"))
        assert graphed.token_ids == eager.token_ids
        assert nfe(graphed) == nfe(eager)
        for a, b in zip(eager.tokens, graphed.tokens):
            assert b.entropy == pytest.approx(a.entropy, abs=1e-5)


def test_a_graphed_run_borrows_its_passes_from_the_pool_and_gives_them_back(processor, config):
    model = tiny_model_for(processor)
    inputs = build_inputs(processor, "Tell me something.")
    for mode in MODES:
        run(model, mode, inputs, replace(config, max_new_tokens=20), "graphs")
    (pool,) = model.dg_graphed_passes.values()  # one capacity for these short runs
    assert len(pool) == 1 and isinstance(pool[0], GraphedPasses) and pool[0].cached == 0


def test_auto_picks_eager_on_a_cpu_and_the_graphed_passes_on_cuda():
    assert choose_path("auto", "cpu") == "eager" and choose_path("auto", "cuda:0") == "graphs"
    assert [choose_path(p, "cpu") for p in PATHS[1:]] == list(PATHS[1:])
    with pytest.raises(ValueError, match="path must be one of auto, eager, compiled, graphs, fused, got 'fast'"):
        choose_path("fast", "cpu")


def test_every_mode_runs_on_the_graphed_path_and_only_ar_compiles():
    assert [mode_path("graphs", m) for m in MODES] == ["graphs"] * 3
    assert [mode_path("compiled", m) for m in MODES] == ["eager", "compiled", "eager"]
    assert [mode_path("eager", m) for m in MODES] == ["eager"] * 3


def test_open_passes_refuses_an_unknown_path_and_a_compiled_crop(model):
    with pytest.raises(ValueError, match="eager, compiled or graphs, got 'fast'"):
        with open_passes(model, "fast", 64):
            pass
    with pytest.raises(ValueError, match="cannot crop"):
        with open_passes(model, "compiled", 64, rollback=True):
            pass
