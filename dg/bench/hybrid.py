"""Hybrid decoding's design dial: denoising steps per verify round, per skill, against greedy AR.

For each `--draft-steps` value and each skill, `--n` held-out prompts run greedy AR and hybrid side by
side (interleaved, one thread): tokens per round, tokens per forward (TPF = tokens / NFE), hybrid's speed
over AR's, and whether every reply is AR's token for token. One JSON line at the end.

    python -m dg.bench.hybrid --draft-steps 1 2 3 --n 4
"""

import argparse
import json
import time

import torch

from dg.ar import generate_ar
from dg.hybrid import generate_hybrid
from dg.loading import load
from dg.prompts import build_inputs
from dg.tiny import skills


def measure(loaded, draft_steps: int, skill: str, n: int, seed: int = 0, add_terms=None) -> dict:
    """Totals over n held-out prompts of one skill (thinking on where the skill has a trace)."""
    model, config = loaded.model, loaded.sampler_config
    totals = {"tokens": 0, "rounds": 0, "nfe": 0, "ar_s": 0.0, "hybrid_s": 0.0, "equal": 0}
    for i, example in enumerate(skills.sample_examples(seed + 500, n, (skill,), add_terms)):
        inputs = build_inputs(loaded.processor, example.prompt, images=example.image,
                              thinking=skill in skills.THINKING_SKILLS)
        start = time.perf_counter()
        ar = generate_ar(model, inputs, config.max_new_tokens, loaded.eos_token_ids)
        totals["ar_s"] += time.perf_counter() - start
        torch.manual_seed(seed + i)
        start = time.perf_counter()
        hybrid = generate_hybrid(model, inputs, config, draft_steps=draft_steps)
        totals["hybrid_s"] += time.perf_counter() - start
        m = hybrid.metrics()
        totals["tokens"] += m["tokens"]
        totals["rounds"] += m["rounds"]
        totals["nfe"] += m["nfe"]
        totals["equal"] += hybrid.token_ids == ar.token_ids
    return {"draft_steps": draft_steps, "skill": skill, "n": n,
            "tokens_per_round": totals["tokens"] / max(totals["rounds"], 1),
            "tpf": totals["tokens"] / max(totals["nfe"], 1),
            "speedup_vs_ar": totals["ar_s"] / totals["hybrid_s"] if totals["hybrid_s"] > 0 else 0.0,
            "equals_ar": totals["equal"] / n}


ROWS = (("json", None), ("story", None), ("sudoku", None), ("arithmetic", (2,)), ("arithmetic", (3,)))


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.hybrid", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--draft-steps", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--n", type=int, default=4, help="prompts per skill")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.n < 1 or any(d < 1 for d in args.draft_steps):
        parser.error("--n and every --draft-steps must be >= 1")
    torch.set_num_threads(args.threads)
    loaded = load(args.model)
    rows = []
    for draft_steps in args.draft_steps:
        for skill, terms in ROWS:
            row = measure(loaded, draft_steps, skill, args.n, add_terms=terms)
            row["skill"] = skill if terms is None else f"{skill} ({terms[0]} terms)"
            rows.append(row)
            print(f"draft steps {draft_steps} {row['skill']:<22} tokens/round {row['tokens_per_round']:6.1f} "
                  f"TPF {row['tpf']:5.2f} speed vs AR {row['speedup_vs_ar']:5.2f}x equal to AR {row['equals_ar']:.0%}")
    print(json.dumps(rows))
    return rows


if __name__ == "__main__":
    main()
