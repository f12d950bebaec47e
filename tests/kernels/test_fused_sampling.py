"""The fused Triton sampling step against the torch reference.

On a machine without CUDA the kernels run in Triton's interpreter (small shapes only):

    python -m pytest tests/kernels/test_fused_sampling.py -q

With CUDA the same tests run the compiled kernels on the GPU.
"""

import math
import os

import numpy as np
import pytest
import torch

ON_CUDA = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
if not ON_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the @triton.jit decorations below
pytest.importorskip("triton")

from dg.kernels import fused_sampling  # noqa: E402
from dg.kernels.reference import entropy_bound_mask, sample_step_torch  # noqa: E402
from dg.kernels.sampling import sample_step  # noqa: E402

# The interpreter evaluates both sides of tl.where with numpy: -inf * 0 in masked lanes warns.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
DEVICE = torch.device("cuda" if ON_CUDA else "cpu")
TEMPERATURE = 0.7

AWKWARD_SHAPES = [  # (batch, canvas, vocab, dtype): non-power-of-two vocab and canvas, B 1 and 2
    (1, 7, 1000, torch.float32),
    (2, 33, 4099, torch.float32),
    (2, 7, 4099, torch.bfloat16),
    (1, 33, 1000, torch.bfloat16),
]


def _logits(batch, canvas, vocab, dtype, seed=0, scale=3.0):
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, canvas, vocab, generator=generator) * scale
    return logits.to(dtype).to(DEVICE)


# The entropy's rounding, from the arithmetic that computes it: compiled, tl.exp / tl.log lower to PTX
# ex2.approx / lg2.approx (at most 2 ulp off); in the interpreter they are numpy's (within 1 ulp). H = log s - t / s
# with s = sum e, t = sum (y - m) e: a relative error u per exponential moves log s by u and t / s by up to 2 u |t / s|,
# and |t / s| <= H; each of the log2(V) levels of the float32 reductions adds up to one more rounding of that size.
EXP_ULPS = 2 if ON_CUDA else 1


def entropy_tolerance(entropy: torch.Tensor, vocab: int) -> torch.Tensor:
    """Per-position bound on |fused entropy - exact entropy| (nats)."""
    eps = torch.finfo(torch.float32).eps
    return EXP_ULPS * eps * (1 + 2 * entropy.double().abs()) * math.ceil(math.log2(vocab))


def assert_entropy_close(actual: torch.Tensor, expected: torch.Tensor, vocab: int, paths: int = 1) -> None:
    """`paths` = 2 when both sides are fused results, each within the bound of the exact value."""
    error = (actual.double() - expected.double()).abs()
    bound = paths * entropy_tolerance(expected, vocab)
    assert (error <= bound).all(), f"entropy off by {float(error.max()):.3g} > bound {float(bound.min()):.3g}"


def _chi_square_p_value(counts: torch.Tensor, probs: torch.Tensor) -> float:
    """Pearson's test, bins with expected count < 5 pooled into one."""
    expected = probs.double() * counts.sum()
    small = expected < 5
    observed = torch.cat([counts[~small].double(), counts[small].double().sum().view(1)])
    expected = torch.cat([expected[~small], expected[small].sum().view(1)])
    observed, expected = observed[expected > 0], expected[expected > 0]
    statistic = ((observed - expected) ** 2 / expected).sum()
    dof = torch.tensor(float(len(observed) - 1), dtype=torch.float64)
    return torch.special.gammaincc(dof / 2, statistic / 2).item()


@pytest.mark.parametrize("batch,canvas,vocab,dtype", AWKWARD_SHAPES)
def test_entropy_and_argmax_match_the_reference_on_awkward_shapes(batch, canvas, vocab, dtype):
    logits = _logits(batch, canvas, vocab, dtype)
    canvas_ids = torch.zeros(batch, canvas, dtype=torch.long, device=DEVICE)
    fused = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.1, seed=1)
    reference = sample_step_torch(logits, TEMPERATURE, canvas_ids, 0.1)

    # logits / τ with IEEE division, rounded to the logits' dtype: bit-equal to torch's CPU path
    # (torch's CUDA path multiplies by 1/τ, at most one ulp away).
    if ON_CUDA:
        torch.testing.assert_close(fused.scaled_logits, reference.scaled_logits)
    else:
        assert torch.equal(fused.scaled_logits, reference.scaled_logits)
    assert fused.entropy.dtype == torch.float32
    # The reference formula evaluated in float64 on the same scaled logits; torch's own bf16
    # Categorical is only accurate to bf16 (~0.06 at H ~ 8), so it is not the yardstick here.
    exact = torch.distributions.Categorical(logits=fused.scaled_logits.double()).entropy()
    assert_entropy_close(fused.entropy, exact, vocab)
    # argmax exactly; on CUDA allow a mismatch only where the top two logits tie within rounding.
    assert torch.equal(fused.argmax, torch.argmax(fused.scaled_logits, dim=-1))
    top2 = torch.topk(reference.scaled_logits.float(), 2, dim=-1).values
    clear_winner = (top2[..., 0] - top2[..., 1]) > top2[..., 0].abs() * torch.finfo(dtype).eps
    assert torch.equal(fused.argmax[clear_winner], reference.argmax[clear_winner])
    assert clear_winner.float().mean() > 0.9 or ON_CUDA


def test_ties_and_masked_vocabulary_follow_torch_argmax():
    logits = _logits(1, 5, 300, torch.float32)
    logits[0, 0, [17, 42, 250]] = 50.0  # three-way tie for the max: the first index wins
    logits[0, 1, :] = 0.0  # a flat row: index 0
    logits[0, 2, 10:] = float("-inf")  # only 10 admissible tokens
    fused = fused_sampling.sample_step_triton(logits, TEMPERATURE, logits.argmax(-1), 0.1, seed=3)
    assert fused.argmax[0, :3].tolist() == [17, 0, int(torch.argmax(logits[0, 2]))]
    assert 0 <= int(fused.sampled[0, 2]) < 10
    assert torch.isfinite(fused.entropy).all()
    exact = torch.distributions.Categorical(logits=fused.scaled_logits.double()).entropy()
    assert_entropy_close(fused.entropy, exact, 300)


def test_splitting_the_vocabulary_changes_neither_argmax_nor_sample():
    logits = _logits(2, 9, 4099, torch.bfloat16)
    one = fused_sampling.vocab_pass(logits, TEMPERATURE, 11, block_v=1024, num_splits=1)
    three = fused_sampling.vocab_pass(logits, TEMPERATURE, 11, block_v=1024, num_splits=3)
    assert torch.equal(one[0], three[0])
    assert_entropy_close(one[1], three[1], 4099, paths=2)  # a different merge order rounds differently
    assert torch.equal(one[2], three[2]) and torch.equal(one[3], three[3])
    assert_entropy_close(one[4], three[4], 4099, paths=2)  # the log-normalizer, rounded as the entropy


def test_gumbel_max_samples_follow_softmax_of_scaled_logits():
    vocab, draws = 37, 4096
    generator = torch.Generator().manual_seed(5)
    row = torch.randn(vocab, generator=generator) * 1.5
    logits = row.expand(8, draws // 8, vocab).contiguous().to(DEVICE)
    sampled = fused_sampling.vocab_pass(logits, TEMPERATURE, 1234)[3]
    counts = torch.bincount(sampled.flatten().cpu(), minlength=vocab)
    target = torch.softmax(row.double() / TEMPERATURE, dim=-1)
    assert _chi_square_p_value(counts, target) > 1e-3
    # The test has power: the same draws reject the unscaled distribution softmax(logits).
    assert _chi_square_p_value(counts, torch.softmax(row.double(), dim=-1)) < 1e-6


def test_renoise_tokens_are_uniform_over_the_vocabulary():
    vocab, batch, canvas = 37, 32, 128
    entropy = torch.full((batch, canvas), 5.0, device=DEVICE)  # only the first position is accepted
    sampled = torch.zeros(batch, canvas, dtype=torch.long, device=DEVICE)
    accepted, next_canvas = fused_sampling.accept_and_renoise(entropy, sampled, 0.1, vocab, seed=9)
    noise = next_canvas[~accepted].cpu()
    assert accepted.sum(dim=-1).tolist() == [1] * batch
    assert _chi_square_p_value(torch.bincount(noise, minlength=vocab), torch.full((vocab,), 1 / vocab)) > 1e-3


def _stable_entropy_bound_mask(entropy: torch.Tensor, entropy_bound: float) -> torch.Tensor:
    """`entropy_bound_mask` with ties broken by position (torch.sort's default is not stable)."""
    sorted_entropy, order = torch.sort(entropy, dim=-1, stable=True)
    sorted_accept = torch.cumsum(sorted_entropy, dim=-1) - sorted_entropy <= entropy_bound
    return torch.zeros_like(sorted_accept).scatter(-1, order, sorted_accept)


def _entropies(batch, canvas, ties: bool):
    generator = torch.Generator().manual_seed(canvas)
    entropy = torch.rand(batch, canvas, generator=generator) * 0.3
    if ties:
        entropy[:, ::3] = torch.randint(1, 4, entropy[:, ::3].shape, generator=generator) * 0.025
    entropy[:, ::5] = 0.0  # one-hot positions; ties at zero never change the mask
    return entropy


@pytest.mark.parametrize("batch,canvas", [(1, 7), (2, 33), (2, 256), (1, 300)])
@pytest.mark.parametrize("entropy_bound", [0.0, 0.1, 1.0, 1e4])
def test_acceptance_equals_entropy_bound_mask(batch, canvas, entropy_bound):
    entropy = _entropies(batch, canvas, ties=False).to(DEVICE)
    sentinel = torch.full((batch, canvas), -1, dtype=torch.long, device=DEVICE)
    accepted, next_canvas = fused_sampling.accept_and_renoise(entropy, sentinel, entropy_bound, 1000, seed=2)
    # The CPU reference (its cumsum accumulates in double, as the kernel does).
    assert torch.equal(accepted.cpu(), entropy_bound_mask(entropy.cpu(), entropy_bound))
    assert accepted.any(dim=-1).all()  # the lowest-entropy position always passes
    # Renoised positions are exactly the non-accepted ones; accepted ones keep the sample.
    assert (next_canvas[accepted] == -1).all()
    assert ((next_canvas[~accepted] >= 0) & (next_canvas[~accepted] < 1000)).all()


@pytest.mark.parametrize("batch,canvas", [(2, 33), (2, 256)])
def test_tied_entropies_are_accepted_in_position_order(batch, canvas):
    entropy = _entropies(batch, canvas, ties=True)
    for entropy_bound in (0.1, 0.5, 1.0):
        accepted, _ = fused_sampling.accept_and_renoise(
            entropy.to(DEVICE), torch.zeros_like(entropy, dtype=torch.long, device=DEVICE), entropy_bound, 50, 0)
        assert torch.equal(accepted.cpu(), _stable_entropy_bound_mask(entropy, entropy_bound))


def test_a_bound_equal_to_a_cumulative_sum_is_accepted_exactly_there():
    entropy = _entropies(1, 256, ties=False)
    sorted_entropy, order = torch.sort(entropy, dim=-1)
    excess = torch.cumsum(sorted_entropy, dim=-1) - sorted_entropy  # (1, C)
    for k in (40, 100, 200):  # the bound sits exactly on the k-th sorted position's excess
        bound = excess[0, k].item()
        accepted, _ = fused_sampling.accept_and_renoise(
            entropy.to(DEVICE), torch.zeros(1, 256, dtype=torch.long, device=DEVICE), bound, 50, 0)
        assert torch.equal(accepted.cpu(), entropy_bound_mask(entropy, bound))
        assert accepted[0, order[0, k]] and int(accepted.sum()) == int((excess <= bound).sum())


def test_a_looser_entropy_bound_accepts_at_least_as_many_tokens():
    entropy = torch.rand(2, 64, generator=torch.Generator().manual_seed(4)).to(DEVICE)
    sampled = torch.zeros(2, 64, dtype=torch.long, device=DEVICE)
    counts = [fused_sampling.accept_and_renoise(entropy, sampled, bound, 50, seed=0)[0].sum().item()
              for bound in (0.0, 0.1, 0.5, 2.0, 40.0)]
    assert counts == sorted(counts) and counts[0] == 2 and counts[-1] == 128


def test_same_seed_gives_the_same_step_and_manual_seed_fixes_the_drawn_seed():
    logits = _logits(2, 33, 1000, torch.bfloat16)
    canvas_ids = torch.zeros(2, 33, dtype=torch.long, device=DEVICE)

    def fields(step):
        return [step.scaled_logits, step.entropy, step.argmax, step.sampled, step.accepted, step.next_canvas]

    first = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.5, seed=42)
    again = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.5, seed=42)
    other = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.5, seed=43)
    assert all(torch.equal(a, b) for a, b in zip(fields(first), fields(again)))
    assert not torch.equal(first.sampled, other.sampled)
    torch.manual_seed(7)
    drawn = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.5)
    torch.manual_seed(7)
    redrawn = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.5)
    assert all(torch.equal(a, b) for a, b in zip(fields(drawn), fields(redrawn)))


def test_dispatcher_runs_triton_on_request_and_leaves_the_torch_path_alone():
    logits = _logits(1, 7, 1000, torch.float32)
    canvas_ids = torch.zeros(1, 7, dtype=torch.long, device=DEVICE)
    fused = sample_step(logits, torch.tensor(TEMPERATURE), canvas_ids, 0.1, backend="triton")
    assert fused.next_canvas.shape == (1, 7) and fused.accepted.dtype == torch.bool
    assert torch.equal(fused.argmax, torch.argmax(logits, dim=-1))

    torch.manual_seed(0)
    dispatched = sample_step(logits, TEMPERATURE, canvas_ids, 0.1, backend="torch")
    torch.manual_seed(0)
    direct = sample_step_torch(logits, TEMPERATURE, canvas_ids, 0.1)
    for name in ("scaled_logits", "entropy", "argmax", "sampled", "accepted", "next_canvas"):
        assert torch.equal(getattr(dispatched, name), getattr(direct, name)), name


def test_launcher_rejects_what_the_kernel_cannot_read():
    logits = _logits(1, 7, 100, torch.float32)
    canvas_ids = torch.zeros(1, 7, dtype=torch.long, device=DEVICE)
    with pytest.raises(TypeError, match="float32 or bfloat16"):
        fused_sampling.sample_step_triton(logits.half(), TEMPERATURE, canvas_ids, 0.1, seed=0)
    with pytest.raises(ValueError, match="contiguous"):
        fused_sampling.sample_step_triton(logits[:, :, :50], TEMPERATURE, canvas_ids, 0.1, seed=0)
    with pytest.raises(ValueError, match="current_canvas"):
        fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids[:, :3], 0.1, seed=0)
    with pytest.raises(ValueError, match="temperature"):
        fused_sampling.sample_step_triton(logits, 0.0, canvas_ids, 0.1, seed=0)


def test_the_sampler_runs_end_to_end_on_the_fused_step():
    from dg.config import SamplerConfig
    from dg.sampler import generate_diffusion
    from dg.testing import tiny_random_model

    # peaky logits, so the entropy bound accepts several tokens
    model = tiny_random_model(vocab_size=512, canvas_length=16, sharpen=40.0).to(DEVICE)
    inputs = {"input_ids": torch.tensor([[2, 17, 99, 250, 7]], device=DEVICE)}
    base = SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=4, max_new_tokens=16)
    traces = {}
    for backend in ("torch", "triton", "triton"):
        torch.manual_seed(3)
        traces.setdefault(backend, []).append(generate_diffusion(model, inputs, base.replace(backend=backend)))
    fused, again = traces["triton"]
    assert fused.token_ids == again.token_ids  # torch.manual_seed fixes the drawn Philox seeds too
    assert all(step.n_accepted >= 1 for step in fused.steps) and len(fused.canvases) == 1
    # Same seed, same initial canvas, same first decoder pass: the first step's statistics agree.
    first, reference = fused.steps[0], traces["torch"][0].steps[0]
    assert (first.argmax == reference.argmax).all()
    assert abs(first.entropy - reference.entropy).max() < 1e-4


def _unspecialized(kernel) -> tuple:
    """The arguments a kernel is declared not to specialise on (compiled JITFunction or interpreter wrapper)."""
    names = kernel.do_not_specialize if hasattr(kernel, "do_not_specialize") else kernel.kwargs["do_not_specialize"]
    return tuple(names)


@pytest.mark.parametrize("kernel", ["_vocab_pass_kernel", "_accept_renoise_kernel"])
def test_a_fresh_seed_never_compiles_another_kernel_variant(kernel):
    assert "seed" in _unspecialized(getattr(fused_sampling, kernel))


def test_every_launch_is_guarded_by_the_device_of_its_tensors(monkeypatch):
    guarded = []
    real_guard = fused_sampling.device_guard

    def recording_guard(device):
        guarded.append(torch.device(device))
        return real_guard(device)

    monkeypatch.setattr(fused_sampling, "device_guard", recording_guard)
    logits = _logits(1, 7, 300, torch.float32)
    fused_sampling.sample_step_triton(logits, TEMPERATURE, torch.zeros(1, 7, dtype=torch.long, device=DEVICE), 0.1,
                                      seed=5)
    assert guarded == [logits.device, logits.device]  # the vocabulary pass (and its merge), then acceptance


def test_the_device_guard_makes_the_tensors_gpu_current():
    guard = fused_sampling.device_guard(torch.device("cuda", 1))  # built without touching CUDA
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1
    assert not isinstance(fused_sampling.device_guard(torch.device("cpu")), torch.cuda.device)


def test_a_fused_step_s_record_takes_its_top_k_from_the_log_normalizer():
    from dg.paths import Run
    from dg.sampler import Denoised, step_record

    logits = _logits(1, 33, 4099, torch.float32)
    canvas_ids = torch.zeros(1, 33, dtype=torch.long, device=DEVICE)
    fused = fused_sampling.sample_step_triton(logits, TEMPERATURE, canvas_ids, 0.1, seed=8)
    exact = torch.logsumexp(fused.scaled_logits.double(), dim=-1)
    assert fused.probs is None
    assert_entropy_close(fused.log_normalizer, exact, 4099)
    record = step_record(Run(None, None), Denoised(0, 1, torch.tensor(TEMPERATURE), canvas_ids, fused, 0.1, None, (0, 0)))
    probs, ids = torch.topk(torch.softmax(fused.scaled_logits[0].double(), dim=-1), 5, dim=-1)
    assert (record.topk_ids == ids.cpu().numpy()).all()
    np.testing.assert_allclose(record.topk_probs, probs.cpu().numpy(), rtol=1e-5)
