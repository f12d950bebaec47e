"""The torch reference of one sampling step of the entropy-bound sampler (report Algorithm 1, steps 2-5).

One denoising step turns the decoder's logits over the vocabulary into: temperature-scaled logits
(also the next step's self-conditioning input), per-position entropy, the argmax canvas, a sampled
candidate per position, the entropy-bound accepted mask, and the renoised canvas for the next step.

`sample_step_torch` uses exactly the ops, in exactly the order, of transformers'
`DiffusionGemmaGenerationMixin._denoising_step` (multinomial, then randint for the renoise), so that
after `torch.manual_seed(s)` it reproduces `model.generate()` token for token. The fused Triton path
(`fused_sampling.py`) returns the same `StepSample`; `sampling.py` dispatches between the two.

    python -m pytest tests/kernels -q
"""

from dataclasses import dataclass

import torch


@dataclass
class StepSample:
    """What one sampling step produces; every tensor is (B, C) except `scaled_logits` (B, C, V)."""

    scaled_logits: torch.Tensor  # logits / τ, fed back as self-conditioning (report §3.2)
    entropy: torch.Tensor  # entropy of softmax(logits / τ), float32
    argmax: torch.Tensor  # x̂, the draft the UI shows and the canvas that is finally committed
    sampled: torch.Tensor  # one candidate per position drawn from softmax(logits / τ)
    accepted: torch.Tensor  # bool: lowest-entropy positions within the entropy bound
    next_canvas: torch.Tensor  # accepted positions keep `sampled`, every other one is renoised
    # What the step already has for the probabilities of the record's top-k, so the record never writes a
    # (B, C, V) softmax of its own: the torch path's float32 softmax (it samples from it), the fused path's
    # log-normalizer log Σ exp(scaled_logits), (B, C) float32.
    probs: torch.Tensor | None = None
    log_normalizer: torch.Tensor | None = None


def entropy_bound_mask(entropy: torch.Tensor, entropy_bound: float) -> torch.Tensor:
    """Accept the k lowest-entropy positions with sum(H_1..H_k) - max(H_1..H_k) <= bound.

    The left side bounds the joint mutual information of the accepted tokens (report §3.3), so they
    can be committed together. Sorted ascending, max(H_1..H_k) is H_k; the first position always
    passes (0 <= bound).
    """
    sorted_entropy, order = torch.sort(entropy, dim=-1, descending=False)
    cumulative = torch.cumsum(sorted_entropy, dim=-1)
    sorted_accept = cumulative - sorted_entropy <= entropy_bound
    return torch.scatter(torch.zeros_like(sorted_accept), dim=-1, index=order, src=sorted_accept)


def sample_step_torch(
    logits: torch.Tensor,
    temperature: torch.Tensor | float,
    current_canvas: torch.Tensor,
    entropy_bound: float,
) -> StepSample:
    """Reference path: same ops and RNG order as transformers' `generate()`.

    Memory traffic: softmax, multinomial, argmax and entropy each read the (B, C, V) logits again and
    softmax/entropy write (B, C, V) temporaries: ~6 passes over the vocabulary per step.
    """
    batch_size, canvas_length, vocab_size = logits.shape
    scaled = logits / temperature
    probs = torch.softmax(scaled, dim=-1, dtype=torch.float32)
    sampled = torch.multinomial(probs.view(-1, vocab_size), num_samples=1)
    sampled = sampled.squeeze(-1).view(batch_size, canvas_length)  # (B, C)
    argmax = torch.argmax(scaled, dim=-1)  # (B, C)
    entropy = torch.distributions.Categorical(logits=scaled).entropy()  # (B, C)
    accepted = entropy_bound_mask(entropy, entropy_bound)
    accepted_canvas = torch.where(accepted, sampled, current_canvas)
    noise = torch.randint(0, vocab_size, (batch_size, canvas_length), device=logits.device)
    next_canvas = torch.where(~accepted, noise, accepted_canvas)
    return StepSample(scaled, entropy, argmax, sampled, accepted, next_canvas, probs=probs)
