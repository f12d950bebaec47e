"""AR mode: the same DiffusionGemma weights decoding one token per forward (report §5.3).

The causal encoder pass writes each token into the KV cache; its last hidden state is already
final-normed, so next-token logits are softcap(lm_head(h)). Greedy or sampled, streamed per token; a
dynamic or a static KV cache, the per-token pass eager or compiled (as `generate(cache_implementation="static")`).

Where the model lives chooses the AR path every AR run takes (`choose_ar_path`, overridden by `--ar-path`):
on CUDA the static cache and the compiled step (CUDA graphs: a token is a few graph launches instead of
thousands of small kernels), compiled and warmed when the model loads (`warm_ar_path`) so no run pays it; on a
CPU the eager step. Measured on the embedded model, one thread of this 2-core CPU (`python -m dg.bench.ar_paths`):
the compiled step is 1.42x eager's tokens/s (187 vs 132) with the same tokens, but compiling costs 33-70 s at
every load (each test, each worker start), so there it is the `--ar-path compiled` choice, not the default.
Hybrid's verify pass stays eager on a growing cache: it crops the keys of a rejected draft back out.

    python -m dg generate --mode ar --prompt "What is 2487 + 3356?"
"""

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import torch

from dg.config import AR_PATHS
from dg.passes import after_prefill, encode, entropy, new_cache, positions, split_inputs, top_k
from dg.trace import RunEnd, RunStart, TokenRecord, Trace

STATIC_CACHE_BLOCK = 512  # a compiled run's static cache holds a power-of-two multiple of this many tokens
WARM_UP_TOKENS = 4  # a run this long compiles the step, records its CUDA graph and replays it once


def choose_ar_path(path: str, device) -> str:
    """"eager" or "compiled": `path` itself, or for "auto" the one for where the model lives: compiled on CUDA,
    eager elsewhere (a CPU gains 1.4x a token from compiling but pays 33-70 s at every load: module docstring)."""
    if path not in AR_PATHS:
        raise ValueError(f"ar_path must be one of {', '.join(AR_PATHS)}, got {path!r}")
    if path != "auto":
        return path
    return "compiled" if torch.device(device).type == "cuda" else "eager"


def ar_path_options(path: str) -> dict:
    """`stream_ar`'s cache and compile arguments for an AR path ("eager" | "compiled")."""
    if path not in AR_PATHS[1:]:
        raise ValueError(f"an AR path is eager or compiled, got {path!r}")
    return {"cache": "static", "compile": True} if path == "compiled" else {"cache": "dynamic", "compile": False}


def static_capacity(tokens: int) -> int:
    """A compiled run's static cache size for `tokens`: the next power-of-two multiple of STATIC_CACHE_BLOCK,
    so runs of nearby lengths share one compiled graph instead of compiling one per length."""
    capacity = STATIC_CACHE_BLOCK
    while capacity < tokens:
        capacity *= 2
    return capacity


@contextmanager
def _run_cache(model, tokens: int, cache: str | None, compile):
    """One run's KV cache of `tokens` tokens. A compiled run's static cache (`static_capacity`) comes from a pool
    kept on the model and goes back to it reset when the run ends, so the CUDA graphs replay on the same
    addresses run after run instead of recording again for each new cache; runs at once each hold their own."""
    if not compile:
        yield new_cache(model, tokens, cache)
        return
    capacity = static_capacity(tokens)
    pool = model.__dict__.setdefault("dg_static_caches", {}).setdefault(capacity, [])
    kv = pool.pop() if pool else new_cache(model, capacity, "static")
    try:
        yield kv
    finally:
        kv.reset()
        kv.dg_written = 0
        pool.append(kv)


def warm_ar_path(model, path: str) -> None:
    """Compile the AR step of the compiled path now (a short run on a few pad tokens), so the first real run
    does not wait for it; the eager path needs nothing."""
    if path != "compiled":
        return
    pad = model.config.get_text_config().pad_token_id or 0
    prompt = torch.full((1, WARM_UP_TOKENS), pad, dtype=torch.long, device=model.device)
    generate_ar(model, {"input_ids": prompt}, WARM_UP_TOKENS, **ar_path_options(path))


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
    prompt + `max_new_tokens` tokens; a compiled run's, that rounded up by `static_capacity`, and comes from the
    model's pool (`_run_cache`).
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
    with _run_cache(model, input_ids.shape[1] + max_new_tokens, cache, compile) as kv:
        pending, cur_len, forwards, finish = input_ids, 0, 0, "max_new_tokens"
        for index in range(max_new_tokens):
            if cancel is not None and cancel.is_set():
                finish = "cancelled"
                break
            mask = torch.ones((1, cur_len + pending.shape[1]), dtype=torch.bool, device=device)
            hidden = encode(model, pending, kv, positions(cur_len, pending.shape[1], device), mask, extra,
                            compiled=compile)
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
