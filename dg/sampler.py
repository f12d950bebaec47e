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

import torch

from dg.config import SamplerConfig
from dg.kernels.sampling import sample_step
from dg.passes import (after_prefill, decode, decoder_mask, encode, eos_pad, eos_token_ids, new_cache, pad_token_id,
                       positions, split_inputs, to_host, top_k)
from dg.trace import CanvasRecord, RunEnd, RunStart, StepRecord, Trace


def _step_record(k, n, temperature, noisy, s, bound, stable, confident, reason, clock) -> StepRecord:
    """The step's record; its time is taken once the record is built (a top-k over the vocabulary is
    part of making it), so a viewer can show the step from then on.

    The top-k's probabilities come from what the step already holds (its softmax or its log-normalizer), and
    the step's arrays reach the host in one copy; the sums over them are taken there."""
    row = lambda t: None if t is None else t[0]  # noqa: E731
    probs, ids = top_k(s.scaled_logits[0], probs=row(s.probs), log_normalizer=row(s.log_normalizer))  # (C, k)
    on_device = isinstance(temperature, torch.Tensor)
    host = to_host(noisy[0], s.argmax[0], s.sampled[0], s.accepted[0], s.entropy[0].float(), ids, probs.float(),
                   *([temperature] if on_device else []))
    names = ("noisy", "argmax", "sampled", "accepted", "entropy", "topk_ids", "topk_probs")
    arrays = dict(zip(names, host))
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


def _denoise(model, config: SamplerConfig, canvas, mask, cache, decoder_positions, extra: dict, k: int,
             clock: float, cancel: threading.Event | None):
    """The denoising steps of canvas k: yield a StepRecord per step; return (argmax canvas, stop reason,
    decoder passes run). The reason is "stable_confident", "step_cap", or "cancelled" when `cancel` was
    set between two steps."""
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    stopper = _Stopper(config)
    sc_logits, argmax, n = None, canvas, 0
    for n, steps_remaining in enumerate(range(config.max_denoising_steps, 0, -1), start=1):
        if cancel is not None and cancel.is_set():
            return argmax, "cancelled", n - 1
        logits = decode(model, canvas, sc_logits, mask, cache, decoder_positions, extra)
        temperature = config.temperature(torch.tensor(steps_remaining, dtype=torch.int32, device=canvas.device))
        s = sample_step(logits, temperature, canvas, config.entropy_bound, backend=config.backend)
        stable, confident = stopper(s.argmax, s.entropy)
        done = stable and confident
        step_reason = "stable_confident" if done else ("step_cap" if steps_remaining == 1 else None)
        yield _step_record(k, n, temperature, canvas, s, config.entropy_bound, stable, confident, step_reason, clock)
        sc_logits = s.scaled_logits.to(embed_dtype)
        argmax, canvas = s.argmax, s.next_canvas
        if done:
            return argmax, "stable_confident", n
    return argmax, "step_cap", n


@torch.no_grad()
def stream_diffusion(model, inputs: dict, config: SamplerConfig | None = None, *,
                     init_canvas: torch.Tensor | None = None,
                     cancel: threading.Event | None = None) -> Iterator:
    """Yield RunStart, a StepRecord per step, a CanvasRecord per canvas, then RunEnd.

    `init_canvas` (1, C) seeds the first canvas (warm start / edit in place). Setting `cancel` stops
    the run between two steps; closing the generator does the same.
    """
    config = config or SamplerConfig.from_generation_config(model.generation_config)
    input_ids, extra = split_inputs(inputs)
    device = input_ids.device
    canvas_length = model.config.canvas_length
    vocab_size = model.config.text_config.vocab_size
    eos_ids, pad = eos_token_ids(model), pad_token_id(model)
    if init_canvas is not None and tuple(init_canvas.shape) != (1, canvas_length):
        raise ValueError(f"init_canvas must be (1, {canvas_length}), got {tuple(init_canvas.shape)}")

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
        if k == 0 and init_canvas is not None:
            # generate() draws the random canvas even when a seed canvas replaces it; so do we (same RNG)
            canvas = init_canvas.to(device)
        mask = decoder_mask(model, canvas, cache, attention_mask)
        argmax, reason, n = yield from _denoise(model, config, canvas, mask, cache, decoder_positions, extra, k,
                                                clock, cancel)
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


def generate_diffusion(model, inputs: dict, config: SamplerConfig | None = None, **kwargs) -> Trace:
    """Run the sampler to the end and return the whole trace."""
    trace = Trace()
    for record in stream_diffusion(model, inputs, config, **kwargs):
        trace.add(record)
    return trace
