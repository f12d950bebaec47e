"""Fused Triton RMSNorm: Gemma's norm in one kernel launch instead of a chain of small ones.

DiffusionGemma normalises 11 times per layer (the layer's seven norms, q, k and v per head, the router's), and
each `DiffusionGemmaRMSNorm` is a round trip through float32: cast, pow, mean, add, pow, mul, mul, cast back,
each its own kernel of 1–2 µs on a batch-1 pass. Measured on one H200 at full size, those round trips and other
short elementwise chains are ~1,600 of the ~4,800 kernel launches of an AR token. Here one program per row reads the row once, sums its
squares in float32, scales it (and by the weight) and writes it back in the input's dtype.

    TRITON_INTERPRET=1 python -m pytest tests/kernels/test_fused_norms.py -q   # CPU, small shapes

Layout, as in the Triton tutorials:
1. the reference, `rms_norm_torch` (transformers' `DiffusionGemmaRMSNorm.forward`, op for op);
2. the kernel, `_rms_norm_kernel`;
3. the launcher, `rms_norm_triton`, which checks dtype, shape and device;
4. `fuse_norms(model)`, which points every RMSNorm of a model at the launcher (dg.paths' "fused" path), and
   `unfuse_norms(model)`, which points them back (the benchmark's paths side by side on one model).

The sum of squares is a tree reduction in float32, where torch's mean sums in another order: a result may differ
from the reference by a rounding of the last bit (fp32) or, rarely, one bf16 step; so the fused path keeps
`generate()`'s tokens only where no decision sits on such a tie, and the graphed path is the bit-exact one.
"""

import types

import torch
import triton
import triton.language as tl

from dg.kernels.launch import check_device, device_guard, round_to_bf16

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16)
MAX_ROW = 16384  # one row is one block: Gemma's widest norm (the hidden size) is a few thousand


# ---------------------------------------------------------------------------------------------
# 1. Reference: transformers' DiffusionGemmaRMSNorm, written out.
# ---------------------------------------------------------------------------------------------
def rms_norm_torch(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """x / sqrt(mean(x²) + eps) over the last dimension, times `weight` when given, in float32, cast back."""
    h = x.float()
    normed = h * torch.pow(h.pow(2).mean(-1, keepdim=True) + eps, -0.5)
    if weight is not None:
        normed = normed * weight.float()
    return normed.type_as(x)


# ---------------------------------------------------------------------------------------------
# 2. Kernel: one program per row, the row in one block.
# ---------------------------------------------------------------------------------------------
@triton.jit
def _rms_norm_kernel(x_ptr, weight_ptr, out_ptr, n_cols, eps, HAS_WEIGHT: tl.constexpr, ROUND_BF16: tl.constexpr,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=0.0).to(tl.float32)
    mean_square = tl.sum(x * x, axis=0) / n_cols + eps
    y = x * (1.0 / tl.sqrt_rn(mean_square))  # IEEE sqrt and division: torch.pow(·, -0.5) within an ulp
    if HAS_WEIGHT:
        y = y * tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    if ROUND_BF16:
        y = round_to_bf16(y)  # as `type_as` rounds (the interpreter's own cast would truncate)
    tl.store(out_ptr + row * n_cols + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# ---------------------------------------------------------------------------------------------
# 3. Launcher.
# ---------------------------------------------------------------------------------------------
def rms_norm_triton(x: torch.Tensor, weight: torch.Tensor | None, eps: float) -> torch.Tensor:
    """`rms_norm_torch` in one launch: `x` float32 or bfloat16, any leading shape, the norm over its last
    dimension (at most MAX_ROW wide); `weight` one value per column, on `x`'s device."""
    if x.dtype not in SUPPORTED_DTYPES:
        raise TypeError(f"the fused RMSNorm takes float32 or bfloat16, got {x.dtype}")
    n_cols = x.shape[-1]
    if not 0 < n_cols <= MAX_ROW:
        raise ValueError(f"the fused RMSNorm takes rows of 1 to {MAX_ROW} values, got {n_cols}")
    if weight is not None and (weight.shape != (n_cols,) or weight.device != x.device):
        raise ValueError(f"weight must be ({n_cols},) on {x.device}, got {tuple(weight.shape)} on {weight.device}")
    check_device(x, "the fused RMSNorm")
    rows = x.contiguous()
    out = torch.empty_like(rows)
    n_rows = rows.numel() // n_cols
    if n_rows == 0:
        return out
    block = triton.next_power_of_2(n_cols)
    with device_guard(x.device):
        _rms_norm_kernel[(n_rows,)](rows, rows if weight is None else weight.contiguous(), out, n_cols, float(eps),
                                    HAS_WEIGHT=weight is not None, ROUND_BF16=x.dtype == torch.bfloat16, BLOCK=block,
                                    num_warps=4 if block <= 2048 else 8)
    return out


# ---------------------------------------------------------------------------------------------
# 4. The model's norms on the kernel.
# ---------------------------------------------------------------------------------------------
def _fused_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    return rms_norm_triton(hidden_states, self.weight if self.with_scale else None, self.eps)


def is_rms_norm(module) -> bool:
    """A Gemma RMSNorm: transformers' DiffusionGemmaRMSNorm (or another Gemma's of the same shape)."""
    return type(module).__name__.endswith("RMSNorm") and hasattr(module, "eps") and hasattr(module, "with_scale")


def fuse_norms(model) -> int:
    """Point every RMSNorm of `model` at `rms_norm_triton` (weights and eps stay the module's own, so a CUDA
    graph captured afterwards replays the kernel); returns how many. Idempotent."""
    count = 0
    for module in model.modules():
        if is_rms_norm(module):
            module.forward = types.MethodType(_fused_forward, module)
            count += 1
    model.dg_fused_norms = count
    return count


def unfuse_norms(model) -> int:
    """Every RMSNorm of `model` back on transformers' own forward (undoes `fuse_norms`); returns how many."""
    count = 0
    for module in model.modules():
        if is_rms_norm(module) and "forward" in module.__dict__:
            del module.forward
            count += 1
    model.__dict__.pop("dg_fused_norms", None)
    return count
