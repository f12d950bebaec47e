"""Dispatch one sampling step to the fused Triton path or the torch reference.

`sample_step` picks Triton on CUDA when it is installed and the torch reference (`reference.py`)
everywhere else; `backend=` forces either one, so tests can compare them and the CLI/app can offer
the choice (`SamplerConfig.backend`).

    python -m pytest tests/kernels -q
"""

import torch

from dg.kernels.reference import StepSample, sample_step_torch

BACKENDS = ("auto", "torch", "triton")


def sample_step(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    current_canvas: torch.Tensor,
    entropy_bound: float,
    *,
    backend: str = "auto",
) -> StepSample:
    """One sampling step: Triton on CUDA when available, the torch path elsewhere.

    `backend="torch"` forces the reference path (the only one that matches `generate()` bit for
    bit, since the fused path draws its samples with its own counter-based RNG).
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "triton" or (backend == "auto" and _triton_usable(logits)):
        from dg.kernels import fused_sampling

        return fused_sampling.sample_step_triton(logits, temperature, current_canvas, entropy_bound)
    return sample_step_torch(logits, temperature, current_canvas, entropy_bound)


def _triton_usable(logits: torch.Tensor) -> bool:
    if not logits.is_cuda:
        return False
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True
