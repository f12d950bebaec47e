"""Hybrid decoding: diffusion drafts, AR verifies, on the same weights (report §1, appendix).

Each canvas stays on its aligned place (the layout the decoder was trained on). A round runs
`draft_steps` denoising steps of the entropy-bound sampler on the canvas, with every token verified so
far pinned inside it, then one causal encoder pass over the canvas. That pass is AR itself: at each
position softcap(lm_head(h)) is greedy AR's next-token distribution given the tokens before it. The
round keeps the longest run of draft tokens equal to those argmaxes and adds AR's own token at the
first mismatch (so at least one token per round), then pins them all for the next round. The output
is greedy AR's (`dg.ar.generate_ar`), token for token; tests/test_hybrid.py checks it rather than
assume it, since a block pass and one-token passes could differ in the last bits.

The KV cache holds the prompt and the finished canvases; the encoder's keys of the canvas being drafted
are cropped off before each decoder pass (the decoder reads only clean earlier canvases, as in training).

    python -m dg generate --mode hybrid --prompt "Add 55806, 5298 and 3132." --thinking
"""

import threading
import time
from collections.abc import Iterator

import torch

from dg.ar import next_token_logits
from dg.config import SamplerConfig
from dg.kernels.sampling import sample_step
from dg.passes import (after_prefill, decode, decoder_mask, encode, entropy, eos_token_ids, new_cache, pad_token_id,
                       positions, split_inputs, top_k)
from dg.sampler import _step_record, pin_step
from dg.trace import RoundRecord, RunEnd, RunStart, TokenRecord, Trace

DRAFT_STEPS = 1  # denoising steps per round: verifying after every step measured fastest (model card)


class _Verified:
    """The tokens AR has accepted so far, with the records they are yielded as."""

    def __init__(self, eos_ids, max_new_tokens: int, clock: float, device):
        self.ids: list[int] = []
        self.eos, self.max_new_tokens, self.clock, self.device = set(eos_ids), max_new_tokens, clock, device

    @property
    def done(self) -> bool:
        return len(self.ids) >= self.max_new_tokens or (bool(self.ids) and self.ids[-1] in self.eos)

    def add(self, token: int, logits: torch.Tensor) -> TokenRecord:
        probs, ids = top_k(logits)
        self.ids.append(token)
        return TokenRecord(len(self.ids) - 1, token, float(entropy(logits)), ids.cpu().numpy(),
                           probs.cpu().numpy(), time.perf_counter() - self.clock)


def _agreeing(draft: torch.Tensor, ar_logits: torch.Tensor, held: int) -> int:
    """How many draft tokens from canvas position `held` on equal greedy AR's; `ar_logits` (C, V) row i is
    AR's next-token logits for position i + 1 given the draft up to position i."""
    agree = (draft[held:] == ar_logits[held - 1:-1].argmax(dim=-1)).long()
    return int(agree.cumprod(dim=0).sum())


@torch.no_grad()
def stream_hybrid(model, inputs: dict, config: SamplerConfig | None = None, *, draft_steps: int = DRAFT_STEPS,
                  cancel: threading.Event | None = None) -> Iterator:
    """Yield RunStart; per round the draft's StepRecords, a RoundRecord and a TokenRecord per token it
    verified (AR's own entropy and top-k); then RunEnd. The tokens are greedy AR's."""
    if draft_steps < 1:
        raise ValueError(f"draft_steps must be >= 1, got {draft_steps}")
    config = config or SamplerConfig.from_generation_config(model.generation_config)
    input_ids, extra = split_inputs(inputs)
    device, base = input_ids.device, input_ids.shape[1]
    length, vocab = model.config.canvas_length, model.config.text_config.vocab_size
    eos_ids, pad = eos_token_ids(model), pad_token_id(model)
    clock = time.perf_counter()
    yield RunStart("hybrid", base, length, vocab, config.max_new_tokens, {**config.to_dict(), "draft_steps": draft_steps},
                   eos_ids, pad)
    cache = _rollback_cache(model)
    hidden = encode(model, input_ids, cache, positions(0, base, device), _ones(base, device), extra)
    _crop_to(cache, base)
    extra = after_prefill(extra)
    verified = _Verified(eos_ids, config.max_new_tokens, clock, device)
    next_logits = next_token_logits(model, hidden.last_hidden_state[:, -1])[0]  # (V,) AR's first token
    yield verified.add(int(next_logits.argmax()), next_logits)
    counts = {"encoder": 1, "decoder": 0, "round": 0}
    k = 0
    while not verified.done:
        yield from _draft_canvas(model, config, k, base + k * length, verified, cache, extra, draft_steps, counts,
                                 clock, cancel)
        if cancel is not None and cancel.is_set():
            yield RunEnd("cancelled", counts["encoder"], counts["decoder"], time.perf_counter() - clock)
            return
        k += 1
    finish = "eos" if verified.ids[-1] in verified.eos else "max_new_tokens"
    yield RunEnd(finish, counts["encoder"], counts["decoder"], time.perf_counter() - clock)


def _rollback_cache(model):
    """A KV cache whose sliding-window layers keep the keys a rejected draft pushes out of the window, so
    cropping the draft off brings them back (transformers' `activate_past_recording`)."""
    cache = new_cache(model)
    for layer in cache.layers:
        if hasattr(layer, "activate_past_recording"):
            layer.activate_past_recording()
    return cache


def _crop_to(cache, n: int) -> None:
    """Keep the cache's first n positions; DynamicCache.crop takes the count to drop, negated, and crop(0)
    trims the sliding-window layers back to their window after a pass."""
    cache.crop(-(cache.get_seq_length() - n))


def _ones(n: int, device) -> torch.Tensor:
    return torch.ones((1, n), dtype=torch.bool, device=device)


def _draft_canvas(model, config, k, start, verified, cache, extra, draft_steps, counts, clock, cancel):
    """Rounds on canvas k (cache positions start … start + C − 1) until it is verified whole (and the
    next canvas's first token is AR's), or EOS, the budget or `cancel` ends the run. The canvas's first
    token is always verified already (the previous pass predicted it)."""
    length, device = model.config.canvas_length, verified.device
    done_before = k * length  # output positions before this canvas
    canvas = torch.randint(0, model.config.text_config.vocab_size, (1, length), device=device)
    sc_logits, step = None, 0
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    mask = decoder_mask(model, canvas, cache, _ones(start, device))
    decoder_positions = positions(start, length, device)
    while not verified.done and len(verified.ids) <= done_before + length - 1:
        if cancel is not None and cancel.is_set():
            return
        held = len(verified.ids) - done_before
        pinned = torch.arange(length, device=device)[None] < held
        canvas[0, :held] = torch.tensor(verified.ids[done_before:], device=device)
        round_start = time.perf_counter() - clock
        for _ in range(draft_steps):
            step += 1
            temperature, s = draft_step(model, config, step, canvas, sc_logits, mask, cache, decoder_positions,
                                        extra, pinned)
            counts["decoder"] += 1
            yield _step_record(k, step, temperature, canvas, s, config.entropy_bound, False, False, None, clock, pinned)
            sc_logits, draft, canvas = s.scaled_logits.to(embed_dtype), s.argmax, s.next_canvas.clone()
        yield from _verify_round(model, draft, held, start, verified, cache, extra, counts, k, round_start, clock)


def draft_step(model, config, step, canvas, sc_logits, mask, cache, decoder_positions, extra, pinned):
    """Denoising step `step` (from 1) of a draft, its `pinned` positions held: (temperature, StepSample).
    The temperature follows the sampler's schedule for the steps that remain under the step cap."""
    logits = decode(model, canvas, sc_logits, mask, cache, decoder_positions, extra)
    remaining = max(config.max_denoising_steps - step + 1, 1)
    temperature = config.temperature(torch.tensor(remaining, dtype=torch.int32, device=canvas.device))
    s = sample_step(logits, temperature, canvas, config.entropy_bound, backend=config.backend)
    return temperature, pin_step(s, pinned, canvas, config.entropy_bound)


def _verify_round(model, draft, held, start, verified, cache, extra, counts, k, round_start, clock):
    """One causal encoder pass over the draft: keep the run AR agrees with, add AR's token after it. The
    cache keeps the canvas only once it is whole; until then it is cropped back to the canvas start."""
    device, length = draft.device, draft.shape[1]
    hidden = encode(model, draft, cache, positions(start, length, device), _ones(start + length, device), extra)
    counts["encoder"] += 1
    counts["round"] += 1
    ar_logits = next_token_logits(model, hidden.last_hidden_state)[0]  # (C, V): row i predicts position i + 1
    accepted = _agreeing(draft[0], ar_logits, held)
    first_mismatch = held + accepted
    records = [verified.add(int(token), ar_logits[held - 1 + i])
               for i, token in enumerate(draft[0, held:first_mismatch].tolist()) if not verified.done]
    bonus = None
    if not verified.done:
        # AR's token at the first disagreement, or, with the whole canvas agreed, the next canvas's first token
        bonus = int(ar_logits[first_mismatch - 1].argmax())
        records.append(verified.add(bonus, ar_logits[first_mismatch - 1]))
    probs, ids = top_k(ar_logits[first_mismatch - 1])
    yield RoundRecord(counts["round"], k, held, draft[0].cpu().numpy(), accepted, bonus, ids.cpu().numpy(),
                      probs.cpu().numpy(), round_start, time.perf_counter() - clock)
    yield from records
    if first_mismatch == length - 1 and not verified.done:  # the bonus ends the canvas: AR's next token after it
        _crop_to(cache, start + length - 1)
        hidden = encode(model, torch.tensor([[bonus]], device=device), cache, positions(start + length - 1, 1, device),
                        _ones(start + length, device), extra)
        counts["encoder"] += 1
        logits = next_token_logits(model, hidden.last_hidden_state[:, -1])[0]
        yield verified.add(int(logits.argmax()), logits)
    _crop_to(cache, start + length if first_mismatch >= length - 1 else start)


def generate_hybrid(model, inputs: dict, config: SamplerConfig | None = None, **kwargs) -> Trace:
    """Run hybrid decoding to the end and return the whole trace."""
    trace = Trace()
    for record in stream_hybrid(model, inputs, config, **kwargs):
        trace.add(record)
    return trace
