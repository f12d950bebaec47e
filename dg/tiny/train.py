"""Supervised fine-tuning of the tiny DiffusionGemma from scratch (report §4 SFT recipe, CPU-sized).

Per example: one noise level t ~ U(eps, 1); every canvas token replaced by a uniform random token with
probability t; unweighted cross-entropy over all canvas tokens (answer, `<turn|>`, pad fill), mean
per example. Plus the encoder's AR loss (next-token CE over the clean model turn, weight 1.0) that
keeps AR mode alive, and self-conditioning with p = 0.5. One encoder pass over prompt + clean reply
feeds both losses; the decoder's `decoder_attention_mask` hides the clean tokens of its own canvas
and later ones (the leak pitfall of the report's recipe).

    python -m dg.tiny.train --out runs/tiny [--minutes 70] [--steps 4000] [--seed 0] [--resume]
    python -m dg.tiny.train --out runs/tiny2 --init assets/diffusiongemma-tiny --minutes 60   # continue
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm import tqdm
from transformers import AutoProcessor, DiffusionGemmaForBlockDiffusion

from dg.ar import next_token_logits
from dg.loading import check_vocab
from dg.noise import corrupt, sample_t
from dg.tiny import skills
from dg.tiny.data import IGNORE_INDEX, Batch, encode_example, make_batch
from dg.tiny.model import TinyModelConfig, build_model
from dg.tiny.tokenizer import TokenizerConfig, build_processor

# Harder skills get a larger share: arithmetic (carries, and two modes: thinking on and off) three,
# sudoku (search), picture (vision from scratch) and json (many copied values) two, story one.
SKILL_MIX = ("sudoku", "arithmetic", "picture", "json", "story", "arithmetic", "sudoku", "picture", "json",
             "arithmetic")
DATA_SEED_BASE = 1000  # training streams use seeds >= 1000; evaluation uses small seeds
CHECKPOINT = "checkpoint.pt"


@dataclass
class TrainConfig:
    """Single source of the training defaults."""

    out: str = "runs/tiny"
    steps: int = 4000
    minutes: float | None = None  # wall-clock cap; the run checkpoints and stops when it is reached
    seed: int = 0
    batch_size: int = 16
    bucket: int = 8  # steps whose examples are pooled and sorted by length into batches (1: none)
    lr: float = 2e-3
    min_lr_ratio: float = 0.05
    warmup_steps: int = 50
    weight_decay: float = 1e-4
    betas: tuple[float, float] = (0.95, 0.99)
    clip: float = 1.0
    eps: float = 1e-3  # t ~ U(eps, 1)
    # with this probability an example's t is drawn from U(eps, low_noise_max) instead: more of the last
    # refinement steps (most of the canvas clean, a few positions to fix from their neighbours), where a
    # trace's carry and sum tokens must follow from the digits around them
    low_noise_p: float = 0.0
    low_noise_max: float = 0.3
    # share of replaced tokens that take another token of the same canvas instead of a uniform one: a
    # digit swapped for a digit, a name for a name. The sampler renoises with the model's own samples,
    # which look plausible; uniform replacements almost never do, so without this the decoder learns to
    # keep any plausible token (a wrong sum digit stays wrong) and to fix only the implausible ones
    plausible_p: float = 0.0
    # share of self-conditioned examples whose replaced tokens are then refilled with samples from the
    # first pass's (temperature-scaled) distribution, and the second pass denoises that canvas: the
    # sampler's own renoising, one step of it. A wrong but likely token is what the decoder meets at
    # inference; this is where it learns to check one against the digits around it
    self_renoise_p: float = 0.0
    # share of self-conditioned examples whose first pass sees a noisier canvas than the second (each
    # token replaced again with probability q ~ U(0, 1)). The sampler's self-conditioning comes from its
    # previous step, which saw more noise; a first pass on the same canvas is as good as the second, so
    # without this the decoder learns to trust it and keeps an early guess (a sum digit) step after step
    sc_noisier_p: float = 0.0
    self_conditioning_p: float = 0.5
    ar_weight: float = 1.0
    checkpoint_minutes: float = 5.0
    threads: int = 1  # two OpenMP threads collapse whenever another process takes a core
    init: str | None = None  # continue from these saved weights (and their processor), fresh optimizer
    mix: tuple[str, ...] = SKILL_MIX  # round-robin over this tuple: a skill's share is its count in it
    add_terms: tuple[int, ...] = skills.ADD_TERMS  # counts of terms an addition draws from
    model: TinyModelConfig = field(default_factory=TinyModelConfig)

    def __post_init__(self):
        if self.steps <= 0:
            raise ValueError(f"steps must be > 0, got {self.steps}")
        if self.minutes is not None and self.minutes <= 0:
            raise ValueError(f"minutes must be > 0, got {self.minutes}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {self.batch_size}")
        if self.bucket <= 0:
            raise ValueError(f"bucket must be > 0, got {self.bucket}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if self.warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {self.warmup_steps}")
        if not 0 < self.eps < 1:
            raise ValueError(f"eps must be in (0, 1), got {self.eps}")
        if not 0 <= self.low_noise_p <= 1:
            raise ValueError(f"low_noise_p must be in [0, 1], got {self.low_noise_p}")
        if not self.eps < self.low_noise_max <= 1:
            raise ValueError(f"low_noise_max must be in (eps, 1], got {self.low_noise_max}")
        if not 0 <= self.plausible_p <= 1:
            raise ValueError(f"plausible_p must be in [0, 1], got {self.plausible_p}")
        if not 0 <= self.self_renoise_p <= 1:
            raise ValueError(f"self_renoise_p must be in [0, 1], got {self.self_renoise_p}")
        if not 0 <= self.sc_noisier_p <= 1:
            raise ValueError(f"sc_noisier_p must be in [0, 1], got {self.sc_noisier_p}")
        if not 0 <= self.self_conditioning_p <= 1:
            raise ValueError(f"self_conditioning_p must be in [0, 1], got {self.self_conditioning_p}")
        if self.checkpoint_minutes <= 0:
            raise ValueError(f"checkpoint_minutes must be > 0, got {self.checkpoint_minutes}")
        if self.threads <= 0:
            raise ValueError(f"threads must be > 0, got {self.threads}")
        skills.check_skills(self.mix, "mix")
        self.add_terms = skills.check_add_terms(self.add_terms)
        budget = self.model.canvas_length * math.ceil(skills.longest_addition_reply(max(self.add_terms))
                                                      / self.model.canvas_length)
        if self.model.max_new_tokens < budget:
            self.model = dataclasses.replace(self.model, max_new_tokens=budget)


def parse_mix(text: str) -> tuple[str, ...]:
    """'arithmetic=5,picture=4,sudoku=2,json=1,story=1' → the round-robin tuple (shares by count)."""
    mix = []
    for part in text.split(","):
        name, _, count = part.partition("=")
        name = name.strip()
        if name not in skills.SKILLS or not count.strip().isdigit() or int(count) <= 0:
            raise argparse.ArgumentTypeError(f"expected skill=count with a skill of {skills.SKILLS}, got {part!r}")
        mix.append((name, int(count)))
    # interleave, so every stretch of the stream has each skill in proportion
    slots = sorted((k / n, i, name) for i, (name, n) in enumerate(mix) for k in range(n))
    return tuple(name for *_, name in slots)


def lr_at(step: int, cfg: TrainConfig, elapsed_s: float = 0.0) -> float:
    """Linear warmup, then cosine decay to min_lr_ratio * lr at the end of the budget.

    The budget is `cfg.steps`, or with `cfg.minutes` whichever of steps and wall clock runs out
    first (so a time-capped run still anneals; only step-budgeted runs are bit-reproducible).
    """
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    if cfg.minutes is not None:
        progress = max(progress, elapsed_s / (cfg.minutes * 60))
    progress = min(1.0, progress)
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def step_seed(cfg: TrainConfig, step: int) -> int:
    """Every random draw of a step derives from (seed, step), so a resumed run replays it exactly."""
    return DATA_SEED_BASE + cfg.seed * 10_000_019 + step


def examples_for_step(cfg: TrainConfig, step: int) -> list[skills.Example]:
    """The step's examples; the round-robin over `cfg.mix` runs on across steps, so the stream keeps the mix."""
    start = step * cfg.batch_size % len(cfg.mix)
    return skills.sample_examples(step_seed(cfg, step), cfg.batch_size, cfg.mix[start:] + cfg.mix[:start],
                                  cfg.add_terms)


def pool_batches(cfg: TrainConfig, pool: int, processor) -> list[Batch]:
    """The batches of steps pool·bucket … (pool + 1)·bucket − 1: those steps' examples together, sorted by
    length (prompt + reply) and cut into batches, in an order drawn from the pool's seed.

    The encoder pass pads every sequence of a batch to the longest, and lengths run from ~40 tokens (a
    sudoku) to ~130 (a picture's soft tokens, a 5-digit trace): batches of like lengths carry less pad.
    The stream's examples and mix are unchanged; only which examples share a batch is.
    """
    first = pool * cfg.bucket
    encoded = [encode_example(e, processor) for step in range(first, first + cfg.bucket)
               for e in examples_for_step(cfg, step)]
    order = sorted(range(len(encoded)), key=lambda i: (len(encoded[i].prompt_ids) + len(encoded[i].reply_ids), i))
    chunks = [order[i : i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
    random.Random(step_seed(cfg, first)).shuffle(chunks)  # long and short batches in no fixed order
    return [make_batch([encoded[i] for i in chunk], cfg.model.canvas_length, processor.tokenizer,
                       random.Random(step_seed(cfg, first + n)))
            for n, chunk in enumerate(chunks)]


class BatchStream:
    """batch_for_step with its pool kept: each pool's examples are generated and encoded once."""

    def __init__(self, cfg: TrainConfig, processor):
        self.cfg, self.processor = cfg, processor
        self._pool: tuple[int, list[Batch]] = (-1, [])

    def __call__(self, step: int) -> Batch:
        pool = step // self.cfg.bucket
        if self._pool[0] != pool:
            self._pool = (pool, pool_batches(self.cfg, pool, self.processor))
        return self._pool[1][step % self.cfg.bucket]


def batch_for_step(cfg: TrainConfig, step: int, processor) -> Batch:
    """Step `step`'s batch (see pool_batches); a resumed run gets the same one."""
    return pool_batches(cfg, step // cfg.bucket, processor)[step % cfg.bucket]


@torch.no_grad()
def self_conditioning_logits(model, decoder_kwargs: dict, use_sc: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """First pass without self-conditioning (exactly the sampler's step one), only for examples using SC.

    Inference feeds temperature-scaled logits; high noise ~ early steps ~ temperature near t_max.
    Examples without SC get zeros here and `self_conditioning_mask=False`, which zeroes the signal.
    """
    rows = use_sc.nonzero().squeeze(1)
    cache = copy.copy(decoder_kwargs["past_key_values"])  # a view of the rows; the full cache stays intact
    cache.layers = [copy.copy(layer) for layer in cache.layers]
    cache.batch_select_indices(rows)
    subset = {k: v[rows] for k, v in decoder_kwargs.items() if k != "past_key_values"}
    first = model(**subset, past_key_values=cache).logits  # (S, C, V)
    generation = model.generation_config
    temperature = generation.t_min + (generation.t_max - generation.t_min) * t[rows]
    out = torch.zeros(*decoder_kwargs["decoder_input_ids"].shape, first.shape[-1])
    out[rows] = first / temperature[:, None, None]
    return out


def self_renoise(noisy: torch.Tensor, replaced: torch.Tensor, scaled_logits: torch.Tensor, rows: torch.Tensor,
                 gen: torch.Generator) -> torch.Tensor:
    """`noisy` (B, C) with the replaced positions of `rows` (B,) refilled with tokens drawn from
    softmax(scaled_logits): the canvas the sampler's next step would see there. Only those positions
    are drawn (a draw over the whole vocabulary at every position was 4 % of a training step)."""
    where = replaced & rows[:, None]
    if not bool(where.any()):
        return noisy
    probs = torch.softmax(scaled_logits[where].float(), dim=-1)  # (N, V)
    out = noisy.clone()
    out[where] = torch.multinomial(probs, 1, generator=gen).squeeze(1)
    return out


def encoder_pass(model, batch: Batch):
    """Causal encoder pass over prompt + clean reply: (its output with the KV cache, the AR loss)."""
    enc = model.model.encoder(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        pixel_values=batch.pixel_values,
        image_position_ids=batch.image_position_ids,
        mm_token_type_ids=batch.mm_token_type_ids,
        use_cache=True,
    )
    supervised = batch.ar_labels != IGNORE_INDEX  # the model turn only
    ar_logits = next_token_logits(model, enc.last_hidden_state[supervised])  # (N, V)
    return enc, F.cross_entropy(ar_logits, batch.ar_labels[supervised])


def decoder_kwargs(batch: Batch, enc, noisy: torch.Tensor) -> dict:
    """The decoder's inputs for `noisy` canvases read against the (leak-free) encoder cache."""
    return dict(decoder_input_ids=noisy, past_key_values=enc.past_key_values,
                decoder_attention_mask=batch.decoder_attention_mask, decoder_position_ids=batch.decoder_position_ids)


def canvas_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Unweighted CE over every canvas position (answer, `<turn|>`, pad fill), mean per example."""
    per_token = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), reduction="none")
    return per_token.view_as(targets.float()).mean(dim=1).mean()


def noise_levels(batch: int, cfg: TrainConfig, gen: torch.Generator) -> torch.Tensor:
    """t per example: U(eps, 1), or with probability low_noise_p U(eps, low_noise_max)."""
    t = sample_t(batch, cfg.eps, gen)
    if cfg.low_noise_p > 0:
        low = torch.rand(batch, generator=gen) < cfg.low_noise_p
        t = torch.where(low, cfg.eps + (t - cfg.eps) * (cfg.low_noise_max - cfg.eps) / (1 - cfg.eps), t)
    return t


def plausible_swaps(targets: torch.Tensor, noisy: torch.Tensor, replaced: torch.Tensor, p: float,
                    gen: torch.Generator) -> torch.Tensor:
    """`noisy` with a share `p` of its replaced positions set to the token at a random position of the same
    row of `targets` (B, C): replacements that look like the canvas's own tokens."""
    rows, length = targets.shape
    source = torch.randint(0, length, (rows, length), generator=gen)
    swap = replaced & (torch.rand(rows, length, generator=gen) < p)
    return torch.where(swap, targets.gather(1, source), noisy)


def losses(model, batch: Batch, cfg: TrainConfig, gen: torch.Generator) -> dict[str, torch.Tensor]:
    """AR loss on the encoder pass, diffusion loss on the (self-conditioned) decoder pass."""
    enc, ar_loss = encoder_pass(model, batch)
    vocab = model.config.text_config.vocab_size
    t = noise_levels(batch.canvas_targets.shape[0], cfg, gen)
    noisy, replaced = corrupt(batch.canvas_targets, vocab, t, gen)
    if cfg.plausible_p > 0:
        noisy = plausible_swaps(batch.canvas_targets, noisy, replaced, cfg.plausible_p, gen)
    kwargs = decoder_kwargs(batch, enc, noisy)
    use_sc = torch.rand(noisy.shape[0], generator=gen) < cfg.self_conditioning_p
    sc_logits = None
    if use_sc.any():
        first, t_first = kwargs, t
        if cfg.sc_noisier_p > 0:
            again = (use_sc & (torch.rand(len(t), generator=gen) < cfg.sc_noisier_p)) * torch.rand(len(t), generator=gen)
            first = {**kwargs, "decoder_input_ids": corrupt(noisy, vocab, again, gen)[0]}
            t_first = t + (1 - t) * again
        sc_logits = self_conditioning_logits(model, first, use_sc, t_first)
        if cfg.self_renoise_p > 0:
            kwargs["decoder_input_ids"] = self_renoise(noisy, replaced, sc_logits,
                                                       use_sc & (torch.rand(len(t), generator=gen) < cfg.self_renoise_p),
                                                       gen)
    logits = model(**kwargs, self_conditioning_logits=sc_logits, self_conditioning_mask=use_sc).logits
    diffusion_loss = canvas_loss(logits, batch.canvas_targets)
    return {"loss": diffusion_loss + cfg.ar_weight * ar_loss, "diffusion": diffusion_loss, "ar": ar_loss}


def optimizer_step(model, optimizer: torch.optim.Optimizer, loss: torch.Tensor, clip: float) -> None:
    """Backward `loss`, clip the gradient norm to `clip`, and step."""
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
    optimizer.step()


def make_optimizer(model, cfg: TrainConfig) -> torch.optim.Optimizer:
    """Adam(0.95, 0.99) with decoupled weight decay on matrices only (norms and scales excluded)."""
    params = {id(p): p for p in model.parameters() if p.requires_grad}.values()
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas)


def load_or_build_processor(out: Path, init: str | None = None):
    """The run's processor: the one of `init` when continuing, else trained once on the skills corpus."""
    path = out / "processor"
    if not path.exists() and init is not None:
        AutoProcessor.from_pretrained(init).save_pretrained(path)
    elif not path.exists():
        tok_cfg = TokenizerConfig()
        build_processor(skills.corpus(tok_cfg.corpus_seed, tok_cfg.corpus_size), tok_cfg).save_pretrained(path)
    return AutoProcessor.from_pretrained(path)


def save_checkpoint(out: Path, model, optimizer, processor, step: int, elapsed: float, cfg: TrainConfig) -> None:
    """A resumable checkpoint plus a `save_pretrained` export of the weights so far."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
             "elapsed": elapsed, "config": dataclasses.asdict(cfg), "rng": torch.get_rng_state()}
    torch.save(state, out / (CHECKPOINT + ".tmp"))
    (out / (CHECKPOINT + ".tmp")).replace(out / CHECKPOINT)
    model.save_pretrained(out / "model")
    processor.save_pretrained(out / "model")


def train(cfg: TrainConfig, resume: bool = False) -> dict:
    """Run (or resume) training; returns the last step's losses and the wall time."""
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    processor = load_or_build_processor(out, cfg.init)
    model = build_model(cfg.model, processor, seed=cfg.seed)
    if cfg.init is not None:
        model.load_state_dict(DiffusionGemmaForBlockDiffusion.from_pretrained(cfg.init).state_dict())
    check_vocab(model, processor, exact=True)
    optimizer = make_optimizer(model, cfg)
    start, elapsed = 0, 0.0
    if resume and (out / CHECKPOINT).exists():
        state = torch.load(out / CHECKPOINT, weights_only=True)  # tensors, numbers, strings: nothing to execute
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["rng"])
        start, elapsed = state["step"], state["elapsed"]
    model.train()
    t0, last_ckpt, metrics = time.time() - elapsed, time.time(), {}
    batches = BatchStream(cfg, processor)
    bar = tqdm(range(start, cfg.steps), initial=start, total=cfg.steps, desc="train", mininterval=10)
    for step in bar:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, cfg, time.time() - t0)
        gen = torch.Generator().manual_seed(step_seed(cfg, step))
        parts = losses(model, batches(step), cfg, gen)
        optimizer_step(model, optimizer, parts["loss"], cfg.clip)
        metrics = {k: round(v.item(), 4) for k, v in parts.items()}
        bar.set_postfix(metrics, refresh=False)
        done = step + 1
        out_of_time = cfg.minutes is not None and time.time() - t0 >= cfg.minutes * 60
        if done == cfg.steps or out_of_time or time.time() - last_ckpt >= cfg.checkpoint_minutes * 60:
            save_checkpoint(out, model, optimizer, processor, done, time.time() - t0, cfg)
            last_ckpt = time.time()
            tqdm.write(f"step {done} {metrics} {(time.time() - t0) / 60:.1f} min")
        if out_of_time:
            break
    return {**metrics, "minutes": (time.time() - t0) / 60}


RECIPE_KNOBS = ("low_noise_p", "low_noise_max", "plausible_p", "self_renoise_p", "sc_noisier_p")


def add_recipe_arguments(parser: argparse.ArgumentParser, defaults: TrainConfig) -> None:
    """The corruption knobs of the SFT recipe (`RECIPE_KNOBS`), shared by training and distillation."""
    parser.add_argument("--low-noise-p", type=float, default=defaults.low_noise_p,
                        help="share of examples whose noise level is drawn from U(eps, --low-noise-max)")
    parser.add_argument("--low-noise-max", type=float, default=defaults.low_noise_max)
    parser.add_argument("--plausible-p", type=float, default=defaults.plausible_p,
                        help="share of replaced tokens that take another token of the same canvas")
    parser.add_argument("--self-renoise-p", type=float, default=defaults.self_renoise_p,
                        help="share of self-conditioned examples renoised with samples of their first pass")
    parser.add_argument("--sc-noisier-p", type=float, default=defaults.sc_noisier_p,
                        help="share of self-conditioned examples whose first pass sees a noisier canvas")


def recipe_kwargs(args: argparse.Namespace) -> dict:
    """`RECIPE_KNOBS` from parsed `add_recipe_arguments` options, as TrainConfig keyword arguments."""
    return {knob: getattr(args, knob) for knob in RECIPE_KNOBS}


def main() -> None:
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=defaults.out)
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--bucket", type=int, default=defaults.bucket,
                        help="steps whose examples are pooled and sorted by length into batches (1: none)")
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--init", default=None, help="continue from this saved model folder (fresh optimizer)")
    parser.add_argument("--mix", type=parse_mix, default=defaults.mix,
                        help="skill shares, e.g. arithmetic=5,picture=4,sudoku=2,json=1,story=1 (default: "
                             + ",".join(f"{s}={defaults.mix.count(s)}" for s in dict.fromkeys(defaults.mix)) + ")")
    parser.add_argument("--add-terms", type=skills.parse_add_terms, default=defaults.add_terms,
                        help="counts of terms an addition draws from, e.g. 2,3 (default: "
                             + ",".join(map(str, defaults.add_terms)) + ")")
    add_recipe_arguments(parser, defaults)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    cfg = TrainConfig(out=args.out, steps=args.steps, minutes=args.minutes, seed=args.seed,
                      batch_size=args.batch_size, bucket=args.bucket, lr=args.lr, threads=args.threads, init=args.init, mix=args.mix,
                      add_terms=args.add_terms, **recipe_kwargs(args))
    print(train(cfg, resume=args.resume))


if __name__ == "__main__":
    main()
