"""Training throughput of the tiny DiffusionGemma: examples/s of one training step per CPU thread.

Each configuration runs the real step of `python -m dg.tiny.train` (its batches, with data generation
and encoding timed apart, then losses, backward, clip and AdamW) on the same examples: the same steps
of the same stream, so only how they are batched differs. Configurations take turns, one block of
steps each per round, so a noisy machine slows them alike; the report gives each one's median over
rounds and its ratio to the first.

    python -m dg.tiny.throughput [--model assets/diffusiongemma-tiny] [--buckets 1 8] [--steps 16] [--rounds 3]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import time

import torch
from transformers import AutoProcessor, DiffusionGemmaForBlockDiffusion

from dg.loading import EMBEDDED_MODEL
from dg.tiny.train import BatchStream, TrainConfig, losses, make_optimizer, optimizer_step, parse_mix

MIX = "arithmetic=10,picture=4,sudoku=2,json=1,story=1"  # the mixture the model card's throughput figures were measured with


def measure(model, optimizer, processor, cfg: TrainConfig, first: int, steps: int) -> dict:
    """Steps first … first + steps − 1 of `cfg`'s stream: seconds making batches and seconds training."""
    batches = BatchStream(cfg, processor)
    make_s = train_s = 0.0
    pad = tokens = 0
    for step in range(first, first + steps):
        t0 = time.perf_counter()
        batch = batches(step)
        t1 = time.perf_counter()
        optimizer_step(model, optimizer, losses(model, batch, cfg, torch.Generator().manual_seed(step))["loss"],
                       cfg.clip)
        t2 = time.perf_counter()
        make_s, train_s = make_s + t1 - t0, train_s + t2 - t1
        tokens += batch.attention_mask.numel()
        pad += int((batch.attention_mask == 0).sum())
    return {"make_s": make_s, "train_s": train_s, "examples": steps * cfg.batch_size, "pad_share": pad / tokens}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(EMBEDDED_MODEL), help="weights to train from (their values do not "
                                                                     "change the cost)")
    parser.add_argument("--buckets", type=int, nargs="+", default=[1, 8],
                        help="the configurations: steps pooled and sorted by length into batches")
    parser.add_argument("--steps", type=int, default=16, help="steps per block (a multiple of every bucket)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mix", type=parse_mix, default=parse_mix(MIX))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON line instead of the table")
    args = parser.parse_args()
    if any(b <= 0 or args.steps % b for b in args.buckets):
        parser.error(f"--steps {args.steps} must be a positive multiple of every bucket {args.buckets}")
    torch.set_num_threads(args.threads)
    processor = AutoProcessor.from_pretrained(args.model)
    model = DiffusionGemmaForBlockDiffusion.from_pretrained(args.model).train()
    base = TrainConfig(out="", mix=args.mix, low_noise_p=0.3, plausible_p=0.5, self_renoise_p=1.0, sc_noisier_p=0.7)
    configs = [dataclasses.replace(base, bucket=b) for b in args.buckets]
    optimizer = make_optimizer(model, base)
    measure(model, optimizer, processor, configs[0], 0, args.steps)  # warm-up
    rows: dict[int, list[dict]] = {b: [] for b in args.buckets}
    for r in range(args.rounds):
        first = (r + 1) * args.steps  # every configuration trains on these same examples this round
        for cfg in configs:
            rows[cfg.bucket].append(measure(model, optimizer, processor, cfg, first, args.steps))
    report = []
    for b, runs in rows.items():
        step = statistics.median(m["examples"] / m["train_s"] for m in runs)
        whole = statistics.median(m["examples"] / (m["train_s"] + m["make_s"]) for m in runs)
        report.append({"bucket": b, "examples_per_s_step": round(step, 2), "examples_per_s": round(whole, 2),
                       "pad_share": round(statistics.mean(m["pad_share"] for m in runs), 3)})
    for row in report:
        row["ratio_to_first"] = round(row["examples_per_s"] / report[0]["examples_per_s"], 3)
    if args.json:
        print(json.dumps({"threads": args.threads, "steps": args.steps, "rounds": args.rounds, "configs": report}))
        return
    print(f"{args.threads} thread(s), batch {base.batch_size}, {args.steps} steps × {args.rounds} rounds per configuration")
    print(f"{'bucket':>6}  {'ex/s (step)':>11}  {'ex/s (with data)':>16}  {'pad share':>9}  {'ratio':>6}")
    for row in report:
        print(f"{row['bucket']:>6}  {row['examples_per_s_step']:>11.2f}  {row['examples_per_s']:>16.2f}  "
              f"{row['pad_share']:>9.1%}  {row['ratio_to_first']:>6.3f}")


if __name__ == "__main__":
    main()
