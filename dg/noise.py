"""The forward (noising) process of DiffusionGemma.

Training corrupts each canvas token, independently with probability t, into a token drawn uniformly
from the whole vocabulary: there is no mask token (report §3.1). `corrupt` is that process, for the
SFT recipe (`dg/tiny/train.py`, t ~ U(ε, 1) per example from `sample_t`) and for the app's Learn tab;
`dg.denoise` runs the decoder once on such a canvas.

    python -c "import torch; from dg.noise import corrupt; print(corrupt(torch.arange(8)[None], 100, 0.5))"
"""

import torch


def sample_t(batch: int, eps: float, generator: torch.Generator | None = None) -> torch.Tensor:
    """One noise level per example, t ~ U(eps, 1): (B,) float32."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    return eps + (1 - eps) * torch.rand(batch, generator=generator)


def corrupt(targets: torch.Tensor, vocab_size: int, t, generator: torch.Generator | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
    """(noisy, replaced): each token of `targets` (B, C) replaced with probability t by a uniform token.

    `t` is one level for all rows (a float) or one per row, (B,). The replacement is uniform over the
    whole vocabulary, so it can draw the original token again; `replaced` still marks it (that is
    what the training loss sees). Draws: the uniform tokens first, then the replacement coins.
    """
    t = torch.as_tensor(t, dtype=torch.float32)
    if bool(((t < 0) | (t > 1)).any()):
        raise ValueError(f"t must be in [0, 1], got {t.tolist()}")
    if vocab_size <= 0:
        raise ValueError(f"vocab_size must be > 0, got {vocab_size}")
    noise = torch.randint(0, vocab_size, targets.shape, generator=generator)  # (B, C)
    replaced = torch.rand(targets.shape, generator=generator) < t.reshape(-1, 1)  # (B, C)
    return torch.where(replaced, noise, targets), replaced
