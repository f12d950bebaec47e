"""AR mode: the same DiffusionGemma weights decoding one token per forward (report §5.3).

The causal encoder pass writes each token into the KV cache; its last hidden state is already
final-normed, so next-token logits are softcap(lm_head(h)). Greedy or sampled, streamed per token; a
dynamic or a static KV cache, the per-token pass eager or compiled (as `generate(cache_implementation="static")`).

    python -m dg generate --mode ar --prompt "What is 2487 + 3356?"
"""

import threading
import time
from collections.abc import Iterator

import numpy as np
import torch

from dg.passes import after_prefill, encode, entropy, new_cache, positions, split_inputs, top_k
from dg.trace import RunEnd, RunStart, TokenRecord, Trace


def next_token_logits(model, hidden: torch.Tensor) -> torch.Tensor:
    """softcap(lm_head(h)) in float32, exactly as the decoder head does it."""
    cap = model.config.text_config.final_logit_softcapping
    logits = model.lm_head(hidden).to(torch.float32)
    if cap is not None:
        logits = torch.tanh(logits / cap) * cap
    return logits


def pick(logits: torch.Tensor, greedy: bool, temperature: float) -> torch.Tensor:
    if greedy:
        return torch.argmax(logits, dim=-1)
    probs = torch.softmax(logits / temperature, dim=-1)
    return torch.multinomial(probs, num_samples=1).squeeze(-1)


@torch.no_grad()
def stream_ar(model, inputs: dict, max_new_tokens: int, eos_token_ids=(), *, greedy: bool = True,
              temperature: float = 1.0, pad_token_id: int | None = None,
              cancel: threading.Event | None = None, cache: str | None = None,
              compile: bool | str | None = None) -> Iterator:
    """Yield RunStart, a TokenRecord per generated token (EOS included), then RunEnd.

    `cache` ("dynamic" | "static") and `compile` choose this run's KV cache and whether the per-token encoder
    pass is compiled (`dg.passes.use_fast_paths`); None keeps the model's setting. A static cache holds exactly
    prompt + `max_new_tokens` tokens.
    """
    if max_new_tokens <= 0:
        raise ValueError(f"max_new_tokens must be > 0, got {max_new_tokens}")
    if not greedy and not temperature > 0:
        raise ValueError(f"temperature must be > 0 for sampling, got {temperature}")
    if compile and (cache or model.generation_config.cache_implementation or "dynamic") != "static":
        raise ValueError("compile=True needs cache='static': a growing cache changes shapes every token")
    input_ids, extra = split_inputs(inputs)
    device = input_ids.device
    eos = {int(e) for e in eos_token_ids}
    clock = time.perf_counter()
    yield RunStart("ar", input_ids.shape[1], 1, model.config.text_config.vocab_size, max_new_tokens,
                   {"greedy": greedy, "temperature": temperature}, sorted(eos), pad_token_id)
    kv = new_cache(model, input_ids.shape[1] + max_new_tokens, cache)
    pending, cur_len, forwards, finish = input_ids, 0, 0, "max_new_tokens"
    for index in range(max_new_tokens):
        if cancel is not None and cancel.is_set():
            finish = "cancelled"
            break
        mask = torch.ones((1, cur_len + pending.shape[1]), dtype=torch.bool, device=device)
        hidden = encode(model, pending, kv, positions(cur_len, pending.shape[1], device), mask, extra, compiled=compile)
        forwards += 1
        extra = after_prefill(extra)
        cur_len += pending.shape[1]
        logits = next_token_logits(model, hidden.last_hidden_state[:, -1])  # (1, V)
        token = pick(logits, greedy, temperature)
        top_p, top_i = top_k(logits[0])
        yield TokenRecord(index, int(token), float(entropy(logits[0])), top_i.cpu().numpy(),
                          top_p.cpu().numpy().astype(np.float32), time.perf_counter() - clock)
        if int(token) in eos:
            finish = "eos"
            break
        pending = token.view(1, 1)
    yield RunEnd(finish, forwards, 0, time.perf_counter() - clock)


def generate_ar(model, inputs: dict, max_new_tokens: int, eos_token_ids=(), **kwargs) -> Trace:
    trace = Trace()
    for record in stream_ar(model, inputs, max_new_tokens, eos_token_ids, **kwargs):
        trace.add(record)
    return trace
