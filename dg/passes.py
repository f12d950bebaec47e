"""Model plumbing shared by the sampler, AR mode, the single educator pass and the benchmarks.

One home for each piece: the token ids a run needs (EOS, pad), splitting the inputs, the KV cache,
the causal encoder pass that writes uncached tokens into it (prefill, and each committed canvas),
the decoder's attention mask and forward over a canvas, the after-EOS mask, the top-k and
entropy of a distribution that every per-step and per-token record carries, and the one copy that
brings a record's arrays to the host.

    python -m pytest tests/test_passes.py -q
"""

import numpy as np
import torch

CACHE_IMPLEMENTATIONS = ("dynamic", "static")
TOPK = 5  # candidates kept per position in the records (inspector, race tooltips)
# consumed by the first encoder pass only (as in transformers' generate)
PREFILL_ONLY_KEYS = ("pixel_values", "image_position_ids", "mm_token_type_ids")


def eos_token_ids(model) -> list[int]:
    """The model's EOS ids: its generation config's, else its text config's."""
    eos = model.generation_config.eos_token_id
    if eos is None:
        eos = model.config.get_text_config().eos_token_id
    return [eos] if isinstance(eos, int) else list(eos or [])


def pad_token_id(model) -> int | None:
    """The pad id committed canvases are filled with after their EOS."""
    pad = model.generation_config.pad_token_id
    return model.config.get_text_config().pad_token_id if pad is None else pad


def split_inputs(inputs: dict) -> tuple[torch.Tensor, dict]:
    """(input_ids (1, L), the other model inputs); the attention mask is rebuilt per pass."""
    input_ids = inputs["input_ids"]
    if input_ids.ndim != 2 or input_ids.shape[0] != 1:
        raise ValueError(f"dg samples one prompt at a time: input_ids must be (1, L), got {tuple(input_ids.shape)}")
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask") and v is not None}
    return input_ids, extra


def after_prefill(extra: dict) -> dict:
    """The inputs later passes still need: images are encoded by the first pass only."""
    return {k: v for k, v in extra.items() if k not in PREFILL_ONLY_KEYS}


def use_fast_paths(model, cache: str = "dynamic", max_length: int | None = None, compile: bool | str = False):
    """How every later run on `model` passes through it, in transformers' own switches (as
    `generate(cache_implementation="static")` sets them).

    `cache="static"`: each run preallocates one KV cache of `max_length` tokens (the prompt + the token budget,
    a diffusion run's in whole canvases), so every pass after the prefill has the same shapes; `compile=True`
    (static only) then runs the encoder passes after the prefill and the decoder pass through
    `torch.compile(mode="reduce-overhead")`, CUDA graphs on a GPU: an AR token or a decoder step becomes a few
    graph launches instead of thousands of small kernels. A string names another torch.compile backend:
    "eager" captures the same whole graphs without generating code (seconds, for checks on a CPU).
    """
    if cache not in CACHE_IMPLEMENTATIONS:
        raise ValueError(f"cache must be one of {CACHE_IMPLEMENTATIONS}, got {cache!r}")
    if cache == "static" and not (isinstance(max_length, int) and max_length > 0):
        raise ValueError(f"a static cache needs max_length > 0 (prompt + token budget), got {max_length}")
    if compile and cache != "static":
        raise ValueError("compile=True needs cache='static': a growing cache changes shapes every pass")
    model.generation_config.cache_implementation = "static" if cache == "static" else None
    if max_length is not None:
        model.generation_config.max_length = max_length
    model.dg_compile = compile
    return model


def new_cache(model, max_length: int | None = None, implementation: str | None = None):
    """A KV cache for one run: `implementation` ("dynamic" | "static"), else the model's (`use_fast_paths`);
    a static one holds `max_length` tokens, else the generation config's `max_length`."""
    from transformers import DynamicCache, StaticCache

    implementation = implementation or model.generation_config.cache_implementation or "dynamic"
    config = model.config.get_text_config(decoder=True)
    if implementation == "dynamic":
        return DynamicCache(config=config)
    if implementation != "static":
        raise ValueError(f"cache must be one of {CACHE_IMPLEMENTATIONS}, got {implementation!r}")
    capacity = max_length or model.generation_config.max_length
    cache = StaticCache(config=config, max_cache_len=capacity)
    cache.dg_capacity, cache.dg_written = capacity, 0  # tokens it holds, tokens written (checked by `encode`)
    return cache


def _compiled(model, part: str, backend: str):
    """The model's compiled encoder or forward, compiled once per model and backend (as `generate()` keeps them)."""
    store = model.__dict__.setdefault("dg_compiled", {})
    if (part, backend) not in store:
        fn = model.model.encoder if part == "encoder" else model.forward
        mode = "reduce-overhead" if backend == "inductor" else None
        compiled = torch.compile(fn, backend=backend, mode=mode, fullgraph=True)

        def run(*args, **kwargs):
            # a CUDA graph's outputs are overwritten by its next replay: each pass starts a new step, as generate() does
            torch.compiler.cudagraph_mark_step_begin()
            return compiled(*args, **kwargs)

        store[part, backend] = run
    return store[part, backend]


def _compile_backend(model, cache, compiled: bool | str | None) -> str | None:
    """The torch.compile backend this pass runs with, or None for eager."""
    wanted = getattr(model, "dg_compile", False) if compiled is None else compiled
    if not wanted or not cache.is_compileable:
        return None
    return wanted if isinstance(wanted, str) else "inductor"


def positions(start: int, length: int, device) -> torch.Tensor:
    """(1, length) int32 positions start … start + length − 1."""
    return torch.arange(start, start + length, dtype=torch.int32, device=device)[None]


def encode(model, token_ids, cache, position_ids, attention_mask, extra: dict, *, compiled: bool | str | None = None):
    """Causal encoder pass over uncached tokens; appends their keys/values to `cache`.

    Compiled (`compiled`, else the model's `use_fast_paths`) only after the prefill, whose length varies."""
    encoder = run = model.model.encoder
    if hasattr(cache, "dg_capacity"):
        if cache.dg_written + token_ids.shape[1] > cache.dg_capacity:
            raise ValueError(f"the static KV cache holds {cache.dg_capacity} tokens; this pass would make it "
                             f"{cache.dg_written + token_ids.shape[1]}: give use_fast_paths a larger max_length")
        prefill = cache.dg_written == 0
        cache.dg_written += token_ids.shape[1]
        backend = _compile_backend(model, cache, compiled)
        if not prefill and backend:
            run = _compiled(model, "encoder", backend)
    masks = encoder.create_masks_for_generate(
        config=model.config,
        inputs_embeds=torch.empty((1, token_ids.shape[1], 0), dtype=model.dtype, device=token_ids.device),
        attention_mask=attention_mask,
        past_key_values=cache,
        position_ids=position_ids,
        mm_token_type_ids=extra.get("mm_token_type_ids"),
    )
    return run(input_ids=token_ids.contiguous(), attention_mask=masks, past_key_values=cache,
               position_ids=position_ids, **extra)


def decoder_mask(model, canvas: torch.Tensor, cache, attention_mask: torch.Tensor):
    """The decoder's mask for one canvas: every cached token plus the whole canvas (bidirectional)."""
    return model.model.decoder.create_diffusion_decoder_attention_mask(
        config=model.config, inputs_embeds=canvas.unsqueeze(-1), past_key_values=cache,
        decoder_attention_mask=torch.nn.functional.pad(attention_mask, (0, canvas.shape[1]), value=True))


def decode(model, canvas, self_conditioning_logits, mask, cache, position_ids, extra: dict, *,
           compiled: bool | str | None = None) -> torch.Tensor:
    """One decoder pass over the canvas, reading the KV cache: logits (1, C, V). Compiled as `encode` is."""
    backend = _compile_backend(model, cache, compiled)
    forward = _compiled(model, "forward", backend) if backend else model
    return forward(decoder_input_ids=canvas, self_conditioning_logits=self_conditioning_logits,
                 decoder_attention_mask=mask, past_key_values=cache, decoder_position_ids=position_ids,
                 **extra).logits


def after_eos(ids: torch.Tensor, eos_ids) -> torch.Tensor:
    """True at every position after the first EOS (the EOS itself is kept); pad goes there."""
    is_eos = torch.isin(ids, torch.as_tensor(list(eos_ids), dtype=ids.dtype, device=ids.device))
    seen = is_eos.cumsum(dim=-1)
    return (seen > 0) & ~((seen == 1) & is_eos)


def eos_pad(committed: torch.Tensor, eos_ids, pad: int | None) -> tuple[torch.Tensor, bool]:
    """(the canvas with everything after its first EOS set to pad, whether it holds an EOS)."""
    if not eos_ids or not bool(torch.isin(committed, torch.as_tensor(list(eos_ids), device=committed.device)).any()):
        return committed, False
    if pad is not None:
        committed = committed.masked_fill(after_eos(committed, eos_ids), pad)
    return committed, True


def top_k(logits: torch.Tensor, k: int = TOPK, *, probs: torch.Tensor | None = None,
          log_normalizer: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(probabilities, ids) of the k most likely tokens of softmax(logits) over the last dim, float32.

    A sampling step already holds what the probabilities need (`StepSample`): given `probs` (that softmax,
    float32) the top-k is taken from it; given `log_normalizer` (log Σ exp(logits) over the last dim) it is
    taken from the logits themselves and p = exp(logit − log_normalizer). Either way no second (…, V)
    softmax is written and read again (268 MB at the release's 256 × 262,144).
    """
    if probs is not None:
        return torch.topk(probs, k, dim=-1)
    if log_normalizer is not None:
        values, ids = torch.topk(logits, k, dim=-1)
        return torch.exp(values.float() - log_normalizer.unsqueeze(-1)), ids
    return torch.topk(torch.softmax(logits.float(), dim=-1), k, dim=-1)


def to_host(*tensors: torch.Tensor) -> list[np.ndarray]:
    """NumPy copies of several device tensors through one device-to-host copy (one sync, not one per tensor).

    The tensors' bytes are packed into one uint8 buffer, each padded to 8 bytes so every array stays aligned;
    the arrays are views into that one host buffer, with the tensors' dtypes and shapes. Tensors on the host
    beside device tensors (a temperature made on the CPU) go to the device first; tensors on two different
    accelerators raise, naming both.
    """
    accelerators = {str(t.device) for t in tensors if t.device.type != "cpu"}
    if len(accelerators) > 1:
        raise ValueError(f"to_host copies from one device at a time, got tensors on {', '.join(sorted(accelerators))}")
    devices = {t.device for t in tensors}
    home = next((d for d in devices if d.type != "cpu"), torch.device("cpu"))  # a CPU tensor rides along to it
    chunks, layout = [], []
    for tensor in tensors:
        flat = tensor.detach().to(home).reshape(-1).contiguous().view(torch.uint8)
        pad = -flat.numel() % 8
        chunks += [flat, flat.new_zeros(pad)] if pad else [flat]
        layout.append((tensor, flat.numel() + pad))
    packed = torch.cat(chunks).cpu().numpy() if chunks else np.zeros(0, dtype=np.uint8)
    arrays, offset = [], 0
    for tensor, nbytes in layout:
        dtype = torch.empty(0, dtype=tensor.dtype).numpy().dtype
        arrays.append(packed[offset:offset + tensor.numel() * dtype.itemsize].view(dtype).reshape(tensor.shape))
        offset += nbytes
    return arrays


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of softmax(logits) over the last dim, float32."""
    return torch.distributions.Categorical(logits=logits.float()).entropy()


def token_record(index: int, token: int, logits: torch.Tensor, t: float, forwards: tuple | None = None):
    """The record of one decoded token: its id, the entropy and top-k of the distribution it came from
    (`logits` (V,): AR's next-token logits, or a `generate()` streamer's scores), `t` seconds into the run."""
    from dg.trace import TokenRecord

    probs, ids = top_k(logits)
    return TokenRecord(index, int(token), float(entropy(logits)), ids.cpu().numpy(),
                       probs.cpu().numpy().astype(np.float32), t, forwards)


STATIC_CACHE_BLOCK = 512  # a pooled static cache holds a power-of-two multiple of this many tokens


def static_capacity(tokens: int) -> int:
    """A pooled static cache's size for `tokens`: the next power-of-two multiple of STATIC_CACHE_BLOCK, so runs of
    nearby lengths share one cache (and its graphs) instead of making one per length."""
    if tokens <= 0:
        raise ValueError(f"a static cache holds at least one token, got {tokens}")
    capacity = STATIC_CACHE_BLOCK
    while capacity < tokens:
        capacity *= 2
    return capacity
