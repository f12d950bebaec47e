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
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, replace

import torch

from dg.config import SamplerConfig, whole_canvases
from dg.drafts import Draft
from dg.kernels.reference import StepSample, entropy_bound_mask
from dg.kernels.sampling import sample_step
from dg.passes import eos_pad, eos_token_ids, pad_token_id, split_inputs, to_host, top_k
from dg.paths import Run, open_passes
from dg.trace import CanvasRecord, RunEnd, RunStart, StepRecord, Trace


@dataclass
class Denoised:
    """One denoising step's decoder pass and sampling step (`denoise_step`), before its stop rule is applied."""

    canvas: int  # k, 0-based
    step: int  # from 1 within the canvas
    temperature: torch.Tensor  # τ, a 0-dim tensor on the canvas's device
    noisy: torch.Tensor  # (1, C) the canvas the decoder read
    sample: StepSample
    entropy_bound: float
    pinned: torch.Tensor | None  # (1, C) bool: positions held at their tokens
    forwards: tuple  # (encoder, decoder) passes the run had made before this step's decoder pass


def denoise_step(run: Run, config: SamplerConfig, k: int, step: int, canvas: torch.Tensor,
                 self_conditioning_logits: torch.Tensor | None, pinned: torch.Tensor | None = None) -> Denoised:
    """Step `step` of canvas k (report Algorithm 1, steps 1-5): the decoder pass with self-conditioning, then the
    sampling step at τ for the steps left under the cap (at least one: a hybrid draft may outlast the cap), with
    `pinned` positions held (`pin_step`). The sampler and hybrid's drafts both denoise through here."""
    forwards = run.forwards
    logits = run.decode(canvas, self_conditioning_logits)  # (1, C, V)
    remaining = max(config.max_denoising_steps - step + 1, 1)
    temperature = config.temperature(torch.tensor(remaining, dtype=torch.int32, device=canvas.device))
    s = sample_step(logits, temperature, canvas, config.entropy_bound, backend=config.backend)
    if pinned is not None:
        s = pin_step(s, pinned, canvas, config.entropy_bound)
    return Denoised(k, step, temperature, canvas, s, config.entropy_bound, pinned, forwards)


def step_record(run: Run, d: Denoised, stable: bool = False, confident: bool = False,
                reason: str | None = None) -> StepRecord:
    """The step's record; its time is taken once the record is built (a top-k over the vocabulary is
    part of making it), so a viewer can show the step from then on.

    The top-k's probabilities come from what the step already holds (its softmax or its log-normalizer), and
    the step's arrays reach the host in one copy; the sums over them are taken there."""
    s = d.sample
    row = lambda t: None if t is None else t[0]  # noqa: E731
    probs, ids = top_k(s.scaled_logits[0], probs=row(s.probs), log_normalizer=row(s.log_normalizer))  # (C, k)
    extras = [*([d.pinned[0].bool()] if d.pinned is not None else []), d.temperature.reshape(1).float()]
    host = to_host(d.noisy[0], s.argmax[0], s.sampled[0], s.accepted[0], s.entropy[0].float(), ids, probs.float(),
                   *extras)
    names = ("noisy", "argmax", "sampled", "accepted", "entropy", "topk_ids", "topk_probs")
    arrays = dict(zip(names, host))
    arrays["pinned"] = host[len(names)] if d.pinned is not None else None
    entropy = torch.from_numpy(arrays["entropy"])
    acc_entropy = entropy[torch.from_numpy(arrays["accepted"])]
    lhs = float(acc_entropy.sum() - acc_entropy.max()) if acc_entropy.numel() else 0.0
    return StepRecord(
        canvas=d.canvas, step=d.step, temperature=float(host[-1][0]), accepted_entropy=lhs,
        entropy_bound=float(d.entropy_bound), mean_entropy=float(entropy.mean()), stable=bool(stable),
        confident=bool(confident), stop_reason=reason, t=run.elapsed(), forwards=d.forwards, **arrays)


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


def _denoise(run: Run, config: SamplerConfig, k: int, canvas: torch.Tensor, pinned: torch.Tensor | None):
    """The denoising steps of canvas k: yield a StepRecord per step; return (argmax canvas, stop reason,
    decoder passes run). The reason is "stable_confident", "step_cap", or "cancelled" when the run's stop
    was set between two steps. `pinned` (1, C) positions keep `canvas`'s tokens throughout (`pin_step`); the
    mean entropy that stops a canvas is then taken over the free positions."""
    embed_dtype = run.model.model.decoder.embed_tokens.weight.dtype
    stopper = _Stopper(config)
    sc_logits, argmax, n = None, canvas, 0
    if pinned is not None and bool(pinned.all()):
        return canvas, "stable_confident", 0  # nothing left to denoise
    for n in range(1, config.max_denoising_steps + 1):
        if run.cancelled:
            return argmax, "cancelled", n - 1
        d = denoise_step(run, config, k, n, canvas, sc_logits, pinned)
        s = d.sample
        stable, confident = stopper(s.argmax, s.entropy if pinned is None else s.entropy[~pinned][None])
        done = stable and confident
        reason = "stable_confident" if done else ("step_cap" if n == config.max_denoising_steps else None)
        yield step_record(run, d, stable, confident, reason)
        sc_logits = s.scaled_logits.to(embed_dtype)
        argmax, canvas = s.argmax, s.next_canvas
        if done:
            return argmax, "stable_confident", n
    return argmax, "step_cap", n


@torch.no_grad()
def stream_diffusion(model, inputs: dict, config: SamplerConfig | None = None, *,
                     cancel: threading.Event | None = None, draft: Draft | None = None,
                     path: str = "eager") -> Iterator:
    """Yield RunStart, a StepRecord per step, a CanvasRecord per canvas, then RunEnd.

    `draft` (dg.drafts) seeds the first n canvases with its `init_canvas` (1, n·C) in turn (warm start / edit
    in place; transformers' `generate(decoder_input_ids=…)` seeds only the first, so n = 1 is its equal); its
    `pinned` positions, if any, are held at their tokens at every step: never renoised, outside the entropy
    sort and bound (infill). Setting `cancel` stops the run between two steps; closing the generator does the
    same. `path` is how the passes run (dg.paths).
    """
    config = config or SamplerConfig.from_generation_config(model.generation_config)
    input_ids, extra = split_inputs(inputs)
    device = input_ids.device
    canvas_length = model.config.canvas_length
    vocab_size = model.config.text_config.vocab_size
    eos_ids, pad = eos_token_ids(model), pad_token_id(model)
    seeds = _seed_canvases(draft, canvas_length, device)
    n_canvases = whole_canvases(config.max_new_tokens, canvas_length)
    with open_passes(model, path, input_ids.shape[1] + n_canvases * canvas_length) as passes:
        run = Run(model, passes, cancel)
        yield RunStart("diffusion", input_ids.shape[1], canvas_length, vocab_size, config.max_new_tokens,
                       config.to_dict(), eos_ids, pad)
        max_length = input_ids.shape[1] + config.max_new_tokens
        finish, committed = "max_new_tokens", None
        for k in range(n_canvases):
            run.prefill(input_ids, extra) if k == 0 else run.encode(committed)
            canvas = torch.randint(0, vocab_size, (1, canvas_length), device=device)
            held = None
            if k < len(seeds):
                # generate() draws the random canvas even when a seed canvas replaces it; so do we (same RNG)
                canvas, held = seeds[k]
            argmax, reason, n = yield from _denoise(run, config, k, canvas, held)
            if reason == "cancelled":
                yield RunEnd("cancelled", *run.forwards, run.elapsed())
                return
            committed, hit_eos = eos_pad(argmax, eos_ids, pad)
            tokens = int((committed != pad).sum()) if pad is not None else canvas_length
            yield CanvasRecord(k, n, reason, committed[0].cpu().numpy(), tokens, hit_eos, run.elapsed())
            if hit_eos or run.cached + canvas_length >= max_length:
                finish = "eos" if hit_eos else "max_new_tokens"
                break
            if config.end_on_pad_canvas and pad is not None and tokens == 0:
                finish = "pad_canvas"  # dg's rule, not generate()'s: see the module docstring
                break
        yield RunEnd(finish, *run.forwards, run.elapsed())


def _seed_canvases(draft: Draft | None, canvas_length: int, device) -> list:
    """[(seed canvas (1, C), its pinned mask (1, C) or None)] per canvas the draft seeds, checked, on `device`."""
    if draft is None:
        return []
    init_canvas, pinned = draft.init_canvas, draft.pinned
    if init_canvas.ndim != 2 or init_canvas.shape[0] != 1 or init_canvas.shape[1] % canvas_length:
        raise ValueError(f"init_canvas must be (1, n * {canvas_length}), got {tuple(init_canvas.shape)}")
    if pinned is not None and (pinned.shape != init_canvas.shape or pinned.dtype != torch.bool):
        raise ValueError(f"pinned must be a bool tensor of init_canvas's shape {tuple(init_canvas.shape)}, "
                         f"got {pinned.dtype} {tuple(pinned.shape)}")
    canvases = init_canvas.to(device).split(canvas_length, dim=1)
    masks = pinned.to(device).split(canvas_length, dim=1) if pinned is not None else [None] * len(canvases)
    return list(zip(canvases, masks))


def generate_diffusion(model, inputs: dict, config: SamplerConfig | None = None, **kwargs) -> Trace:
    """Run the sampler to the end and return the whole trace."""
    return Trace.collect(stream_diffusion(model, inputs, config, **kwargs))
