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
from collections.abc import Iterator
from dataclasses import dataclass, field

import torch

from dg.ar import next_token_logits
from dg.config import SamplerConfig, whole_canvases
from dg.passes import eos_token_ids, pad_token_id, split_inputs, token_record, top_k
from dg.paths import Run, open_passes
from dg.sampler import denoise_step, step_record
from dg.trace import RoundRecord, RunEnd, RunStart, Trace

DRAFT_STEPS = 1  # denoising steps per round: verifying after every step measured fastest (model card)


@dataclass
class Hybrid:
    """One hybrid run's state: its passes (`run`), the sampler knobs its drafts use, the tokens AR has
    accepted so far, and the rounds made."""

    run: Run
    config: SamplerConfig
    draft_steps: int
    eos: set
    ids: list = field(default_factory=list)
    rounds: int = 0

    @property
    def done(self) -> bool:
        return len(self.ids) >= self.config.max_new_tokens or (bool(self.ids) and self.ids[-1] in self.eos)

    def add(self, token: int, logits: torch.Tensor, forwards: tuple):
        """Accept AR's `token` (its `logits` (V,)): its TokenRecord, stopped-before at `forwards`."""
        self.ids.append(token)
        return token_record(len(self.ids) - 1, token, logits, self.run.elapsed(), forwards)


def agreeing(draft: torch.Tensor, ar_logits: torch.Tensor, held: int) -> int:
    """How many draft tokens from canvas position `held` on equal greedy AR's; `ar_logits` (C, V) row i is
    AR's next-token logits for position i + 1 given the draft up to position i."""
    agree = (draft[held:] == ar_logits[held - 1:-1].argmax(dim=-1)).long()
    return int(agree.cumprod(dim=0).sum())


@torch.no_grad()
def stream_hybrid(model, inputs: dict, config: SamplerConfig | None = None, *, cancel: threading.Event | None = None,
                  draft=None, path: str = "eager", draft_steps: int = DRAFT_STEPS) -> Iterator:
    """Yield RunStart; per round the draft's StepRecords, a RoundRecord and a TokenRecord per token it
    verified (AR's own entropy and top-k); then RunEnd. The tokens are greedy AR's. A draft seeds a
    diffusion canvas and has no meaning here; `cancel` stops the run before the next record."""
    if draft is not None:
        raise ValueError("a draft seeds the diffusion canvas; it does not apply to hybrid")
    if draft_steps < 1:
        raise ValueError(f"draft_steps must be >= 1, got {draft_steps}")
    config = config or SamplerConfig.from_generation_config(model.generation_config)
    input_ids, extra = split_inputs(inputs)
    base, length = input_ids.shape[1], model.config.canvas_length
    eos_ids = eos_token_ids(model)
    n_canvases = whole_canvases(config.max_new_tokens, length)  # canvas k is drafted only while fewer than k·C + C tokens are
    with open_passes(model, path, base + n_canvases * length, rollback=True) as passes:
        h = Hybrid(Run(model, passes, cancel), config, draft_steps, set(eos_ids))
        yield RunStart("hybrid", base, length, model.config.text_config.vocab_size, config.max_new_tokens,
                       {**config.to_dict(), "draft_steps": draft_steps}, eos_ids, pad_token_id(model))
        for record in _records(h, input_ids, extra):
            if h.run.cancelled and record.forwards is not None:
                # a stop seen between two records ends the run before this one, counting the passes whose
                # records it delivered: what a run stopped in another process reports (`RunEnd.before`)
                yield RunEnd.before(record, h.run.elapsed())
                return
            yield record
        if h.run.cancelled:
            yield RunEnd("cancelled", *h.run.forwards, h.run.elapsed())
            return
        finish = "eos" if h.ids[-1] in h.eos else "max_new_tokens"
        yield RunEnd(finish, *h.run.forwards, h.run.elapsed())


def _records(h: Hybrid, input_ids: torch.Tensor, extra: dict):
    """AR's first token from the prefill, then the canvases' rounds until the run is done or stopped."""
    hidden = h.run.prefill(input_ids, extra)
    h.run.crop(input_ids.shape[1])  # trims the sliding-window layers back to their window
    next_logits = next_token_logits(h.run.model, hidden[:, -1])[0]  # (V,) AR's first token
    yield h.add(int(next_logits.argmax()), next_logits, h.run.forwards)
    k = 0
    while not h.done and not h.run.cancelled:
        yield from _draft_canvas(h, k)
        k += 1


def _draft_canvas(h: Hybrid, k: int):
    """Rounds on canvas k until it is verified whole (and the next canvas's first token is AR's), or EOS, the
    budget or the run's stop ends the run. The canvas's first token is always verified already (the previous
    pass predicted it)."""
    run, length = h.run, h.run.model.config.canvas_length
    device = run.passes.device
    done_before = k * length  # output positions before this canvas
    canvas = torch.randint(0, run.model.config.text_config.vocab_size, (1, length), device=device)
    sc_logits, step = None, 0
    embed_dtype = run.model.model.decoder.embed_tokens.weight.dtype
    while not h.done and len(h.ids) <= done_before + length - 1:
        if run.cancelled:
            return
        held = len(h.ids) - done_before
        pinned = torch.arange(length, device=device)[None] < held
        canvas[0, :held] = torch.tensor(h.ids[done_before:], device=device)
        round_start = run.elapsed()
        for _ in range(h.draft_steps):
            step += 1
            d = denoise_step(run, h.config, k, step, canvas, sc_logits, pinned)
            yield step_record(run, d)
            s = d.sample
            sc_logits, draft, canvas = s.scaled_logits.to(embed_dtype), s.argmax, s.next_canvas.clone()
        yield from _verify_round(h, k, draft, held, round_start)


def _verify_round(h: Hybrid, k: int, draft: torch.Tensor, held: int, round_start: float):
    """One causal encoder pass over the draft: keep the run AR agrees with, add AR's token after it. The
    cache keeps the canvas only once it is whole; until then it is cropped back to the canvas start.

    A stop seen before the round's record ends the run before its verify pass; one seen before a token it
    verified, after that pass (the round was delivered: its pass ran)."""
    run, length = h.run, draft.shape[1]
    start = run.cached
    before = run.forwards
    hidden = run.encode(draft)
    h.rounds += 1
    ar_logits = next_token_logits(run.model, hidden)[0]  # (C, V): row i predicts position i + 1
    accepted = agreeing(draft[0], ar_logits, held)
    first_mismatch = held + accepted
    after = run.forwards
    records = [h.add(int(token), ar_logits[held - 1 + i], after)
               for i, token in enumerate(draft[0, held:first_mismatch].tolist()) if not h.done]
    bonus = None
    if not h.done:
        # AR's token at the first disagreement, or, with the whole canvas agreed, the next canvas's first token
        bonus = int(ar_logits[first_mismatch - 1].argmax())
        records.append(h.add(bonus, ar_logits[first_mismatch - 1], after))
    probs, ids = top_k(ar_logits[first_mismatch - 1])
    yield RoundRecord(h.rounds, k, held, draft[0].cpu().numpy(), accepted, bonus, ids.cpu().numpy(),
                      probs.cpu().numpy(), round_start, run.elapsed(), before)
    yield from records
    if first_mismatch == length - 1 and not h.done:  # the bonus ends the canvas: AR's next token after it
        run.crop(start + length - 1)
        forwards = run.forwards
        hidden = run.encode(torch.tensor([[bonus]], device=draft.device))
        logits = next_token_logits(run.model, hidden[:, -1])[0]
        yield h.add(int(logits.argmax()), logits, forwards)
    run.crop(start + length if first_mismatch >= length - 1 else start)


def generate_hybrid(model, inputs: dict, config: SamplerConfig | None = None, **kwargs) -> Trace:
    """Run hybrid decoding to the end and return the whole trace."""
    return Trace.collect(stream_hybrid(model, inputs, config, **kwargs))
