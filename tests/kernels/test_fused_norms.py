"""The fused Triton RMSNorm against transformers' own norm, alone and inside a model.

On a machine without CUDA the kernel runs in Triton's interpreter (small shapes only):

    python -m pytest tests/kernels/test_fused_norms.py -q

With CUDA the same tests run the compiled kernel on the GPU.
"""

import copy
import os

import pytest
import torch

ON_CUDA = torch.cuda.is_available() and os.environ.get("TRITON_INTERPRET") != "1"
if not ON_CUDA:
    os.environ["TRITON_INTERPRET"] = "1"  # must precede the @triton.jit decorations below
pytest.importorskip("triton")

from transformers.models.diffusion_gemma.modeling_diffusion_gemma import DiffusionGemmaRMSNorm  # noqa: E402

from dg.ar import generate_ar  # noqa: E402
from dg.config import SamplerConfig  # noqa: E402
from dg.kernels import fused_norms  # noqa: E402
from dg.kernels.fused_norms import fuse_norms, is_rms_norm, rms_norm_torch, rms_norm_triton  # noqa: E402
from dg.prompts import build_inputs  # noqa: E402

DEVICE = torch.device("cuda" if ON_CUDA else "cpu")
SHAPES = [(1, 7, 48), (2, 5, 100), (3, 256), (1, 1, 4, 33)]  # odd widths, 2-D to 4-D, a row of one head


def _x(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=generator) * 3 + 0.5).to(dtype).to(DEVICE)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_scale", [True, False])
def test_the_reference_is_transformers_own_norm_op_for_op(shape, with_scale):
    norm = DiffusionGemmaRMSNorm(shape[-1], eps=1e-6, with_scale=with_scale).to(DEVICE)
    if with_scale:
        with torch.no_grad():
            norm.weight.copy_(torch.linspace(-1, 2, shape[-1]))
    for dtype in (torch.float32, torch.bfloat16):
        x = _x(shape, dtype)
        expected = norm(x)
        assert torch.equal(rms_norm_torch(x, norm.weight if with_scale else None, norm.eps), expected)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("with_scale", [True, False])
def test_the_kernel_equals_the_reference_within_one_rounding(shape, with_scale):
    weight = torch.linspace(-1, 2, shape[-1], device=DEVICE) if with_scale else None
    x = _x(shape, torch.float32, seed=1)
    fused, ref = rms_norm_triton(x, weight, 1e-6), rms_norm_torch(x, weight, 1e-6)
    assert fused.shape == x.shape and fused.dtype == x.dtype
    # float32: another summation order moves the scale by a few ulps at most
    assert torch.allclose(fused, ref, rtol=4 * torch.finfo(torch.float32).eps, atol=1e-6)
    x16 = _x(shape, torch.bfloat16, seed=2)
    fused16, ref16 = rms_norm_triton(x16, weight, 1e-6), rms_norm_torch(x16, weight, 1e-6)
    assert fused16.dtype == torch.bfloat16
    steps = (fused16.float() - ref16.float()).abs() / ref16.float().abs().clamp_min(1e-30) / 2**-7
    assert steps.max() <= 1.0  # at most one bf16 step apart, where the two roundings fall either side
    assert (fused16 == ref16).float().mean() > 0.95  # and nearly always the same value


def test_a_non_contiguous_input_is_normed_as_its_values_are():
    x = _x((6, 40), torch.float32).t()  # (40, 6), strided
    assert torch.allclose(rms_norm_triton(x, None, 1e-6), rms_norm_torch(x, None, 1e-6), atol=1e-6)


@pytest.mark.parametrize("bad, message", [
    (lambda: rms_norm_triton(torch.zeros(2, 8, dtype=torch.float16, device=DEVICE), None, 1e-6), "float16"),
    (lambda: rms_norm_triton(torch.zeros(2, fused_norms.MAX_ROW + 1, device=DEVICE), None, 1e-6), "rows of 1 to"),
    (lambda: rms_norm_triton(torch.zeros(2, 8, device=DEVICE), torch.ones(9, device=DEVICE), 1e-6), "weight must be"),
])
def test_a_tensor_the_kernel_cannot_take_is_one_line(bad, message):
    with pytest.raises((TypeError, ValueError), match=message):
        bad()


def test_without_cuda_or_the_interpreter_the_kernel_says_what_it_needs(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match=r"the fused RMSNorm needs CUDA tensors \(or TRITON_INTERPRET=1"):
        rms_norm_triton(torch.zeros(2, 8), None, 1e-6)


def test_every_norm_of_a_model_runs_the_kernel_and_its_greedy_tokens_stay_the_model_s(model, processor):
    model = copy.deepcopy(model).to(DEVICE)  # fused here only: the shared model stays transformers' own
    norms = [m for m in model.modules() if is_rms_norm(m)]
    inputs = {k: v.to(DEVICE) for k, v in build_inputs(processor, "What is 12 + 30?").items()}
    config = SamplerConfig(max_new_tokens=6)
    eager = generate_ar(model, inputs, config, eos_token_ids=[-1])
    assert fuse_norms(model) == len(norms) > 10 and model.dg_fused_norms == len(norms)
    calls, real = [], fused_norms.rms_norm_triton
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fused_norms, "rms_norm_triton", lambda *args: calls.append(1) or real(*args))
        fused = generate_ar(model, inputs, config, eos_token_ids=[-1])
    assert len(calls) >= len(norms)  # every pass ran the kernel
    assert fused.token_ids == eager.token_ids
    assert torch.allclose(torch.tensor([r.entropy for r in fused.tokens]), torch.tensor([r.entropy for r in eager.tokens]),
                          rtol=1e-3, atol=1e-4)
    assert fuse_norms(model) == len(norms)  # again: the same norms, nothing doubled


def test_the_fused_path_loads_with_every_norm_fused_and_runs_each_mode_to_eager_s_tokens(checkpoint_dir, processor):
    from dg.loading import load
    from dg.modes import stream_mode
    from dg.trace import Trace

    fused, eager = load(checkpoint_dir, device=DEVICE, path="fused"), load(checkpoint_dir, device=DEVICE, path="eager")
    assert fused.path == "fused" and fused.model.dg_fused_norms == sum(map(is_rms_norm, fused.model.modules()))
    inputs = {k: v.to(DEVICE) for k, v in build_inputs(processor, "What is 12 + 30?").items()}
    config = fused.sampler_config.replace(max_new_tokens=8, max_denoising_steps=4, backend="torch")  # interpreted: short
    for mode in ("diffusion", "hybrid", "ar"):
        runs = []
        for loaded in (fused, eager):
            torch.manual_seed(0)
            runs.append(Trace.collect(stream_mode(loaded.model, mode, inputs, config, path=loaded.path)))
        assert runs[0].token_ids and runs[0].token_ids == runs[1].token_ids, mode
        assert runs[0].end.finish_reason == runs[1].end.finish_reason, mode


def test_the_fused_path_on_a_cpu_without_the_interpreter_is_one_line(checkpoint_dir, monkeypatch):
    from dg.loading import load

    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match=r"^--path fused runs dg's Triton kernels: it needs CUDA .* not cpu; use"):
        load(checkpoint_dir, device="cpu", path="fused")
