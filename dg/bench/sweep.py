"""The latency dial, measured: accuracy and wall time against the step cap, and steps per canvas by skill.

On the embedded model (or `--model`), every skill's held-out draws (`skills.sample_examples`, as
`dg.tiny.eval` does; arithmetic with its trace) are decoded once per step cap in `--caps`, with the
same sampler seed per example at every cap, so the caps are compared on the same problems and noise.
Recorded per cap and skill: accuracy (the skill's scorer), median and mean wall time, steps per canvas, TPF
(report §3.4). At the release's cap (48) it also records, per skill, how many steps each canvas took
and how fast the argmax draft reaches the committed canvas, step by step (report §9: structured output
settles in 2–3 steps, hard reasoning takes more); and the figures the roofline places this CPU at: one
thread's copy bandwidth and matmul FLOP/s, and the model's diffusion step and AR token times.

    nice -n 5 python -m dg.bench.sweep --n 20 --out assets/measurements/sweep.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import random
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from dg.ar import generate_ar
from dg.bench.step import memory_bandwidth
from dg.loading import load
from dg.prompts import build_inputs, decode_reply
from dg.sampler import generate_diffusion
from dg.tiny import skills

CAPS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48)
ROOT = Path(__file__).resolve().parents[2]  # model paths are written relative to it


def parse_caps(text: str) -> tuple[int, ...]:
    """'1,2,4' → (1, 2, 4): whole numbers >= 1, increasing; else a one-line ValueError."""
    try:
        caps = tuple(int(c) for c in text.split(","))
    except ValueError:
        raise ValueError(f"caps must be whole numbers separated by commas, got {text!r}") from None
    if not caps or min(caps) < 1 or list(caps) != sorted(set(caps)):
        raise ValueError(f"caps must be increasing whole numbers >= 1, got {text!r}")
    return caps


def convergence(trace, max_steps: int) -> list[float]:
    """Share of committed non-pad tokens the argmax draft already holds after step 1..max_steps,
    over every canvas of the run (a canvas that stopped earlier holds all of them from then on)."""
    pad = trace.start.pad_token_id
    hit, total = [0] * max_steps, 0
    for canvas in trace.canvases:
        keep = canvas.committed != pad if pad is not None else slice(None)
        final = canvas.committed[keep]
        total += len(final)
        steps = trace.steps_of(canvas.canvas)
        for n in range(max_steps):
            draft = steps[min(n, len(steps) - 1)].argmax[keep]
            hit[n] += int((draft == final).sum())
    return [h / total if total else 1.0 for h in hit]


def run_one(loaded, example, seed: int, cap: int):
    """(trace, answer is right) of one example decoded with the step cap `cap`."""
    thinking = example.skill in skills.THINKING_SKILLS
    inputs = build_inputs(loaded.processor, example.prompt, images=example.image, thinking=thinking)
    torch.manual_seed(seed)
    trace = generate_diffusion(loaded.model, inputs, loaded.sampler_config.replace(max_denoising_steps=cap))
    answer = decode_reply(loaded.tokenizer, trace.token_ids).answer
    return trace, skills.score(example, answer)


def summarise_cap(traces: list, correct: list[bool]) -> dict:
    metrics = [t.metrics() for t in traces]
    per_canvas = [c.steps for t in traces for c in t.canvases]
    return {"n": len(traces), "accuracy": statistics.fmean(correct),
            # the median: on shared cores one slow reply (another process took the core) would move a mean
            "wall_ms": 1e3 * statistics.median(m["wall_s"] for m in metrics),
            "wall_ms_mean": 1e3 * statistics.fmean(m["wall_s"] for m in metrics),
            "steps_per_canvas": statistics.fmean(per_canvas),
            "tpf": statistics.fmean(m["tpf"] for m in metrics),
            "tokens": statistics.fmean(m["tokens"] for m in metrics)}


def step_gaps_ms(trace) -> list[float]:
    """ms between consecutive denoising steps of one canvas (a decoder pass and its sampling step)."""
    return [1e3 * (b.t - a.t) for a, b in zip(trace.steps, trace.steps[1:]) if a.canvas == b.canvas]


def ar_token_ms(loaded, example) -> tuple[list[float], int, float]:
    """(ms between consecutive AR tokens, tokens, wall s) of one greedy AR run on the same weights."""
    thinking = example.skill in skills.THINKING_SKILLS
    inputs = build_inputs(loaded.processor, example.prompt, images=example.image, thinking=thinking)
    trace = generate_ar(loaded.model, inputs, loaded.sampler_config)
    gaps = [1e3 * (b.t - a.t) for a, b in zip(trace.tokens, trace.tokens[1:])]
    return gaps, trace.metrics()["tokens"], trace.metrics()["wall_s"]


def matmul_gflop_s(size: int = 512, repeats: int = 5) -> float:
    """One float32 (size × size) @ (size × size) matmul's FLOP/s on this thread, best of `repeats`."""
    a, b = torch.randn(size, size), torch.randn(size, size)
    a @ b  # warm-up
    best = min(_seconds(lambda: a @ b) for _ in range(repeats))
    return 2 * size**3 / best / 1e9


def _seconds(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def sweep_skill(loaded, skill: str, n: int, seed: int, caps: tuple[int, ...], progress=None) -> dict:
    """One skill's rows: per cap its summary; at the release's cap (or the largest) its steps per
    canvas, convergence and step times (the default largest cap is the release's, 48); and the same problems
    decoded by AR."""
    examples = skills.sample_examples(seed, n, (skill,))
    seeds = [random.Random(f"sweep {seed} {skill} {i}").randrange(2**31) for i in range(n)]
    rows, full = {}, max(caps)
    for cap in caps:
        runs = [run_one(loaded, ex, s, cap) for ex, s in zip(examples, seeds)]
        rows[str(cap)] = summarise_cap([t for t, _ in runs], [ok for _, ok in runs])
        if progress:
            progress(skill, cap, rows[str(cap)])
        if cap == full:
            traces = [t for t, _ in runs]
    depth = max(c.steps for t in traces for c in t.canvases)
    curves = [convergence(t, depth) for t in traces]
    ar = [ar_token_ms(loaded, ex) for ex in examples]
    return {
        "caps": rows,
        "steps_histogram": dict(sorted(Counter(c.steps for t in traces for c in t.canvases).items())),
        "convergence": [statistics.fmean(c[i] for c in curves) for i in range(depth)],
        "step_ms": statistics.median(g for t in traces for g in step_gaps_ms(t)),
        "diffusion_tok_s": sum(t.metrics()["tokens"] for t in traces) / sum(t.metrics()["wall_s"] for t in traces),
        "ar_token_ms": statistics.median(g for gaps, _, _ in ar for g in gaps),
        "ar_tok_s": sum(k for _, k, _ in ar) / sum(w for _, _, w in ar),
    }


def sweep(loaded, n: int, seed: int, caps: tuple[int, ...] = CAPS, skill_names=skills.SKILLS, progress=None) -> dict:
    """The whole measurement, as the JSON the app draws (`dg.view.learn_plots`)."""
    started = time.perf_counter()
    per_skill = {s: sweep_skill(loaded, s, n, seed, caps, progress) for s in skill_names}
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"processor": _cpu_name(), "platform": platform.platform(), "threads": torch.get_num_threads(),
                    "torch": torch.__version__, "python": platform.python_version()},
        "model": loaded.describe().replace(f"{ROOT}/", ""), "n_per_skill": n, "seed": seed, "caps": list(caps),
        "canvas_length": loaded.model.config.canvas_length,
        "cpu": {"copy_gb_s": memory_bandwidth(torch.device("cpu"), 256), "matmul_gflop_s": matmul_gflop_s()},
        "skills": per_skill,
        "seconds": time.perf_counter() - started,
    }


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--n", type=int, default=20, help="held-out draws per skill")
    parser.add_argument("--seed", type=int, default=0, help="held-out seed (training draws use seeds >= 1000)")
    parser.add_argument("--caps", default=",".join(map(str, CAPS)), help="step caps, increasing, comma-separated")
    parser.add_argument("--skill", action="append", choices=skills.SKILLS, help="repeatable; default all")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads (one: the cores are shared)")
    parser.add_argument("--out", default=None, help="write the JSON here (default: print it)")
    args = parser.parse_args(argv)
    try:
        caps = parse_caps(args.caps)
        if args.n <= 0 or args.threads <= 0 or args.seed < 0:
            raise ValueError(f"--n and --threads must be > 0 and --seed >= 0, "
                             f"got {args.n}, {args.threads}, {args.seed}")
    except ValueError as err:
        parser.exit(2, f"error: {err}\n")
    torch.set_num_threads(args.threads)
    loaded = load(args.model)
    show = lambda s, cap, row: print(f"{s:<10} cap {cap:>2}: acc {row['accuracy']:.0%}  "  # noqa: E731
                                     f"{row['wall_ms']:.0f} ms  {row['steps_per_canvas']:.2f} steps/canvas",
                                     file=sys.stderr)
    result = sweep(loaded, args.n, args.seed, caps, tuple(args.skill or skills.SKILLS), show)
    result["command"] = "python -m dg.bench.sweep " + " ".join(argv if argv is not None else sys.argv[1:])
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    main()
