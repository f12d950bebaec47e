"""Hybrid decoding's design dials: the canvas layout and denoising steps per verify round, per skill,
against greedy AR.

For each `--layouts` value, each `--draft-steps` value and each skill, `--n` held-out prompts run greedy
AR and hybrid side by side (interleaved, one thread): tokens per round, tokens per forward (TPF = tokens /
NFE), hybrid's speed over AR's, and whether every reply is AR's token for token. One JSON line at the end.

Layouts: `aligned` is dg.hybrid's (each canvas on its trained place, verified tokens pinned inside it,
the canvas state carried from round to round); `restart` drafts a fresh canvas from the last verified
token every round, so canvases start wherever verification stopped (places the decoder never saw in
training) and nothing carries over. `restart` lives here only, as the measured alternative.

    python -m dg.bench.hybrid --layouts aligned restart --draft-steps 1 2 3 --n 4
"""

import argparse
import json
import time

import torch

from dg.ar import generate_ar, next_token_logits
from dg.hybrid import agreeing, generate_hybrid
from dg.loading import load
from dg.passes import eos_token_ids, split_inputs
from dg.paths import Run, open_passes
from dg.prompts import build_inputs
from dg.sampler import denoise_step
from dg.tiny import skills

LAYOUTS = ("aligned", "restart")


@torch.no_grad()
def restart_hybrid(model, inputs: dict, config, draft_steps: int) -> dict:
    """Hybrid with the `restart` layout: every round drafts a fresh canvas whose first cell is the last
    verified token (pinned) at that token's own position, runs `draft_steps` sampler steps, and verifies the
    draft with one causal encoder pass, keeping what agrees with greedy AR plus AR's own token. The KV cache
    is cropped to the verified tokens after each pass. Returns the token ids and the counts."""
    input_ids, extra = split_inputs(inputs)
    base, length = input_ids.shape[1], model.config.canvas_length
    vocab = model.config.text_config.vocab_size
    eos = set(eos_token_ids(model))
    with open_passes(model, "eager", base + config.max_new_tokens + length, rollback=True) as passes:
        run = Run(model, passes)
        hidden = run.prefill(input_ids, extra)
        run.crop(base)
        ids = [int(next_token_logits(model, hidden[:, -1])[0].argmax())]
        rounds = 0
        done = lambda: len(ids) >= config.max_new_tokens or ids[-1] in eos  # noqa: E731
        pinned = torch.arange(length, device=passes.device)[None] < 1
        embed_dtype = model.model.decoder.embed_tokens.weight.dtype
        while not done():
            # the last verified token's place is run.cached: the cache holds everything before it
            canvas = torch.randint(0, vocab, (1, length), device=passes.device)
            canvas[0, 0] = ids[-1]
            sc_logits = None
            for step in range(1, draft_steps + 1):
                s = denoise_step(run, config, 0, step, canvas, sc_logits, pinned).sample
                sc_logits, draft, canvas = s.scaled_logits.to(embed_dtype), s.argmax, s.next_canvas.clone()
            ar_logits = next_token_logits(model, run.encode(draft))[0]
            rounds += 1
            first_mismatch = 1 + agreeing(draft[0], ar_logits, 1)
            for token in draft[0, 1:first_mismatch].tolist():
                if not done():
                    ids.append(token)
            if not done():
                ids.append(int(ar_logits[first_mismatch - 1].argmax()))
            run.crop(base + len(ids) - 1)
        return {"token_ids": ids, "rounds": rounds, "nfe": sum(run.forwards)}


def measure(loaded, draft_steps: int, skill: str, n: int, seed: int = 0, add_terms=None,
            layout: str = "aligned") -> dict:
    """Totals over n held-out prompts of one skill (thinking on where the skill has a trace)."""
    model, config = loaded.model, loaded.sampler_config
    totals = {"tokens": 0, "rounds": 0, "nfe": 0, "ar_s": 0.0, "hybrid_s": 0.0, "equal": 0}
    for i, example in enumerate(skills.sample_examples(seed + 500, n, (skill,), add_terms)):
        inputs = build_inputs(loaded.processor, example.prompt, images=example.image,
                              thinking=skill in skills.THINKING_SKILLS)
        start = time.perf_counter()
        ar = generate_ar(model, inputs, config)
        totals["ar_s"] += time.perf_counter() - start
        torch.manual_seed(seed + i)
        start = time.perf_counter()
        if layout == "aligned":
            trace = generate_hybrid(model, inputs, config, draft_steps=draft_steps)
            m = trace.metrics()
            hybrid = {"token_ids": trace.token_ids, "rounds": m["rounds"], "nfe": m["nfe"]}
        else:
            hybrid = restart_hybrid(model, inputs, config, draft_steps)
        totals["hybrid_s"] += time.perf_counter() - start
        totals["tokens"] += ar.metrics()["tokens"]  # pad never counts; the replies are checked equal below
        totals["rounds"] += hybrid["rounds"]
        totals["nfe"] += hybrid["nfe"]
        totals["equal"] += hybrid["token_ids"] == ar.token_ids
    return {"layout": layout, "draft_steps": draft_steps, "skill": skill, "n": n,
            "tokens_per_round": totals["tokens"] / max(totals["rounds"], 1),
            "tpf": totals["tokens"] / max(totals["nfe"], 1),
            "speedup_vs_ar": totals["ar_s"] / totals["hybrid_s"] if totals["hybrid_s"] > 0 else 0.0,
            "equals_ar": totals["equal"] / n}


ROWS = (("json", None), ("story", None), ("sudoku", None), ("arithmetic", (2,)), ("arithmetic", (3,)))


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.hybrid", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--layouts", nargs="+", choices=LAYOUTS, default=["aligned"],
                        help="canvas layouts to measure (aligned is dg.hybrid's)")
    parser.add_argument("--draft-steps", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--n", type=int, default=4, help="prompts per skill")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.n < 1 or any(d < 1 for d in args.draft_steps):
        parser.error("--n and every --draft-steps must be >= 1")
    torch.set_num_threads(args.threads)
    loaded = load(args.model)
    rows = []
    for layout in args.layouts:
        for draft_steps in args.draft_steps:
            for skill, terms in ROWS:
                row = measure(loaded, draft_steps, skill, args.n, add_terms=terms, layout=layout)
                row["skill"] = skill if terms is None else f"{skill} ({terms[0]} terms)"
                rows.append(row)
                print(f"{layout} draft steps {draft_steps} {row['skill']:<22} tokens/round "
                      f"{row['tokens_per_round']:6.1f} TPF {row['tpf']:5.2f} speed vs AR {row['speedup_vs_ar']:5.2f}x "
                      f"equal to AR {row['equals_ar']:.0%}")
    print(json.dumps(rows))
    return rows


if __name__ == "__main__":
    main()
