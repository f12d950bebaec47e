"""Real traces from the tiny random model, built once per session and shared by the rendering tests."""

import functools

import numpy as np
import pytest
import torch

from dg.ar import generate_ar
from dg.config import SamplerConfig
from dg.prompts import THOUGHT_CLOSE, THOUGHT_OPEN, build_inputs
from dg.sampler import generate_diffusion
from dg.trace import CanvasRecord, RunEnd, RunStart, Trace
from tests.conftest import make_model

PROMPT = "Compute 12 + 30."
STEPS = 4
SEED = 0


def _config(model, max_new_tokens=32):
    return SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=STEPS,
                                                max_new_tokens=max_new_tokens, backend="torch")


@functools.cache
def _model(processor):
    return make_model(processor, sharpen=40.0)


@functools.cache
def _diffusion(processor) -> Trace:
    model = _model(processor)
    torch.manual_seed(SEED)
    return generate_diffusion(model, build_inputs(processor, PROMPT, thinking=True), _config(model))


@functools.cache
def _eos(processor) -> Trace:
    """Same run, but a token the first canvas commits is declared an EOS, so that canvas ends early."""
    model = make_model(processor, sharpen=40.0)
    pad = model.generation_config.pad_token_id
    committed = [int(t) for t in _diffusion(processor).canvases[0].committed]
    eos = next(t for t in committed[3:] if t != pad)
    model.generation_config.eos_token_id = [*model.generation_config.eos_token_id, eos]
    torch.manual_seed(SEED)
    return generate_diffusion(model, build_inputs(processor, PROMPT, thinking=True), _config(model, 16))


@functools.cache
def _ar(processor) -> Trace:
    model = _model(processor)
    return generate_ar(model, build_inputs(processor, PROMPT, thinking=True), 12, [1])


@pytest.fixture
def model(processor):
    return _model(processor)


@pytest.fixture
def diffusion_trace(processor):
    return _diffusion(processor)


@pytest.fixture
def eos_trace(processor):
    return _eos(processor)


@pytest.fixture
def ar_trace(processor):
    return _ar(processor)


def copy_trace(trace) -> Trace:
    return Trace.from_dict(trace.to_dict())


def with_thought(trace, tokenizer, open_at: int, close_at: int | None, step_index: int = -1) -> Trace:
    """A copy whose step argmax carries thought markers (the random model never writes them)."""
    trace = copy_trace(trace)
    markers = [tokenizer.convert_tokens_to_ids(t) for t in (THOUGHT_OPEN, THOUGHT_CLOSE)]
    plain = tokenizer.convert_tokens_to_ids("a")
    for row in [trace.steps[step_index].argmax, *(c.committed for c in trace.canvases)]:
        row[np.isin(row, markers)] = plain  # markers the random model wrote by chance
    argmax = trace.steps[step_index].argmax
    argmax[open_at] = tokenizer.convert_tokens_to_ids(THOUGHT_OPEN)
    if close_at is not None:
        argmax[close_at] = tokenizer.convert_tokens_to_ids(THOUGHT_CLOSE)
    return trace


def text_trace(tokenizer, text: str, canvas_length: int = 16, done: bool = True) -> Trace:
    """A committed-only trace of `text` (for the text view), split into canvases of `canvas_length`."""
    ids = tokenizer.encode(text, add_special_tokens=False)
    pad = tokenizer.pad_token_id
    trace = Trace()
    trace.add(RunStart("diffusion", 4, canvas_length, len(tokenizer), len(ids) + canvas_length, {}, [1], pad))
    for k in range(0, len(ids), canvas_length):
        chunk = ids[k:k + canvas_length]
        chunk += [pad] * (canvas_length - len(chunk))
        trace.add(CanvasRecord(k // canvas_length, 3, "stable_confident", torch.tensor(chunk).numpy(),
                               sum(t != pad for t in chunk), False, 0.1 * (k + 1)))
    if done:
        trace.add(RunEnd("max_new_tokens", 1, 3, 1.0))
    return trace
