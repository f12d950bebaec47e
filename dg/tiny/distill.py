"""Sampler distillation with a reward (report §5, SD·RL), at tiny scale.

1. Collect: run the entropy-bound sampler (the checkpoint's own generation config) on training prompts
   (seeds disjoint from SFT's stream and from evaluation) and keep the trajectories whose answer the
   skill's scorer accepts: the reward. With `correct`, a rejected trajectory is kept too, with the
   reference reply as its target: the decoder sees its own mistaken states (a carry guessed early, the
   sums made to agree with it) and learns the right canvas from them, which uniform corruption never
   shows it.
2. Train: the decoder learns to predict each kept trajectory's committed canvas from every noisy
   canvas of that trajectory, with the self-conditioning it saw at that step (the previous step's
   τ-scaled distribution, rebuilt from the step record's top-k and renormalised over it; step one has
   none, as in the sampler). It learns to be confident earlier on its own states, so more positions
   pass the entropy bound per step. Uniform-corruption SFT batches stay in the mix (`sft_share`) and
   the encoder's AR loss stays on, so quality and AR mode do not drift.

    python -m dg.tiny.distill --init runs/tiny/model --out runs/tiny-sd --prompts 1500 --minutes 20
"""

from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AutoProcessor, DiffusionGemmaForBlockDiffusion

from dg.config import SamplerConfig
from dg.loading import check_vocab
from dg.prompts import build_inputs, decode_reply
from dg.sampler import generate_diffusion
from dg.tiny import skills
from dg.tiny.data import Encoded, encode_example, make_batch, num_canvases
from dg.tiny.train import (SKILL_MIX, BatchStream, TrainConfig, canvas_loss, decoder_kwargs, encoder_pass,
                           add_recipe_arguments, lr_at, make_optimizer, losses, optimizer_step, parse_mix,
                           recipe_kwargs)

DISTILL_SEED_BASE = 500_000_000  # prompts for trajectories: far from SFT's stream and from eval's seeds
SC_FLOOR = -1e4  # logit of tokens outside a record's top-k: softmax gives them ~0 mass


@dataclass
class DistillConfig:
    """Single source of the distillation defaults."""

    init: str = "runs/tiny/model"
    out: str = "runs/tiny-sd"
    prompts: int = 1500
    minutes: float = 20.0
    seed: int = 0
    batch_size: int = 16
    lr: float = 3e-4
    sft_share: float = 0.25  # share of steps that are plain uniform-corruption SFT batches
    correct: bool = False  # also keep rejected trajectories, with the reference reply as the target
    mix: tuple[str, ...] = SKILL_MIX  # the collected prompts' skills (round-robin, as in training)
    add_terms: tuple[int, ...] = skills.ADD_TERMS  # counts of terms an addition draws from (prompts, SFT)
    threads: int = 1
    train: TrainConfig = field(default_factory=TrainConfig)  # the SFT batches' mix and recipe knobs

    def __post_init__(self):
        if self.prompts <= 0:
            raise ValueError(f"prompts must be > 0, got {self.prompts}")
        if self.minutes <= 0:
            raise ValueError(f"minutes must be > 0, got {self.minutes}")
        if self.batch_size <= 0:
            raise ValueError(f"batch_size must be > 0, got {self.batch_size}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.sft_share < 1:
            raise ValueError(f"sft_share must be in [0, 1), got {self.sft_share}")
        skills.check_skills(self.mix, "mix")
        self.add_terms = skills.check_add_terms(self.add_terms)


@dataclass
class Row:
    """One decoder training row: a noisy canvas of a kept trajectory and what it must become."""

    encoded: Encoded  # prompt ids (+ image) and the trajectory's own committed reply; canvas_index set
    noisy: list[int]  # (C,) the canvas the decoder was fed at this step
    sc_ids: object | None  # (C, k) previous step's top-k tokens; None on a canvas's first step
    sc_probs: object | None  # (C, k) their probabilities under softmax(logits / τ)


def trajectory_rows(trace, inputs: dict, reply: list[int] | None = None) -> list[Row]:
    """Every step of every canvas of `trace` as a row; the targets are its committed canvases, or those
    of `reply` (the reference) when given."""
    canvases = len(trace.canvases)
    if reply is None:
        reply = trace.token_ids
    else:  # canvases past the reference's last one have no context to learn from
        canvases = min(canvases, num_canvases(len(reply), trace.start.canvas_length))
    pixel = inputs.get("pixel_values")
    rows = []
    for k in range(canvases):
        previous = None
        for record in trace.steps_of(k):
            encoded = Encoded(inputs["input_ids"][0].tolist(), reply, pixel, inputs.get("image_position_ids"),
                              canvas_index=k)
            sc = (None, None) if previous is None else (previous.topk_ids, previous.topk_probs)
            rows.append(Row(encoded, record.noisy.tolist(), *sc))
            previous = record
    return rows


def prompts(cfg: DistillConfig) -> list[skills.Example]:
    """The training prompts whose trajectories are collected (deterministic in `cfg.seed`)."""
    return skills.sample_examples(DISTILL_SEED_BASE + cfg.seed, cfg.prompts, cfg.mix, cfg.add_terms)


def sft_config(cfg: DistillConfig) -> TrainConfig:
    """The training config of the distillation steps and of its uniform-corruption SFT batches: `cfg.train`'s
    mix and corruption knobs, the distillation's batch size, lr, minutes and terms."""
    return replace(cfg.train, batch_size=cfg.batch_size, lr=cfg.lr, minutes=cfg.minutes, steps=10**9,
                   warmup_steps=20, seed=cfg.seed + 7, add_terms=cfg.add_terms)


@torch.no_grad()
def collect(model, processor, cfg: DistillConfig, progress: bool = True) -> tuple[list[Row], dict]:
    """Run the sampler on `cfg.prompts` training prompts; rows of the trajectories the scorer accepts."""
    model.eval()
    config = SamplerConfig.from_generation_config(model.generation_config).replace(backend="torch")
    examples = prompts(cfg)
    seeds = random.Random(cfg.seed)
    rows, kept, tpf = [], {}, {}
    for ex in tqdm(examples, desc="collect", mininterval=10, disable=not progress):
        inputs = build_inputs(processor, ex.prompt, images=ex.image, thinking=bool(ex.thought))
        torch.manual_seed(seeds.randrange(2**31))
        trace = generate_diffusion(model, inputs, config)
        ok = skills.score(ex, decode_reply(processor.tokenizer, trace.token_ids).answer)
        kept.setdefault(ex.skill, []).append(ok)
        tpf.setdefault(ex.skill, []).append(trace.metrics()["tpf"])
        if ok:
            rows.extend(trajectory_rows(trace, inputs))
        elif cfg.correct:
            rows.extend(trajectory_rows(trace, inputs, encode_example(ex, processor).reply_ids))
    stats = {s: {"n": len(v), "kept": sum(v) / len(v), "tpf": sum(tpf[s]) / len(tpf[s])} for s, v in kept.items()}
    return rows, stats


def self_conditioning(rows: list[Row], canvas_length: int, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(logits (B, C, V), mask (B,)): log top-k probabilities, SC_FLOOR elsewhere; mask False on step one."""
    logits = torch.full((len(rows), canvas_length, vocab_size), SC_FLOOR)
    mask = torch.zeros(len(rows), dtype=torch.bool)
    for i, row in enumerate(rows):
        if row.sc_ids is None:
            continue
        ids = torch.as_tensor(row.sc_ids, dtype=torch.long)  # (C, k)
        probs = torch.as_tensor(row.sc_probs, dtype=torch.float32).clamp_min(1e-12)
        logits[i].scatter_(1, ids, probs.log())
        mask[i] = True
    return logits, mask


def distill_losses(model, rows: list[Row], processor, cfg: DistillConfig) -> dict[str, torch.Tensor]:
    """Decoder: committed canvas from the trajectory's own noisy canvas (+ its SC); encoder: AR loss."""
    canvas_length = model.config.canvas_length
    batch = make_batch([r.encoded for r in rows], canvas_length, processor.tokenizer, random.Random(0))
    enc, ar_loss = encoder_pass(model, batch)
    noisy = torch.tensor([r.noisy for r in rows])  # (B, C)
    sc_logits, sc_mask = self_conditioning(rows, canvas_length, model.config.text_config.vocab_size)
    logits = model(**decoder_kwargs(batch, enc, noisy), self_conditioning_logits=sc_logits,
                   self_conditioning_mask=sc_mask).logits
    diffusion_loss = canvas_loss(logits, batch.canvas_targets)
    return {"loss": diffusion_loss + cfg.train.ar_weight * ar_loss, "diffusion": diffusion_loss, "ar": ar_loss}


def distill(cfg: DistillConfig) -> dict:
    """Collect, then train for `cfg.minutes`; saves `out/model` and returns the collection stats."""
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    processor = AutoProcessor.from_pretrained(cfg.init)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(cfg.init)
    check_vocab(model, processor, exact=True)
    rows, stats = collect(model, processor, cfg)
    tqdm.write(f"collected {len(rows)} rows: {stats}")
    if not rows:
        raise RuntimeError("no trajectory was accepted by the scorers: train the model further first")
    train_cfg = sft_config(cfg)
    optimizer = make_optimizer(model, train_cfg)
    sft_batches, sft_step = BatchStream(train_cfg, processor), 0  # SFT batches in stream order
    rng, t0, step, metrics = random.Random(cfg.seed), time.time(), 0, {}
    model.train()
    bar = tqdm(desc="distill", mininterval=10)
    while time.time() - t0 < cfg.minutes * 60:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, train_cfg, time.time() - t0)
        if rng.random() < cfg.sft_share:
            gen = torch.Generator().manual_seed(step)
            parts = losses(model, sft_batches(sft_step), train_cfg, gen)
            sft_step += 1
        else:
            parts = distill_losses(model, rng.sample(rows, min(cfg.batch_size, len(rows))), processor, cfg)
        optimizer_step(model, optimizer, parts["loss"], train_cfg.clip)
        metrics = {k: round(v.item(), 4) for k, v in parts.items()}
        bar.update()
        bar.set_postfix(metrics, refresh=False)
        step += 1
    model.save_pretrained(out / "model")
    processor.save_pretrained(out / "model")
    return {"rows": len(rows), "steps": step, "collect": stats, **metrics}


def main() -> None:
    defaults = DistillConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--init", default=defaults.init, help="the SFT model folder to distill")
    parser.add_argument("--out", default=defaults.out)
    parser.add_argument("--prompts", type=int, default=defaults.prompts)
    parser.add_argument("--minutes", type=float, default=defaults.minutes)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--correct", action="store_true",
                        help="keep rejected trajectories too, with the reference reply as their target")
    parser.add_argument("--mix", type=parse_mix, default=defaults.mix,
                        help="skills of the collected prompts, e.g. arithmetic=3,sudoku=1 (default: training's)")
    parser.add_argument("--add-terms", type=skills.parse_add_terms, default=defaults.add_terms,
                        help="counts of terms an addition draws from, in the prompts and the SFT batches, "
                             "e.g. 2,3 (default: " + ",".join(map(str, defaults.add_terms)) + ")")
    parser.add_argument("--sft-share", type=float, default=defaults.sft_share,
                        help="share of steps that are uniform-corruption SFT batches")
    parser.add_argument("--sft-mix", type=parse_mix, default=defaults.train.mix,
                        help="skill shares of the SFT batches (default: training's)")
    add_recipe_arguments(parser, defaults.train)  # the SFT batches' corruption, as in training
    args = parser.parse_args()
    cfg = DistillConfig(init=args.init, out=args.out, prompts=args.prompts, minutes=args.minutes,
                        seed=args.seed, lr=args.lr, threads=args.threads, correct=args.correct, mix=args.mix,
                        add_terms=args.add_terms, sft_share=args.sft_share,
                        train=TrainConfig(mix=args.sft_mix, **recipe_kwargs(args)))
    print(distill(cfg))


if __name__ == "__main__":
    main()
