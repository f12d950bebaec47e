"""Behaviour of the instrumented sampler: what every step records, and the invariants of Algorithm 1."""

import threading

import numpy as np
import torch

from dg.config import SamplerConfig
from dg.kernels.reference import entropy_bound_mask
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion, stream_diffusion
from dg.testing import tiny_model_for


def run(processor, seed=0, sharpen=40.0, **knobs):
    model = tiny_model_for(processor, sharpen=sharpen)
    inputs = build_inputs(processor, "Extract the fields as JSON: Ana is 30.")
    config = SamplerConfig.from_generation_config(
        model.generation_config, **{"max_denoising_steps": 8, "max_new_tokens": 32, "backend": "torch", **knobs})
    torch.manual_seed(seed)
    return generate_diffusion(model, inputs, config), config


def test_entropy_bound_accepts_the_lowest_entropy_prefix_and_always_at_least_one():
    entropy = torch.tensor([[0.5, 0.01, 2.0, 0.02, 0.04]])
    accepted = entropy_bound_mask(entropy, 0.05)
    assert accepted.tolist() == [[False, True, False, True, True]]  # 0.01+0.02+0.04-0.04 <= 0.05
    assert entropy_bound_mask(torch.full((1, 4), 9.0), 0.01).sum() == 1


def test_a_looser_entropy_bound_accepts_a_superset_of_positions():
    entropy = torch.rand(3, 64, generator=torch.Generator().manual_seed(0)) * 3
    previous = entropy_bound_mask(entropy, 0.05)
    for bound in (0.1, 0.5, 2.0, 10.0):
        current = entropy_bound_mask(entropy, bound)
        assert bool((current | ~previous).all()), "every position accepted under a tighter bound stays accepted"
        previous = current


def test_accepted_entropy_never_exceeds_the_bound_unless_only_one_token_is_accepted(processor):
    trace, config = run(processor)
    for step in trace.steps:
        assert step.n_accepted >= 1
        assert step.accepted_entropy <= config.entropy_bound + 1e-6 or step.n_accepted == 1


def test_every_step_records_what_the_ui_shows(processor):
    trace, config = run(processor)
    length = trace.start.canvas_length
    assert trace.steps, "no steps recorded"
    for step in trace.steps:
        for name in ("noisy", "argmax", "sampled", "accepted", "entropy"):
            assert getattr(step, name).shape == (length,), name
        assert step.topk_ids.shape == step.topk_probs.shape == (length, 5)
        assert np.all(np.diff(step.topk_probs, axis=1) <= 1e-7), "top-k sorted by probability"
        assert step.topk_ids[:, 0].tolist() == step.argmax.tolist()
        assert 0 < step.temperature <= config.t_max + 1e-6  # τ is float32, as in generate()
    last = [s for s in trace.steps if s.stop_reason]
    assert len(last) == len(trace.canvases), "exactly one stop reason per canvas"


def test_the_next_step_is_fed_the_accepted_samples_at_accepted_positions(processor):
    trace, _ = run(processor)
    for before, after in zip(trace.steps, trace.steps[1:]):
        if before.canvas != after.canvas:
            continue
        kept = before.accepted
        assert after.noisy[kept].tolist() == before.sampled[kept].tolist()


def test_the_committed_canvas_is_the_last_argmax_with_pad_after_eos(processor):
    trace, _ = run(processor)
    for canvas in trace.canvases:
        last = trace.steps_of(canvas.canvas)[-1]
        if canvas.eos:
            first = int(np.flatnonzero(np.isin(last.argmax, trace.start.eos_token_ids))[0])
            assert canvas.committed[: first + 1].tolist() == last.argmax[: first + 1].tolist()
            assert set(canvas.committed[first + 1:].tolist()) <= {trace.start.pad_token_id}
        else:
            assert canvas.committed.tolist() == last.argmax.tolist()


def test_temperature_falls_linearly_from_t_max(processor):
    trace, config = run(processor, stability_threshold=0, confidence_threshold=1e-9)
    temps = [s.temperature for s in trace.steps_of(0)]
    assert abs(temps[0] - config.t_max) < 1e-6
    diffs = np.diff(temps)
    assert np.allclose(diffs, -(config.t_max - config.t_min) / config.max_denoising_steps, atol=1e-6)


def test_same_seed_gives_the_same_tokens_and_another_seed_differs(processor):
    a, _ = run(processor, seed=11, sharpen=1.0)
    b, _ = run(processor, seed=11, sharpen=1.0)
    c, _ = run(processor, seed=12, sharpen=1.0)
    assert a.token_ids == b.token_ids
    assert [s.noisy.tolist() for s in a.steps] != [s.noisy.tolist() for s in c.steps]


def test_a_run_can_be_cancelled_between_steps(processor):
    model = tiny_model_for(processor)
    inputs = build_inputs(processor, "Compute 1 + 2.")
    cancel = threading.Event()
    config = SamplerConfig.from_generation_config(model.generation_config, max_new_tokens=32, backend="torch")
    records = []
    for record in stream_diffusion(model, inputs, config, cancel=cancel):
        records.append(record)
        if record.kind == "step" and record.step == 2:
            cancel.set()
    assert [r.kind for r in records].count("step") == 2
    assert records[-1].kind == "end" and records[-1].finish_reason == "cancelled"


def test_consuming_the_stream_step_by_step_sees_records_before_the_run_ends(processor):
    model = tiny_model_for(processor)
    inputs = build_inputs(processor, "Compute 1 + 2.")
    stream = stream_diffusion(model, inputs, SamplerConfig(max_denoising_steps=4, max_new_tokens=16))
    assert next(stream).kind == "start"
    assert next(stream).kind == "step"
    stream.close()


def test_a_step_record_holds_exactly_what_a_plain_softmax_and_per_array_copies_give():
    from dg.kernels.reference import sample_step_torch
    from dg.paths import Run
    from dg.sampler import Denoised, step_record

    logits = torch.randn(1, 16, 300, generator=torch.Generator().manual_seed(3)) * 4
    canvas = torch.randint(0, 300, (1, 16), generator=torch.Generator().manual_seed(4))
    temperature = torch.tensor(0.8) * 0.75
    torch.manual_seed(0)
    s = sample_step_torch(logits, temperature, canvas, 0.5)
    record = step_record(Run(None, None), Denoised(0, 1, temperature, canvas, s, 0.5, None, (0, 0)), True, False)
    # the plain way: a softmax of its own for the top-k, one copy per array, sums on the device
    probs, ids = torch.topk(torch.softmax(s.scaled_logits[0].float(), dim=-1), 5, dim=-1)
    accepted_entropy = s.entropy[0][s.accepted[0]]
    expected = dict(noisy=canvas[0], argmax=s.argmax[0], sampled=s.sampled[0], accepted=s.accepted[0],
                    entropy=s.entropy[0], topk_ids=ids, topk_probs=probs)
    for name, tensor in expected.items():
        array = getattr(record, name)
        assert array.dtype == tensor.numpy().dtype and np.array_equal(array, tensor.numpy()), name
    assert record.temperature == float(temperature) and record.mean_entropy == float(s.entropy[0].mean())
    assert record.accepted_entropy == float(accepted_entropy.sum() - accepted_entropy.max())
    assert record.n_accepted > 1 and record.stable and not record.confident
