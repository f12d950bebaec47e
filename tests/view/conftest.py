"""Trace builders for the view tests: thought markers written into a real trace, committed-only traces of text, and
a real hybrid run of the embedded model (the shipped three-term sum: rounds that keep, gain and reject)."""

import functools

import numpy as np
import pytest
import torch

from dg.hybrid import generate_hybrid
from dg.loading import load
from dg.prompts import THOUGHT_CLOSE, THOUGHT_OPEN, build_inputs
from dg.examples import SkillExamples
from dg.trace import CanvasRecord, RunEnd, RunStart, Trace


def _with_thought(trace, tokenizer, open_at: int, close_at: int | None, step_index: int = -1) -> Trace:
    """A copy whose step argmax carries thought markers (the random model never writes them)."""
    trace = Trace.from_dict(trace.to_dict())
    markers = [tokenizer.convert_tokens_to_ids(t) for t in (THOUGHT_OPEN, THOUGHT_CLOSE)]
    plain = tokenizer.convert_tokens_to_ids("a")
    for row in [trace.steps[step_index].argmax, *(c.committed for c in trace.canvases)]:
        row[np.isin(row, markers)] = plain  # markers the random model wrote by chance
    argmax = trace.steps[step_index].argmax
    argmax[open_at] = tokenizer.convert_tokens_to_ids(THOUGHT_OPEN)
    if close_at is not None:
        argmax[close_at] = tokenizer.convert_tokens_to_ids(THOUGHT_CLOSE)
    return trace


def _text_trace(tokenizer, text: str, canvas_length: int = 16, done: bool = True) -> Trace:
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


@pytest.fixture
def with_thought():
    return _with_thought


@pytest.fixture
def text_trace():
    return _text_trace


@functools.cache
def _embedded_hybrid():
    embedded = load()
    example = SkillExamples.load().race_example()
    torch.manual_seed(0)
    inputs = build_inputs(embedded.processor, example.prompt, thinking=example.thinking)
    return embedded.tokenizer, generate_hybrid(embedded.model, inputs, embedded.sampler_config)


@pytest.fixture
def hybrid_trace():
    """The embedded model's hybrid run of the race's three-term sum, thinking on (several canvases and rounds)."""
    return Trace.from_dict(_embedded_hybrid()[1].to_dict())


@pytest.fixture
def embedded_tokenizer():
    return _embedded_hybrid()[0]
