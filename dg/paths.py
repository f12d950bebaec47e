"""How a run's passes go through the model: one object per run, whatever the path.

Every decoding mode (dg.sampler, dg.ar, dg.hybrid) makes the same four kinds of pass, and makes them through
one `Passes` object that owns the run's KV cache: the prefill over the prompt, an encoder pass appending n
tokens (an AR token, a committed canvas, hybrid's verify pass over a draft), a decoder pass over the canvas,
and a crop that drops keys a rejected draft wrote. `open_passes` gives a run the object of its path:

- "eager": the model called as transformers calls it, on a growing `DynamicCache` (or the model's static one,
  `dg.passes.use_fast_paths`); hybrid's cache keeps the keys a draft pushes out of a sliding window so
  a crop brings them back;
- "compiled": a static cache from a pool on the model and `torch.compile` of the encoder pass (CUDA graphs on
  a GPU); AR only: a crop cannot roll a compiled static cache back;
- "graphs": static buffers and captured CUDA graphs for every pass after the prefill (dg.graphs); on a CPU the
  same buffers and calls run eagerly, which is what the parity tests run;
- "fused": the graphed passes, with every RMSNorm of the model on dg's Triton kernel (dg.kernels.fused_norms:
  one launch per norm instead of a chain of eight), swapped in at load; it needs CUDA (or Triton's interpreter),
  and its float32 sums run in another order than torch's, so it keeps `generate()`'s tokens only up to rounding.

    python -m pytest tests/test_paths.py -q
"""

import threading
import time
from contextlib import contextmanager

import torch

from dg.graphs import graphed_passes
from dg.passes import after_prefill, decode, decoder_mask, encode, new_cache, positions, static_capacity

PATHS = ("auto", "eager", "compiled", "graphs", "fused")  # what `choose_path` takes; "auto" picks per device


def choose_path(path: str, device) -> str:
    """The path runs take on a model on `device`: `path` itself, or for "auto" the graphed passes on CUDA (a
    pass is one graph launch instead of thousands of small kernels, for every mode, captured in the first run
    with no compile at load) and eager elsewhere (a CPU has no launches to save; the stand-in of the graphed
    path is for the tests)."""
    if path not in PATHS:
        raise ValueError(f"path must be one of {', '.join(PATHS)}, got {path!r}")
    if path != "auto":
        return path
    return "graphs" if torch.device(device).type == "cuda" else "eager"


def mode_path(path: str, mode: str) -> str:
    """The path a run of `mode` takes on a model loaded on `path`: compiling is AR's alone (hybrid crops its
    cache, which a compiled static cache cannot; a whole compiled decoder did not finish compiling at full
    size), so diffusion and hybrid run eager beside a compiled AR."""
    if path == "fused":
        return "graphs"  # the norms were fused once, at load; the passes are the graphed ones
    return "eager" if path == "compiled" and mode != "ar" else path


def _ones(n: int, device) -> torch.Tensor:
    return torch.ones((1, n), dtype=torch.bool, device=device)


class EagerPasses:
    """One run's passes called eagerly on its own KV cache (`cache`), `cached` positions written so far."""

    def __init__(self, model, cache, *, compile: bool | str | None = None):
        self.model, self.cache, self.compile = model, cache, compile
        self.cached, self.extra, self._masks = 0, {}, {}
        self.device = model.device

    def prefill(self, input_ids: torch.Tensor, extra: dict) -> torch.Tensor:
        """The causal encoder pass over the prompt (images included); its last hidden state (1, L, H)."""
        if self.cached:
            raise ValueError(f"prefill writes the prompt into an empty cache; this one holds {self.cached} tokens")
        hidden = self._encode(input_ids, extra)
        self.extra = after_prefill(extra)
        return hidden

    def encode(self, token_ids: torch.Tensor) -> torch.Tensor:
        """A causal encoder pass appending `token_ids` (1, n) to the cache; its last hidden state (1, n, H)."""
        return self._encode(token_ids, self.extra)

    def _encode(self, token_ids, extra) -> torch.Tensor:
        n, start = token_ids.shape[1], self.cached
        hidden = encode(self.model, token_ids, self.cache, positions(start, n, token_ids.device),
                        _ones(start + n, token_ids.device), extra, compiled=self.compile).last_hidden_state
        self.cached = start + n
        return hidden

    def decode(self, canvas: torch.Tensor, self_conditioning_logits: torch.Tensor | None) -> torch.Tensor:
        """The bidirectional decoder pass over `canvas` (1, C) after every cached position: logits (1, C, V)."""
        start, length = self.cached, canvas.shape[1]
        if start not in self._masks:  # one mask per canvas place, as generate() builds it once per canvas
            self._masks = {start: decoder_mask(self.model, canvas, self.cache, _ones(start, canvas.device))}
        return decode(self.model, canvas, self_conditioning_logits, self._masks[start], self.cache,
                      positions(start, length, canvas.device), self.extra, compiled=self.compile)

    def crop(self, n: int) -> None:
        """Keep the first `n` cached positions. DynamicCache.crop takes the count to drop, negated; crop(0)
        trims the sliding-window layers back to their window after a pass."""
        if not 0 <= n <= self.cached:
            raise ValueError(f"crop keeps 0 to {self.cached} cached positions, got {n}")
        self.cache.crop(-(self.cache.get_seq_length() - n))
        self.cached = n


class Run:
    """What every pass of one run shares: its `passes`, its clock, its stop (`cancel`) and the forwards it has run
    so far, counted here once for every mode (NFE, report §3.4; records carry them: `RunEnd.before`)."""

    def __init__(self, model, passes, cancel: threading.Event | None = None):
        self.model, self.passes, self.cancel = model, passes, cancel
        self.clock = time.perf_counter()
        self.encoder = self.decoder = 0

    @property
    def forwards(self) -> tuple[int, int]:
        """(encoder, decoder) passes run so far."""
        return self.encoder, self.decoder

    @property
    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def elapsed(self) -> float:
        """Seconds since the run began."""
        return time.perf_counter() - self.clock

    def prefill(self, input_ids: torch.Tensor, extra: dict) -> torch.Tensor:
        self.encoder += 1
        return self.passes.prefill(input_ids, extra)

    def encode(self, token_ids: torch.Tensor) -> torch.Tensor:
        self.encoder += 1
        return self.passes.encode(token_ids)

    def decode(self, canvas: torch.Tensor, self_conditioning_logits: torch.Tensor | None) -> torch.Tensor:
        self.decoder += 1
        return self.passes.decode(canvas, self_conditioning_logits)

    @property
    def cached(self) -> int:
        return self.passes.cached

    def crop(self, n: int) -> None:
        self.passes.crop(n)


def rollback_cache(model):
    """A KV cache whose sliding-window layers keep the keys a rejected draft pushes out of the window, so cropping
    the draft off brings them back (transformers' `activate_past_recording`)."""
    cache = new_cache(model, implementation="dynamic")
    for layer in cache.layers:
        if hasattr(layer, "activate_past_recording"):
            layer.activate_past_recording()
    return cache


@contextmanager
def _pooled_static_cache(model, tokens: int):
    """A static cache from the model's pool (`static_capacity`), given back reset when the run ends, so compiled
    graphs replay on the same addresses run after run; runs at once each hold their own."""
    capacity = static_capacity(tokens)
    pool = model.__dict__.setdefault("dg_static_caches", {}).setdefault(capacity, [])
    kv = pool.pop() if pool else new_cache(model, capacity, "static")
    try:
        yield kv
    finally:
        kv.reset()
        kv.dg_written = 0
        pool.append(kv)


@contextmanager
def open_passes(model, path: str, tokens: int, *, rollback: bool = False):
    """One run's `Passes` on `path` ("eager" | "compiled" | "graphs") for at most `tokens` cached positions
    (prompt + budget); `rollback`: the run crops drafts back out of its cache (hybrid)."""
    if path == "eager":
        # the model's cache: a growing one, or the static one `use_fast_paths` sized (which a run may not outgrow)
        yield EagerPasses(model, rollback_cache(model) if rollback else new_cache(model))
    elif path == "compiled":
        if rollback:
            raise ValueError("the compiled path cannot crop its static cache back: hybrid runs eager or graphs")
        with _pooled_static_cache(model, tokens) as kv:
            yield EagerPasses(model, kv, compile=getattr(model, "dg_compile", False) or True)
    elif path == "graphs":
        with graphed_passes(model, tokens, rollback=rollback) as passes:
            yield passes
    else:
        raise ValueError(f"a run's path is eager, compiled or graphs, got {path!r}")
