"""What dg's Triton kernels share: fp32 → bf16 rounding that is exact in the interpreter too, the check that a
tensor can be launched on, and the guard that launches on the tensor's own GPU.

    TRITON_INTERPRET=1 python -m pytest tests/kernels -q
"""

import os
from contextlib import nullcontext

import torch
import triton
import triton.language as tl


@triton.jit
def round_to_bf16(y):
    """Round fp32 to bf16, ties to even, with integer ops (bit-exact on GPU and in the interpreter,
    whose own fp32 -> bf16 cast truncates). Returns the bf16 value widened back to fp32."""
    bits = y.to(tl.uint32, bitcast=True)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.to(tl.float32, bitcast=True)


def check_device(tensor: torch.Tensor, what: str) -> None:
    """A RuntimeError naming `what` unless `tensor` is on CUDA or Triton's interpreter runs (TRITON_INTERPRET=1)."""
    if not tensor.is_cuda and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(f"{what} needs CUDA tensors (or TRITON_INTERPRET=1 on CPU), got {tensor.device}")


def device_guard(device: torch.device):
    """Launch on the tensors' GPU: Triton launches on the *current* CUDA device, so a tensor on cuda:1
    read by a kernel launched on cuda:0 is an illegal address."""
    return torch.cuda.device(device) if device.type == "cuda" else nullcontext()
