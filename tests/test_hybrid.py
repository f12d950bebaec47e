"""Hybrid decoding: its tokens are greedy AR's on the embedded model (held-out draws of every skill, sums of
three numbers with the trace) and on random checkpoints (text, thinking, image, EOS inside a draft, a budget
that ends mid-canvas); its records; pinned tokens never change."""

import json
from dataclasses import replace

import pytest
import torch

from dg.ar import generate_ar
from dg.config import SamplerConfig
from dg.hybrid import generate_hybrid, stream_hybrid
from dg.loading import load
from dg.prompts import build_inputs
from dg.tiny import skills


@pytest.fixture(scope="module")
def embedded():
    return load()


def ar_tokens(model, inputs, max_new_tokens):
    return generate_ar(model, inputs, SamplerConfig(max_new_tokens=max_new_tokens)).token_ids


def assert_hybrid_is_ar(model, inputs, config, seed=0, **kwargs):
    torch.manual_seed(seed)
    trace = generate_hybrid(model, inputs, config, **kwargs)
    assert trace.token_ids == ar_tokens(model, inputs, config.max_new_tokens)
    return trace


@pytest.mark.parametrize("skill", skills.SKILLS)
def test_hybrid_gives_greedy_ar_s_tokens_on_held_out_draws_of_every_skill(embedded, one_thread, skill):
    for i, example in enumerate(skills.sample_examples(7, 3, (skill,))):
        inputs = build_inputs(embedded.processor, example.prompt, images=example.image,
                              thinking=skill in skills.THINKING_SKILLS)
        trace = assert_hybrid_is_ar(embedded.model, inputs, embedded.sampler_config, seed=i)
        assert trace.end.finish_reason == "eos"


def test_hybrid_gives_ar_s_sum_of_three_numbers_in_few_rounds(embedded, one_thread):
    example = skills.sample_examples(3, 2, ("arithmetic",), add_terms=(3,))[0]
    inputs = build_inputs(embedded.processor, example.prompt, thinking=True)
    trace = assert_hybrid_is_ar(embedded.model, inputs, embedded.sampler_config)
    metrics = trace.metrics()
    assert len(trace.token_ids) > embedded.model.config.canvas_length  # the trace spans canvases
    assert metrics["rounds"] < len(trace.token_ids) / 4 and metrics["nfe"] < len(trace.token_ids) / 2


@pytest.mark.parametrize("thinking", [False, True])
def test_hybrid_equals_ar_on_a_random_checkpoint_up_to_a_budget_that_ends_mid_canvas(model, processor, config, thinking):
    inputs = build_inputs(processor, "Tell me something.", thinking=thinking)
    trace = assert_hybrid_is_ar(model, inputs, replace(config, max_new_tokens=27))
    assert len(trace.token_ids) <= 27 and trace.end.finish_reason in ("eos", "max_new_tokens")


def test_hybrid_equals_ar_with_an_image(model, processor, config, picture):
    inputs = build_inputs(processor, "Describe the picture.", images=picture)
    assert_hybrid_is_ar(model, inputs, replace(config, max_new_tokens=20))


def test_hybrid_stops_at_an_eos_inside_a_draft(processor, config):
    from dg.testing import tiny_model_for

    model = tiny_model_for(processor, sharpen=40.0)
    inputs = build_inputs(processor, "Tell me something.")
    ar = ar_tokens(model, inputs, 40)
    model.generation_config.eos_token_id = [*model.generation_config.eos_token_id, ar[5]]
    trace = assert_hybrid_is_ar(model, inputs, replace(config, max_new_tokens=40))
    assert trace.token_ids[-1] == ar[5] and trace.end.finish_reason == "eos"


def test_each_round_keeps_the_verified_tokens_pinned_and_adds_at_least_one(embedded, one_thread):
    inputs = build_inputs(embedded.processor, "Compute 2487 + 3356.", thinking=True)
    torch.manual_seed(0)
    records = list(stream_hybrid(embedded.model, inputs, embedded.sampler_config))
    assert [r.kind for r in records[:2]] == ["start", "token"] and records[-1].kind == "end"
    tokens, held = [], {}
    for record in records:
        if record.kind == "token":
            tokens.append(record.token_id)
        elif record.kind == "step":
            canvas_ids = tokens[record.canvas * len(record.noisy):]
            assert record.pinned[:len(canvas_ids)].all() and not record.pinned[len(canvas_ids):].any()
            assert (record.noisy[record.pinned] == canvas_ids).all() and (record.argmax[record.pinned] == canvas_ids).all()
            assert not record.accepted[record.pinned].any()
            held[record.canvas] = len(canvas_ids)
        elif record.kind == "round":
            assert record.held == held[record.canvas] and record.accepted >= 0
    rounds = [r for r in records if r.kind == "round"]
    assert len(tokens) >= len(rounds) + 1  # the first token, then at least one per round


def test_a_cancelled_hybrid_run_ends_cancelled(embedded):
    import threading

    cancel = threading.Event()
    cancel.set()
    inputs = build_inputs(embedded.processor, "Compute 2487 + 3356.", thinking=True)
    trace = generate_hybrid(embedded.model, inputs, embedded.sampler_config, cancel=cancel)
    assert trace.end.finish_reason == "cancelled"


def test_hybrid_traces_round_trip_through_json(embedded):
    from dg.trace import Trace

    inputs = build_inputs(embedded.processor, "Solve the sudoku: 12.4/3.12/2.41/41.3")
    torch.manual_seed(0)
    trace = generate_hybrid(embedded.model, inputs, embedded.sampler_config)
    again = Trace.from_json(json.dumps(trace.to_dict()))
    assert again.token_ids == trace.token_ids and len(again.rounds) == len(trace.rounds)
    assert again.metrics()["rounds"] == trace.metrics()["rounds"] >= 1


def test_the_cli_s_hybrid_mode_prints_ar_s_tokens_and_its_rounds(capsys):
    import json

    from dg.cli import main

    def run(mode):
        assert main(["generate", "--mode", mode, "--prompt", "Compute 2487 + 3356.", "--thinking", "--json",
                     "--seed", "0"]) == 0
        return json.loads(capsys.readouterr().out)

    hybrid, ar = run("hybrid"), run("ar")
    assert hybrid["token_ids"] == ar["token_ids"] and hybrid["answer"] == "5843"
    assert len(hybrid["rounds"]) == hybrid["metrics"]["rounds"] >= 1 and ar["rounds"] == []
