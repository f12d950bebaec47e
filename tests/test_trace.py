"""Trace metrics follow the report's definitions, a trace replays as it stood at any time, and traces survive a
JSON round trip."""

import json
import numpy as np
import pytest
import torch

from dg.ar import generate_ar
from dg.config import SamplerConfig
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.testing import tiny_model_for
from dg.trace import CanvasRecord, RunEnd, RunStart, StepRecord, Trace, record_nbytes


def step(canvas, n, t):
    z = np.zeros(4, dtype=np.int64)
    return StepRecord(canvas, n, 0.8, z, z, z, np.ones(4, bool), np.zeros(4, np.float32), 0.0, 0.1, 0.0,
                      True, True, None, np.zeros((4, 5), np.int64), np.zeros((4, 5), np.float32), t)


def synthetic_trace():
    """Two canvases: 3 steps committing 4 tokens, then 1 step committing 2 tokens + 2 pads."""
    trace = Trace()
    trace.add(RunStart("diffusion", 10, 4, 100, 8, {}, [1], 0))
    for n in (1, 2, 3):
        trace.add(step(0, n, 0.1 * n))
    trace.add(CanvasRecord(0, 3, "stable_confident", np.array([5, 6, 7, 8]), 4, False, 0.35))
    trace.add(step(1, 1, 0.5))
    trace.add(CanvasRecord(1, 1, "stable_confident", np.array([9, 1, 0, 0]), 2, True, 0.6))
    trace.add(RunEnd("eos", 2, 4, 0.7))
    return trace


def test_a_trace_at_a_time_holds_the_records_made_by_then_and_no_end_before_its_own():
    trace = synthetic_trace()
    early = trace.at(0.36)
    assert [r.t for r in early.steps] == pytest.approx([0.1, 0.2, 0.3]) and len(early.canvases) == 1
    assert early.end is None and not early.done and early.token_ids == [5, 6, 7, 8]
    assert trace.at(0.0).records == [trace.start]  # only the start: nothing made yet
    assert trace.at(0.7) is trace and trace.at(99) is trace  # the end shown: the whole run


def test_tpf_counts_canvas_boundaries_and_transformers_variant_does_not():
    m = synthetic_trace().metrics()
    assert m["tokens"] == 6
    assert m["tpf"] == pytest.approx(6 / (4 + 2 - 1))  # report §3.4
    assert m["tpf_transformers"] == pytest.approx(6 / 4)
    assert m["nfe"] == 4 + 2
    assert m["effective_steps"] == pytest.approx((4 * 3 + 2 * 1) / 6)
    assert m["ttft_s"] == pytest.approx(0.35)
    assert m["effective_tok_s"] == pytest.approx(6 / 0.7)
    assert synthetic_trace().token_ids == [5, 6, 7, 8, 9, 1]


def test_a_real_trace_survives_a_json_round_trip(processor):
    model = tiny_model_for(processor, sharpen=40.0)
    inputs = build_inputs(processor, "Compute 3 + 4.")
    torch.manual_seed(0)
    trace = generate_diffusion(model, inputs, SamplerConfig(max_denoising_steps=6, max_new_tokens=32, backend="torch"))
    back = Trace.from_json(json.dumps(trace.to_dict()))
    assert back.token_ids == trace.token_ids
    assert back.metrics() == trace.metrics()
    for a, b in zip(trace.steps, back.steps):
        assert np.array_equal(a.accepted, b.accepted) and np.allclose(a.entropy, b.entropy)
    assert record_nbytes(trace.steps[0]) > 0


def test_ar_traces_count_one_forward_per_token(processor):
    model = tiny_model_for(processor, sharpen=5.0)
    trace = generate_ar(model, build_inputs(processor, "Compute 3 + 4."), SamplerConfig(max_new_tokens=5), eos_token_ids=())
    m = trace.metrics()
    assert m["tokens"] == 5 and m["nfe"] == 5 and m["tpf"] == 1.0
    assert Trace.from_json(json.dumps(trace.to_dict())).token_ids == trace.token_ids
