"""The graphed path: static buffers, and one captured CUDA graph per pass shape, for every pass after the prefill.

A run on this path (`dg.paths.open_passes(model, "graphs", tokens)`) makes the same passes as the eager one
(dg.paths.EagerPasses) through one `GraphedPasses` object: the prefill runs eagerly (any length, images
allowed); every later pass (an encoder pass of n tokens: AR's one token, a committed canvas, hybrid's verify
pass; a decoder pass over the canvas, with or without self-conditioning) writes its inputs into buffers
preallocated for its shape: token ids, positions (which are also the cache slots it writes), and the
attention masks, built outside the graph and copied in place. On CUDA the pass is captured once as a
`torch.cuda.CUDAGraph` on first use (no torch.compile, no code generation) and replayed after that; on a
CPU the same buffers go through the same calls eagerly, which is what the tests run. `_Graph` is the one
place the two differ. Sampling stays outside the graphs.

The KV cache is a static cache whose sliding-window layers are full length, like the full-attention ones;
the window lives in the masks (`pass_masks`), with the semantics of transformers' growing cache, which
`generate()` uses: an encoder query at position p sees keys p − W < k ≤ p; a decoder pass at `start` sees
the last W − 1 cached positions on sliding layers, everything cached on full ones, and the whole canvas.
A crop is then exact: it only moves `cached` back, and the masks hide what a rejected draft left in the
slots after it until the next pass overwrites them. transformers' own StaticCache keeps W slots on a sliding
layer and rolls them, so a crop past the window cannot bring keys back, and past the window its decoder pass
does not read what the growing cache keeps (measured on the random tiny model: logits 17-23 apart).
The price: sliding layers hold and attend over `capacity` slots, masked, instead of W.

Each `GraphedPasses` owns its cache and its graphs (their addresses are the cache's and the buffers'); a
pool on the model, keyed by `dg.passes.static_capacity`, lends one to each run and takes it back reset, so
runs at once each hold their own and later runs replay graphs already captured.

Measured here (CPU, the embedded model and a random tiny one): every pass of the stand-in equals the eager
pass on transformers' StaticCache bit for bit inside the sliding window, and matches the growing cache past
it; a cropped run equals a fresh one bit for bit. Not measured here (no GPU on this machine): capture and
replay on CUDA, their equality with eager there, and any speed: `python -m dg.bench.graphs` measures it.

    python -m pytest tests/test_graphs.py -q
"""

import threading
from contextlib import contextmanager

import torch
from transformers.cache_utils import Cache, StaticLayer

from dg.passes import after_prefill, encode as encoder_pass, static_capacity



def captures(device) -> bool:
    """Whether passes on `device` are captured as CUDA graphs (CUDA) or called eagerly on the same buffers."""
    return torch.device(device).type == "cuda"


class _SlotLayer(StaticLayer):
    """A full-length static layer that writes a pass's keys at the cache's `slots` (the pass's positions) and
    whose length is the cache's shared `offset`: the run object owns both, so a crop is one number."""

    def __init__(self, cache: "GraphCache", capacity: int, sliding: bool):
        super().__init__(max_cache_len=capacity)
        self.cache, self.is_sliding = cache, sliding
        self.cumulative_length = cache.offset  # where the decoder's `append_to_cache` puts the canvas

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self.cumulative_length = self.cache.offset  # one tensor for every layer (the parent copies it per layer)

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self.keys.index_copy_(2, self.cache.slots, key_states)
        self.values.index_copy_(2, self.cache.slots, value_states)
        return self.keys, self.values


class GraphCache(Cache):
    """A static KV cache of `capacity` slots on every layer, sliding ones included (their window is in the masks).

    `offset` (0-dim, on the model's device) is where the next pass starts; `slots` the positions the running
    encoder pass writes. `dg_capacity` / `dg_written` are what dg.passes.encode checks for the prefill."""

    def __init__(self, config, capacity: int, device):
        self.offset = torch.zeros((), dtype=torch.long, device=device)
        self.slots = None
        self.capacity = self.dg_capacity = capacity
        self.dg_written = 0
        layers = [_SlotLayer(self, capacity, kind == "sliding_attention") for kind in config.layer_types]
        super().__init__(layers=layers)


def pass_masks(layer_types, start: int, n: int, capacity: int, window: int | None, *, decoder: bool,
               device) -> dict[str, torch.Tensor]:
    """Each layer type's boolean mask (1, 1, n, K) for a pass of n queries at positions start … start + n − 1
    over a GraphCache's keys: K = capacity for an encoder pass, capacity + n for a decoder pass (the canvas's
    keys sit at its positions, transformers' `append_to_cache`). True attends.

    Encoder: causal, and on sliding layers only keys p − W < k ≤ p. Decoder: every cached position and the
    whole canvas, and on sliding layers only the last W − 1 cached ones: what transformers' growing cache
    keeps for them, so the passes give `generate()`'s tokens past the window too."""
    keys = torch.arange(capacity + (n if decoder else 0), device=device)[None]  # (1, K)
    queries = torch.arange(start, start + n, device=device)[:, None]  # (n, 1)
    if decoder:
        full = (keys < start + n).expand(n, -1)
        sliding = full & (keys > start - window) if window else full
    else:
        full = keys <= queries
        sliding = full & (keys > queries - window) if window else full
    masks = {"full_attention": full, "sliding_attention": sliding}
    return {kind: masks[kind][None, None] for kind in set(layer_types)}  # (1, 1, n, K)


class _Graph:
    """One pass shape: `fn` reads its static input buffers and returns its output. Captured on first use and
    replayed after (`capture`), else called eagerly on the same buffers: the CPU stand-in."""

    def __init__(self, fn, capture: bool, pool=None):
        self.fn, self.capture, self.pool = fn, capture, pool
        self.graph = self.output = None

    def __call__(self) -> torch.Tensor:
        if not self.capture:
            return self.fn()
        if self.graph is None:
            self._capture()
        self.graph.replay()
        return self.output.clone()  # the next replay overwrites the graph's own output

    def _capture(self) -> None:
        # one warm-up run on a side stream first (cuBLAS and allocator setup must not happen during capture); it
        # writes the same keys at the same slots as the replay that follows, so it leaves no trace
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self.fn()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        # thread_local: a run capturing does not fail another thread's run that is working on the GPU meanwhile
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            self.output = self.fn()
        self.graph = graph


class GraphedPasses:
    """One run's passes on the graphed path (the interface of dg.paths.EagerPasses): `cached` positions written,
    its own GraphCache and its graphs, one per pass shape, made on first use and kept across runs (`reset`)."""

    def __init__(self, model, capacity: int, *, capture: bool | None = None):
        text = model.config.get_text_config(decoder=True)
        if model.config._attn_implementation != "sdpa":  # the masks are sdpa's boolean ones (True attends)
            raise ValueError(f"the graphed path runs sdpa attention, got {model.config._attn_implementation!r}")
        self.model, self.device = model, model.device
        self.cache = GraphCache(text, capacity, self.device)
        self.capacity, self.layer_types = capacity, list(text.layer_types)
        self.window = getattr(text, "sliding_window", None)
        self.capture = captures(self.device) if capture is None else capture
        self.pool = torch.cuda.graph_pool_handle() if self.capture else None
        self._graphs, self._buffers = {}, {}
        self.cached = 0

    def reset(self) -> None:
        """Empty the cache (same addresses, so the graphs stay valid) for the next run."""
        self.cache.reset()
        self.cached = self.cache.dg_written = 0

    def _check(self, kind: str, n: int) -> None:
        if self.cached + n > self.capacity:
            raise ValueError(f"the graphed path's static KV cache holds {self.capacity} tokens; this {kind} of {n} at "
                             f"position {self.cached} would need {self.cached + n}: open the run with more tokens")

    def prefill(self, input_ids: torch.Tensor, extra: dict) -> torch.Tensor:
        """The causal encoder pass over the prompt (images included), eager: its last hidden state (1, L, H)."""
        if self.cached:
            raise ValueError(f"prefill writes the prompt into an empty cache; this one holds {self.cached} tokens")
        n = input_ids.shape[1]
        self._check("prefill", n)
        later = after_prefill(extra)
        if later:  # a captured pass reads only its own buffers: an input that changes per run has no place
            raise ValueError(f"the graphed path takes token ids only after the prefill, got {', '.join(sorted(later))}")
        self.cache.offset.fill_(0)
        self.cache.slots = torch.arange(n, device=self.device)
        position_ids = self.cache.slots[None]
        hidden = encoder_pass(self.model, input_ids, self.cache, position_ids,
                              torch.ones((1, n), dtype=torch.bool, device=self.device), extra, compiled=False)
        self.cached = n
        return hidden.last_hidden_state

    def encode(self, token_ids: torch.Tensor) -> torch.Tensor:
        """A causal encoder pass appending `token_ids` (1, n) to the cache; its last hidden state (1, n, H)."""
        n = token_ids.shape[1]
        self._check("encoder pass", n)
        b = self._inputs("encode", n)
        b["ids"].copy_(token_ids)
        self._write_place(b, decoder=False)
        hidden = self._graph(("encode", n), lambda: self._encoder_fn(b))()
        self.cached += n
        self.cache.dg_written = self.cached
        return hidden

    def decode(self, canvas: torch.Tensor, self_conditioning_logits: torch.Tensor | None) -> torch.Tensor:
        """The bidirectional decoder pass over `canvas` (1, C) after every cached position: logits (1, C, V)."""
        n = canvas.shape[1]
        self._check("decoder pass", n)
        b = self._inputs("decode", n)
        b["ids"].copy_(canvas)
        if b["start"] != self.cached:  # positions and masks hold for every step of one canvas
            self._write_place(b, decoder=True)
        self.cache.offset.fill_(self.cached)  # where `append_to_cache` puts the canvas's keys
        if self_conditioning_logits is None:  # transformers then adds zeros: a graph of its own
            return self._graph(("decode", n), lambda: self._decoder_fn(b))()
        key = ("self_conditioning", n, self_conditioning_logits.dtype)
        if key not in self._buffers:
            self._buffers[key] = torch.empty_like(self_conditioning_logits)
        sc = self._buffers[key]
        sc.copy_(self_conditioning_logits)
        return self._graph(key, lambda: self._decoder_fn(b, sc))()

    def crop(self, n: int) -> None:
        """Keep the first `n` cached positions: exact, as the masks hide every slot from `n` on."""
        if not 0 <= n <= self.cached:
            raise ValueError(f"crop keeps 0 to {self.cached} cached positions, got {n}")
        self.cached = self.cache.dg_written = n

    def _inputs(self, kind: str, n: int) -> dict:
        """The static input buffers of a pass shape: token ids, positions (= the slots it writes), masks, and
        the start they were written for."""
        if (kind, n) not in self._buffers:
            keys = self.capacity + (n if kind == "decode" else 0)  # a decoder pass appends its canvas's keys
            self._buffers[kind, n] = {
                "ids": torch.zeros((1, n), dtype=torch.long, device=self.device),
                "positions": torch.zeros((1, n), dtype=torch.long, device=self.device),
                "masks": {layer: torch.zeros((1, 1, n, keys), dtype=torch.bool, device=self.device)
                          for layer in set(self.layer_types)},
                "start": None,
            }
        return self._buffers[kind, n]

    def _write_place(self, b: dict, *, decoder: bool) -> None:
        """Write the positions and masks of a pass at `cached` into its buffers, in place."""
        n = b["ids"].shape[1]
        torch.arange(self.cached, self.cached + n, device=self.device, out=b["positions"][0])
        masks = pass_masks(self.layer_types, self.cached, n, self.capacity, self.window, decoder=decoder,
                           device=self.device)
        for layer, mask in masks.items():
            b["masks"][layer].copy_(mask)
        b["start"] = self.cached

    def _graph(self, key: tuple, make) -> _Graph:
        if key not in self._graphs:
            self._graphs[key] = _Graph(make(), self.capture, self.pool)
        return self._graphs[key]

    def _encoder_fn(self, b: dict):
        cache, encoder = self.cache, self.model.model.encoder

        def run() -> torch.Tensor:
            cache.slots = b["positions"][0]  # read by every layer's update; a capture keeps its address
            return encoder(input_ids=b["ids"], attention_mask=b["masks"], past_key_values=cache,
                           position_ids=b["positions"]).last_hidden_state

        return run

    def _decoder_fn(self, b: dict, self_conditioning_logits: torch.Tensor | None = None):
        cache, model = self.cache, self.model

        def run() -> torch.Tensor:
            return model(decoder_input_ids=b["ids"], self_conditioning_logits=self_conditioning_logits,
                         decoder_attention_mask=b["masks"], past_key_values=cache,
                         decoder_position_ids=b["positions"]).logits

        return run


_POOL_LOCK = threading.Lock()


@contextmanager
def graphed_passes(model, tokens: int, *, rollback: bool = False):
    """A run's GraphedPasses for at most `tokens` cached positions, from the model's pool, given back reset.

    `rollback` (hybrid crops drafts back out) needs nothing more on this path: every crop is exact. A capture
    replays the kernels the model's norms ran when it was made: with the norms fused (dg.kernels.fused_norms)
    the passes come from a pool of their own."""
    capacity = static_capacity(tokens)
    name = "dg_fused_graphed_passes" if getattr(model, "dg_fused_norms", 0) else "dg_graphed_passes"
    with _POOL_LOCK:
        pool = model.__dict__.setdefault(name, {}).setdefault(capacity, [])
        passes = pool.pop() if pool else None
    passes = passes or GraphedPasses(model, capacity)
    try:
        yield passes
    finally:
        passes.reset()
        with _POOL_LOCK:
            pool.append(passes)
