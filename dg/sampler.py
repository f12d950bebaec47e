"""The instrumented entropy-bound sampler (report Algorithm 1), streamed one step at a time.

Per canvas: an encoder pass writes the uncached tokens (prompt, then each committed canvas) into the
KV cache; the canvas starts as uniform random tokens (or a given seed canvas); each step runs the
bidirectional decoder with self-conditioning on the previous step's temperature-scaled logits, then
accepts the lowest-entropy positions within the entropy bound and renoises the rest. A canvas ends
when its argmax is stable and confident, or at the step cap; its argmax is committed.

With `backend="torch"` the ops and RNG draws are those of transformers' `model.generate()`, so after
`torch.manual_seed(s)` both produce the same tokens (tests/test_parity.py proves it).

One divergence from `generate()`, on by default: a committed canvas that holds only pad ends the run
(finish reason "pad_canvas"). `generate()` keeps denoising canvases until `max_new_tokens`, and a model
that answers with pad and never writes EOS would run for as many canvases as the budget allows (a
100,000-token budget ran for minutes). `SamplerConfig(end_on_pad_canvas=False)` keeps the reference
behaviour; every token up to that canvas is the same either way.

    python -m dg generate --prompt "What is 2487 + 3356?" --thinking
"""

import math
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import replace

import torch

from dg.config import SamplerConfig
from dg.kernels.reference import StepSample, entropy_bound_mask
from dg.kernels.sampling import sample_step
from dg.passes import (after_prefill, decode, decoder_mask, encode, eos_pad, eos_token_ids, new_cache, pad_token_id,
                       positions, split_inputs, to_host, top_k)
from dg.trace import CanvasRecord, RunEnd, RunStart, StepRecord, Trace


def _step_record(k, n, temperature, noisy, s, bound, stable, confident, reason, clock, pinned=None) -> StepRecord:
    """The step's record; its time is taken once the record is built (a top-k over the vocabulary is
    part of making it), so a viewer can show the step from then on.

    The top-k's probabilities come from what the step already holds (its softmax or its log-normalizer), and
    the step's arrays reach the host in one copy; the sums over them are taken there."""
    row = lambda t: None if t is None else t[0]  # noqa: E731
    probs, ids = top_k(s.scaled_logits[0], probs=row(s.probs), log_normalizer=row(s.log_normalizer))  # (C, k)
    on_device = isinstance(temperature, torch.Tensor)
    extras = [*([pinned[0].bool()] if pinned is not None else []), *([temperature] if on_device else [])]
    host = to_host(noisy[0], s.argmax[0], s.sampled[0], s.accepted[0], s.entropy[0].float(), ids, probs.float(),
                   *extras)
    names = ("noisy", "argmax", "sampled", "accepted", "entropy", "topk_ids", "topk_probs")
    arrays = dict(zip(names, host))
    arrays["pinned"] = host[len(names)] if pinned is not None else None
    entropy = torch.from_numpy(arrays["entropy"])
    acc_entropy = entropy[torch.from_numpy(arrays["accepted"])]
    lhs = float(acc_entropy.sum() - acc_entropy.max()) if acc_entropy.numel() else 0.0
    return StepRecord(
        canvas=k, step=n, temperature=float(host[-1].item() if on_device else temperature), accepted_entropy=lhs,
        entropy_bound=float(bound), mean_entropy=float(entropy.mean()), stable=bool(stable), confident=bool(confident),
        stop_reason=reason, t=time.perf_counter() - clock, **arrays)


class _Stopper:
    """Stable (x̂ repeated for `stability_threshold` steps) and confident (mean H < threshold)."""

    def __init__(self, config: SamplerConfig):
        self.config = config
        self.history = deque(maxlen=max(config.stability_threshold, 1))

    def __call__(self, argmax: torch.Tensor, entropy: torch.Tensor) -> tuple[bool, bool]:
        if self.config.stability_threshold == 0:
            stable = True
        else:
            stable = len(self.history) == self.history.maxlen and all(bool((h == argmax).all()) for h in self.history)
            self.history.append(argmax)
        confident = bool(torch.mean(entropy, dim=-1)[0] < self.config.confidence_threshold)
        return stable, confident


def pin_step(s: StepSample, pinned: torch.Tensor, canvas: torch.Tensor, entropy_bound: float) -> StepSample:
    """The step `s` with the `pinned` positions held: they keep `canvas`'s tokens in the draft and the
    next canvas, are never renoised, and take no part in the entropy sort or bound, which picks among the
    free positions only (at least one of them is accepted while any is free)."""
    free_entropy = s.entropy.masked_fill(pinned, math.inf)  # sorted after every free position
    accepted = entropy_bound_mask(free_entropy, entropy_bound) & ~pinned
    noise = torch.randint(0, s.scaled_logits.shape[-1], canvas.shape, device=canvas.device)
    next_canvas = torch.where(pinned, canvas, torch.where(accepted, s.sampled, noise))
    return replace(s, argmax=torch.where(pinned, canvas, s.argmax), sampled=torch.where(pinned, canvas, s.sampled),
                   accepted=accepted, next_canvas=next_canvas)


def _denoise(model, config: SamplerConfig, canvas, mask, cache, decoder_positions, extra: dict, k: int,
             clock: float, cancel: threading.Event | None, pinned: torch.Tensor | None = None):
    """The denoising steps of canvas k: yield a StepRecord per step; return (argmax canvas, stop reason,
    decoder passes run). The reason is "stable_confident", "step_cap", or "cancelled" when `cancel` was
    set between two steps. `pinned` (1, C) positions keep `canvas`'s tokens throughout (`pin_step`); the
    mean entropy that stops a canvas is then taken over the free positions."""
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    stopper = _Stopper(config)
    sc_logits, argmax, n = None, canvas, 0
    if pinned is not None and bool(pinned.all()):
        return canvas, "stable_confident", 0  # nothing left to denoise
    for n, steps_remaining in enumerate(range(config.max_denoising_steps, 0, -1), start=1):
        if cancel is not None and cancel.is_set():
            return argmax, "cancelled", n - 1
        logits = decode(model, canvas, sc_logits, mask, cache, decoder_positions, extra)
        temperature = config.temperature(torch.tensor(steps_remaining, dtype=torch.int32, device=canvas.device))
        s = sample_step(logits, temperature, canvas, config.entropy_bound, backend=config.backend)
        if pinned is not None:
            s = pin_step(s, pinned, canvas, config.entropy_bound)
        stable, confident = stopper(s.argmax, s.entropy if pinned is None else s.entropy[~pinned][None])
        done = stable and confident
        step_reason = "stable_confident" if done else ("step_cap" if steps_remaining == 1 else None)
        yield _step_record(k, n, temperature, canvas, s, config.entropy_bound, stable, confident, step_reason, clock,
                           pinned)
        sc_logits = s.scaled_logits.to(embed_dtype)
        argmax, canvas = s.argmax, s.next_canvas
        if done:
            return argmax, "stable_confident", n
    return argmax, "step_cap", n


@torch.no_grad()
def stream_diffusion(model, inputs: dict, config: SamplerConfig | None = None, *,
                     init_canvas: torch.Tensor | None = None, pinned: torch.Tensor | None = None,
                     cancel: threading.Event | None = None) -> Iterator:
    """Yield RunStart, a StepRecord per step, a CanvasRecord per canvas, then RunEnd.

    `init_canvas` (1, n·C) seeds the first n canvases in turn (warm start / edit in place; transformers'
    `generate(decoder_input_ids=…)` seeds only the first, so n = 1 is its equal). `pinned`, a bool tensor
    of the same shape, holds those positions at `init_canvas`'s tokens at every step: never renoised,
    outside the entropy sort and bound (infill; `dg.drafts` builds both from text). Setting `cancel`
    stops the run between two steps; closing the generator does the same.
    """
    config = config or SamplerConfig.from_generation_config(model.generation_config)
    input_ids, extra = split_inputs(inputs)
    device = input_ids.device
    canvas_length = model.config.canvas_length
    vocab_size = model.config.text_config.vocab_size
    eos_ids, pad = eos_token_ids(model), pad_token_id(model)
    seeds = _seed_canvases(init_canvas, pinned, canvas_length)

    clock = time.perf_counter()
    yield RunStart("diffusion", input_ids.shape[1], canvas_length, vocab_size, config.max_new_tokens,
                   config.to_dict(), eos_ids, pad)
    cur_len = input_ids.shape[1]
    max_length = cur_len + config.max_new_tokens
    cache = new_cache(model)
    attention_mask = torch.ones((1, cur_len), dtype=torch.bool, device=device)
    encoder_positions = positions(0, cur_len, device)
    pending = input_ids
    n_encoder = n_decoder = 0
    finish = "max_new_tokens"
    for k in range(math.ceil(config.max_new_tokens / canvas_length)):
        encode(model, pending, cache, encoder_positions, attention_mask, extra)
        n_encoder += 1
        extra = after_prefill(extra)
        decoder_positions = positions(cur_len, canvas_length, device)
        canvas = torch.randint(0, vocab_size, (1, canvas_length), device=device)
        held = None
        if k < len(seeds):
            # generate() draws the random canvas even when a seed canvas replaces it; so do we (same RNG)
            seed, held = seeds[k]
            canvas, held = seed.to(device), None if held is None else held.to(device)
        mask = decoder_mask(model, canvas, cache, attention_mask)
        argmax, reason, n = yield from _denoise(model, config, canvas, mask, cache, decoder_positions, extra, k,
                                                clock, cancel, held)
        n_decoder += n
        if reason == "cancelled":
            yield RunEnd("cancelled", n_encoder, n_decoder, time.perf_counter() - clock)
            return
        committed, hit_eos = eos_pad(argmax, eos_ids, pad)
        cur_len += canvas_length
        tokens = int((committed != pad).sum()) if pad is not None else canvas_length
        yield CanvasRecord(k, n, reason, committed[0].cpu().numpy(), tokens, hit_eos, time.perf_counter() - clock)
        if hit_eos or cur_len >= max_length:
            finish = "eos" if hit_eos else "max_new_tokens"
            break
        if config.end_on_pad_canvas and pad is not None and tokens == 0:
            finish = "pad_canvas"  # dg's rule, not generate()'s: see the module docstring
            break
        pending = committed
        attention_mask = torch.nn.functional.pad(attention_mask, (0, canvas_length), value=True)
        encoder_positions = decoder_positions
    yield RunEnd(finish, n_encoder, n_decoder, time.perf_counter() - clock)


def _seed_canvases(init_canvas, pinned, canvas_length: int) -> list:
    """[(seed canvas (1, C), its pinned mask (1, C) or None)] per seeded canvas, checked."""
    if init_canvas is None:
        if pinned is not None:
            raise ValueError("pinned positions need init_canvas: the tokens they hold")
        return []
    if init_canvas.ndim != 2 or init_canvas.shape[0] != 1 or init_canvas.shape[1] % canvas_length:
        raise ValueError(f"init_canvas must be (1, n * {canvas_length}), got {tuple(init_canvas.shape)}")
    if pinned is not None and (pinned.shape != init_canvas.shape or pinned.dtype != torch.bool):
        raise ValueError(f"pinned must be a bool tensor of init_canvas's shape {tuple(init_canvas.shape)}, "
                         f"got {pinned.dtype} {tuple(pinned.shape)}")
    canvases = init_canvas.split(canvas_length, dim=1)
    masks = pinned.split(canvas_length, dim=1) if pinned is not None else [None] * len(canvases)
    return list(zip(canvases, masks))


def generate_diffusion(model, inputs: dict, config: SamplerConfig | None = None, **kwargs) -> Trace:
    """Run the sampler to the end and return the whole trace."""
    trace = Trace()
    for record in stream_diffusion(model, inputs, config, **kwargs):
        trace.add(record)
    return trace
