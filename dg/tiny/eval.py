"""Held-out evaluation of the tiny DiffusionGemma: accuracy per skill in diffusion and AR mode.

Examples come from `skills.sample_examples(seed, n)` (training draws only from seeds >= 1000, so
small seeds are held out). Each example is prompted through the checkpoint's chat template and
decoded twice with the same weights: the entropy-bound sampler (the checkpoint's generation config)
and greedy AR. A skill with a thinking trace (arithmetic) is measured with thinking on; the same
problems also run with thinking off, to show what the trace buys. Sums of each count of terms the skill
draws (`skills.ADD_TERMS`, or `--add-terms`) and of `skills.HARD_TERMS` (three) numbers, of each digit
count (`skills.ADD_DIGITS`), are then answered both ways, one row per pair: sums of the most terms are
the ones hard enough that direct answers fail (a column's carry can be 2, from columns a direct answer
has not written), and the thinking-gain target is measured on those rows together.
Reported per skill: accuracy in both modes, TPF (report §3.4: generated tokens / (denoising steps +
K − 1)), effective steps and NFE, and which of the embedded model's targets hold (`TARGETS`).

    python -m dg.tiny.eval --seed 0 --n 100 [--model DIR] [--add-terms 2,3] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from dg.ar import generate_ar
from dg.hybrid import generate_hybrid
from dg.loading import check_vocab, load
from dg.prompts import build_inputs, decode_reply
from dg.sampler import generate_diffusion
from dg.tiny import skills

THINKING_SKILL = "arithmetic"
# What the embedded model is meant to reach (its model card reports each against these).
TARGETS = {"skill_acc": 0.9, "thinking_gain": 0.2, "mean_tpf": 8.0, "long_skill_tpf": 12.0}


@dataclass
class EvalConfig:
    """Single source of the evaluation defaults."""

    model: str | None = None  # None: the embedded checkpoint in assets/
    seed: int = 0
    n: int = 100
    add_terms: tuple[int, ...] = skills.ADD_TERMS  # counts of terms the additions draw (rows: these and HARD_TERMS)
    skills: tuple[str, ...] = skills.SKILLS
    ar: bool = True
    hybrid: bool = True  # hybrid decoding beside AR: its accuracy, and whether its tokens are AR's (needs ar)
    threads: int = 2

    def __post_init__(self):
        if self.n <= 0:
            raise ValueError(f"n must be > 0, got {self.n}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.threads <= 0:
            raise ValueError(f"threads must be > 0, got {self.threads}")
        for s in self.skills:
            if s not in skills.SKILLS:
                raise ValueError(f"unknown skill {s!r}; expected one of {skills.SKILLS}")
        self.add_terms = skills.check_add_terms(self.add_terms)


@dataclass
class Outcome:
    skill: str
    correct: bool
    answer: str
    tpf: float = 0.0
    effective_steps: float = 0.0
    nfe: int = 0
    ids: tuple = ()  # the reply's token ids (AR and hybrid: compared token for token)


@dataclass
class Tally:
    diffusion: list[Outcome] = field(default_factory=list)
    ar: list[Outcome] = field(default_factory=list)
    hybrid: list[Outcome] = field(default_factory=list)


def run_diffusion(loaded, example, thinking: bool, seed: int, config=None) -> Outcome:
    """`config` (default: the checkpoint's) is the sampler's."""
    inputs = build_inputs(loaded.processor, example.prompt, images=example.image, thinking=thinking)
    torch.manual_seed(seed)  # canvas init, candidates and renoise draws are the only randomness
    trace = generate_diffusion(loaded.model, inputs, config or loaded.sampler_config)
    answer = decode_reply(loaded.tokenizer, trace.token_ids).answer
    m = trace.metrics()
    return Outcome(example.skill, skills.score(example, answer), answer, m["tpf"], m["effective_steps"], m["nfe"])


def run_ar(loaded, example, thinking: bool) -> Outcome:
    inputs = build_inputs(loaded.processor, example.prompt, images=example.image, thinking=thinking)
    trace = generate_ar(loaded.model, inputs, loaded.sampler_config)
    answer = decode_reply(loaded.tokenizer, trace.token_ids).answer
    return Outcome(example.skill, skills.score(example, answer), answer, nfe=trace.metrics()["nfe"],
                   ids=tuple(trace.token_ids))


def run_hybrid(loaded, example, thinking: bool, seed: int) -> Outcome:
    inputs = build_inputs(loaded.processor, example.prompt, images=example.image, thinking=thinking)
    torch.manual_seed(seed)
    trace = generate_hybrid(loaded.model, inputs, loaded.sampler_config)
    answer = decode_reply(loaded.tokenizer, trace.token_ids).answer
    m = trace.metrics()
    return Outcome(example.skill, skills.score(example, answer), answer, m["tpf"], nfe=m["nfe"],
                   ids=tuple(trace.token_ids))


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def summarise(tallies: dict[str, Tally], thinking: dict[bool, list[bool]],
              by_size: dict[tuple[int, int], dict[bool, list[Outcome]]] | None = None) -> dict:
    """The report: per skill, thinking on/off, per (terms, digits) row of sums, and `targets`."""
    per_skill = {}
    for name, t in tallies.items():
        per_skill[name] = {
            "n": len(t.diffusion),
            "thinking": name in skills.THINKING_SKILLS,
            "diffusion_acc": mean(o.correct for o in t.diffusion),
            "ar_acc": mean(o.correct for o in t.ar) if t.ar else None,
            "tpf": mean(o.tpf for o in t.diffusion),
            "effective_steps": mean(o.effective_steps for o in t.diffusion),
            "nfe": mean(o.nfe for o in t.diffusion),
            "ar_nfe": mean(o.nfe for o in t.ar) if t.ar else None,
            "hybrid_acc": mean(o.correct for o in t.hybrid) if t.hybrid else None,
            "hybrid_nfe": mean(o.nfe for o in t.hybrid) if t.hybrid else None,
            "hybrid_equals_ar": mean(h.ids == a.ids for h, a in zip(t.hybrid, t.ar)) if t.hybrid else None,
        }
    result = {
        "skills": per_skill,
        "arithmetic_thinking": {"on": mean(thinking[True]), "off": mean(thinking[False]),
                                "n": len(thinking[True])},
        "mean_diffusion_acc": mean(s["diffusion_acc"] for s in per_skill.values()),
        "mean_tpf": mean(s["tpf"] for s in per_skill.values()),
        "arithmetic_rows": {
            f"{terms}x{digits}": {"terms": terms, "digits": digits, "n": len(rows[True]),
                                  "on": mean(o.correct for o in rows[True]),
                                  "off": mean(o.correct for o in rows[False]),
                                  "tpf_on": mean(o.tpf for o in rows[True])}
            for (terms, digits), rows in sorted((by_size or {}).items())},
    }
    result["targets"] = targets(result)
    return result


def row_terms(add_terms: tuple[int, ...]) -> list[int]:
    """The counts of terms of the arithmetic rows: the skill's, then sums hard enough that direct
    answers fail (`skills.HARD_TERMS`), whether or not the model was trained on them."""
    return sorted(set(add_terms) | {skills.HARD_TERMS})


def thinking_gain(rows: dict[str, dict]) -> dict:
    """Thinking on vs off over the rows with the most terms (every digit count, weighted by n): the
    sums hard enough that direct answers fail."""
    terms = max(r["terms"] for r in rows.values())
    hard = [r for r in rows.values() if r["terms"] == terms]
    n = sum(r["n"] for r in hard)
    on = sum(r["on"] * r["n"] for r in hard) / n if n else 0.0
    off = sum(r["off"] * r["n"] for r in hard) / n if n else 0.0
    return {"terms": terms, "n": n, "on": on, "off": off, "gain": on - off}


def targets(result: dict) -> dict[str, bool]:
    """Which of `TARGETS` hold (only those the evaluated skills can show)."""
    per_skill, held = result["skills"], {}
    for name, s in per_skill.items():
        held[f"{name}_acc>={TARGETS['skill_acc']:.0%}"] = s["diffusion_acc"] >= TARGETS["skill_acc"]
        if name in skills.LONG_SKILLS or s["thinking"]:  # a reply with its trace is >= 32 tokens too
            held[f"{name}_tpf>={TARGETS['long_skill_tpf']:g}"] = s["tpf"] >= TARGETS["long_skill_tpf"]
    if "sudoku" in per_skill and per_skill["sudoku"]["ar_acc"] is not None:
        held["sudoku_diffusion>=ar"] = per_skill["sudoku"]["diffusion_acc"] >= per_skill["sudoku"]["ar_acc"]
    if result["arithmetic_rows"]:
        gain = thinking_gain(result["arithmetic_rows"])["gain"]
        held[f"thinking_gain>={TARGETS['thinking_gain']:.0%}"] = gain >= TARGETS["thinking_gain"] - 1e-9
    held[f"mean_tpf>={TARGETS['mean_tpf']:g}"] = result["mean_tpf"] >= TARGETS["mean_tpf"]
    return held


def evaluate(cfg: EvalConfig, loaded=None, progress=None) -> dict:
    """Accuracy per skill (diffusion and AR), TPF, effective steps, thinking on/off for arithmetic."""
    torch.set_num_threads(cfg.threads)
    loaded = loaded or load(cfg.model)
    check_vocab(loaded.model, loaded.processor, exact=True)
    examples = skills.sample_examples(cfg.seed, cfg.n, cfg.skills, cfg.add_terms)
    tallies: dict[str, Tally] = defaultdict(Tally)
    thinking: dict[bool, list[bool]] = {True: [], False: []}
    seeds = random.Random(cfg.seed)
    for i, ex in enumerate(examples):
        mode = ex.skill in skills.THINKING_SKILLS  # a skill with a trace is measured with thinking on
        seed = seeds.randrange(2**31)
        d = run_diffusion(loaded, ex, mode, seed)
        tallies[ex.skill].diffusion.append(d)
        if cfg.ar:
            tallies[ex.skill].ar.append(run_ar(loaded, ex, mode))
            if cfg.hybrid:
                tallies[ex.skill].hybrid.append(run_hybrid(loaded, ex, mode, seed))
        if ex.skill == THINKING_SKILL:  # the same problem, answered directly
            thinking[True].append(d.correct)
            thinking[False].append(run_diffusion(loaded, ex, False, seed).correct)
        if progress is not None:
            progress(i, ex, d)
    by_size: dict[tuple[int, int], dict[bool, list[Outcome]]] = {}
    if THINKING_SKILL in cfg.skills:
        per_row = max(1, cfg.n // len(cfg.skills))
        for terms in row_terms(cfg.add_terms):
            # a budget that holds the longest trace: a model not trained on these sums fails on its own
            budget = max(loaded.sampler_config.max_new_tokens, skills.longest_addition_reply(terms))
            config = loaded.sampler_config.replace(max_new_tokens=budget)
            for digits in skills.ADD_DIGITS:
                # string seeds: never a training stream's; a two-term seed has no terms suffix, so its draws stay
                # those the model card's tables report
                rng = random.Random(f"addition {cfg.seed} {digits}" + (f" {terms} terms" if terms != 2 else ""))
                rows = by_size[terms, digits] = {True: [], False: []}
                for _ in range(per_row):
                    ex = skills.addition_example(rng, digits, thinking=True, terms=terms)
                    seed = rng.randrange(2**31)
                    for mode in (True, False):
                        rows[mode].append(run_diffusion(loaded, ex, mode, seed, config))
    return summarise(dict(tallies), thinking, by_size)


def table(result: dict) -> str:
    """A Markdown table of the summary (the model card's eval table)."""
    rows = ["| skill | n | diffusion acc | AR acc | hybrid acc | hybrid = AR | TPF | effective steps | "
            "NFE (diffusion) | NFE (AR) | NFE (hybrid) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in result["skills"].items():
        cell = lambda key, fmt: "–" if s.get(key) is None else format(s[key], fmt)  # noqa: E731
        rows.append(f"| {name} | {s['n']} | {s['diffusion_acc']:.0%} | {cell('ar_acc', '.0%')} | "
                    f"{cell('hybrid_acc', '.0%')} | {cell('hybrid_equals_ar', '.0%')} | {s['tpf']:.2f} | "
                    f"{s['effective_steps']:.1f} | {s['nfe']:.1f} | {cell('ar_nfe', '.1f')} | {cell('hybrid_nfe', '.1f')} |")
    t = result["arithmetic_thinking"]
    rows.append(f"\nArithmetic (measured with thinking on), the same {t['n']} problems answered directly: "
                f"thinking on {t['on']:.0%}, off {t['off']:.0%}. "
                f"Mean diffusion accuracy {result['mean_diffusion_acc']:.0%}, mean TPF {result['mean_tpf']:.2f}.")
    if result["arithmetic_rows"]:
        words = {2: "two", 3: "three", 4: "four"}
        rows += ["\n| sum of | n | thinking on | thinking off | gain | TPF (on) |", "|---|---|---|---|---|---|"]
        rows += [f"| {words.get(r['terms'], r['terms'])} {r['digits']}-digit numbers | {r['n']} | {r['on']:.0%} | "
                 f"{r['off']:.0%} | {r['on'] - r['off']:+.0%} | {r['tpf_on']:.2f} |"
                 for r in result["arithmetic_rows"].values()]
        g = thinking_gain(result["arithmetic_rows"])
        rows.append(f"\nSums of {words.get(g['terms'], g['terms'])} numbers, all digit counts ({g['n']} problems): "
                    f"thinking on {g['on']:.0%}, off {g['off']:.0%}, gain {g['gain']:+.0%} (the thinking-gain target).")
    missed = [name for name, ok in result["targets"].items() if not ok]
    rows.append("\nTargets: all hold." if not missed else f"\nTargets missed: {', '.join(missed)}.")
    return "\n".join(rows)


def main() -> None:
    defaults = EvalConfig()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--n", type=int, default=defaults.n)
    parser.add_argument("--skill", action="append", choices=skills.SKILLS, help="repeatable; default all")
    parser.add_argument("--no-ar", action="store_true", help="skip the AR-mode pass (and hybrid's)")
    parser.add_argument("--no-hybrid", action="store_true", help="skip hybrid decoding")
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--add-terms", type=skills.parse_add_terms, default=defaults.add_terms,
                        help="counts of terms the additions draw, e.g. 2,3 (default: the model's skill, "
                             + ",".join(map(str, defaults.add_terms)) + f"); the rows add sums of {skills.HARD_TERMS}")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    cfg = EvalConfig(model=args.model, seed=args.seed, n=args.n, skills=tuple(args.skill or skills.SKILLS),
                     ar=not args.no_ar, hybrid=not args.no_hybrid, threads=args.threads, add_terms=args.add_terms)

    def show(i, ex, outcome):
        if not args.json and not outcome.correct:
            print(f"[{i}] {ex.skill}: got {outcome.answer!r}, want {ex.target!r}")

    result = evaluate(cfg, progress=show)
    print(json.dumps(result, indent=None if args.json else 2) if args.json else table(result))


if __name__ == "__main__":
    main()
