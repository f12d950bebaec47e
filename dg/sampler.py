"""The instrumented entropy-bound sampler (report Algorithm 1), streamed one step at a time.

Per canvas: an encoder pass writes the uncached tokens (prompt, then each committed canvas) into the
KV cache; the canvas starts as uniform random tokens (or a given seed canvas); each step runs the
bidirectional decoder with self-conditioning on the previous step's temperature-scaled logits, then
accepts the lowest-entropy positions within the entropy bound and renoises the rest. A canvas ends
when its argmax is stable and confident, or at the step cap; its argmax is committed.

With `backend="torch"` the ops and RNG draws are those of transformers' `model.generate()`, so after
`torch.manual_seed(s)` both produce the same tokens (tests/test_parity.py proves it).

    python -m dg generate --prompt "What is 487 + 356?" --thinking
"""

import math
import threading
import time
from collections import deque
from collections.abc import Iterator

import numpy as np
import torch

from dg.config import SamplerConfig
from dg.kernels.sampling import sample_step
from dg.loading import eos_token_ids
from dg.trace import CanvasRecord, RunEnd, RunStart, StepRecord, Trace

TOPK = 5
# consumed by the first encoder pass only (as in transformers' generate)
PREFILL_ONLY_KEYS = ("pixel_values", "image_position_ids", "mm_token_type_ids")


def split_inputs(inputs: dict) -> tuple[torch.Tensor, dict]:
    input_ids = inputs["input_ids"]
    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"dg samples one prompt at a time: input_ids must be (1, L), got {tuple(input_ids.shape)}")
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask") and v is not None}
    return input_ids, extra


def new_cache(model):
    from transformers import DynamicCache

    return DynamicCache(config=model.config.get_text_config(decoder=True))


def encode(model, token_ids, cache, position_ids, attention_mask, extra: dict):
    """Causal encoder pass over uncached tokens; appends their keys/values to `cache`."""
    encoder = model.model.encoder
    masks = encoder.create_masks_for_generate(
        config=model.config,
        inputs_embeds=torch.empty((1, token_ids.shape[1], 0), dtype=model.dtype, device=token_ids.device),
        attention_mask=attention_mask,
        past_key_values=cache,
        position_ids=position_ids,
        mm_token_type_ids=extra.get("mm_token_type_ids"),
    )
    return encoder(input_ids=token_ids.contiguous(), attention_mask=masks, past_key_values=cache,
                   position_ids=position_ids, **extra)


def _eos_pad(committed: torch.Tensor, eos: torch.Tensor | None, pad: int | None) -> tuple[torch.Tensor, bool]:
    """Everything after the first EOS becomes pad; the EOS itself is kept."""
    if eos is None:
        return committed, False
    is_eos = torch.isin(committed, eos)
    if not bool(is_eos.any()):
        return committed, False
    if pad is not None:
        seen = is_eos.cumsum(dim=-1)
        after = (seen > 0) & ~((seen == 1) & is_eos)
        committed = committed.masked_fill(after, pad)
    return committed, True


def _step_record(k, n, temperature, noisy, s, bound, stable, confident, reason, t) -> StepRecord:
    probs, ids = torch.topk(torch.softmax(s.scaled_logits[0].float(), dim=-1), TOPK, dim=-1)
    entropy = s.entropy[0].float()
    accepted = s.accepted[0]
    acc_entropy = entropy[accepted]
    lhs = float(acc_entropy.sum() - acc_entropy.max()) if accepted.any() else 0.0
    return StepRecord(
        canvas=k, step=n, temperature=float(temperature), noisy=noisy[0].cpu().numpy(),
        argmax=s.argmax[0].cpu().numpy(), sampled=s.sampled[0].cpu().numpy(),
        accepted=accepted.cpu().numpy().astype(bool), entropy=entropy.cpu().numpy().astype(np.float32),
        accepted_entropy=lhs, entropy_bound=float(bound), mean_entropy=float(entropy.mean()),
        stable=bool(stable), confident=bool(confident), stop_reason=reason,
        topk_ids=ids.cpu().numpy(), topk_probs=probs.cpu().numpy().astype(np.float32), t=t)


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
    gen = model.generation_config
    eos_ids = eos_token_ids(model)
    eos = torch.tensor(eos_ids, device=device) if eos_ids else None
    pad = gen.pad_token_id if gen.pad_token_id is not None else model.config.text_config.pad_token_id
    if init_canvas is not None and tuple(init_canvas.shape) != (1, canvas_length):
        raise ValueError(f"init_canvas must be (1, {canvas_length}), got {tuple(init_canvas.shape)}")

    clock = time.perf_counter()
    yield RunStart("diffusion", input_ids.shape[1], canvas_length, vocab_size, config.max_new_tokens,
                   config.to_dict(), eos_ids, pad)
    cur_len = input_ids.shape[1]
    max_length = cur_len + config.max_new_tokens
    cache = new_cache(model)
    attention_mask = torch.ones((1, cur_len), dtype=torch.bool, device=device)
    encoder_positions = torch.arange(0, cur_len, dtype=torch.int32, device=device).unsqueeze(0)
    pending = input_ids
    n_encoder = n_decoder = 0
    finish = "max_new_tokens"
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    for k in range(math.ceil(config.max_new_tokens / canvas_length)):
        encode(model, pending, cache, encoder_positions, attention_mask, extra)
        n_encoder += 1
        extra = {key: v for key, v in extra.items() if key not in PREFILL_ONLY_KEYS}
        decoder_positions = torch.arange(cur_len, cur_len + canvas_length, dtype=torch.int32, device=device)[None]
        decoder_mask = torch.nn.functional.pad(attention_mask, (0, canvas_length), value=True)
        canvas = torch.randint(0, vocab_size, (1, canvas_length), device=device)
        if k == 0 and init_canvas is not None:
            # generate() draws the random canvas even when a seed canvas replaces it; so do we (same RNG)
            canvas = init_canvas.to(device)
        mask_mapping = model.model.decoder.create_diffusion_decoder_attention_mask(
            config=model.config, inputs_embeds=canvas.unsqueeze(-1), past_key_values=cache,
            decoder_attention_mask=decoder_mask)
        stopper = _Stopper(config)
        sc_logits, argmax, reason, n = None, canvas, "step_cap", 0
        for n, steps_remaining in enumerate(range(config.max_denoising_steps, 0, -1), start=1):
            if cancel is not None and cancel.is_set():
                yield RunEnd("cancelled", n_encoder, n_decoder, time.perf_counter() - clock)
                return
            logits = model(decoder_input_ids=canvas, self_conditioning_logits=sc_logits,
                           decoder_attention_mask=mask_mapping, past_key_values=cache,
                           decoder_position_ids=decoder_positions, **extra).logits
            n_decoder += 1
            temperature = config.temperature(torch.tensor(steps_remaining, dtype=torch.int32, device=device))
            s = sample_step(logits, temperature, canvas, config.entropy_bound, backend=config.backend)
            stable, confident = stopper(s.argmax, s.entropy)
            done = stable and confident
            step_reason = "stable_confident" if done else ("step_cap" if steps_remaining == 1 else None)
            yield _step_record(k, n, temperature, canvas, s, config.entropy_bound, stable, confident,
                               step_reason, time.perf_counter() - clock)
            sc_logits = s.scaled_logits.to(embed_dtype)
            argmax, canvas = s.argmax, s.next_canvas
            if done:
                reason = "stable_confident"
                break
        committed, hit_eos = _eos_pad(argmax, eos, pad)
        cur_len += canvas_length
        tokens = int((committed != pad).sum()) if pad is not None else canvas_length
        yield CanvasRecord(k, n, reason, committed[0].cpu().numpy(), tokens, hit_eos, time.perf_counter() - clock)
        if hit_eos or cur_len >= max_length:
            finish = "eos" if hit_eos else "max_new_tokens"
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
