"""Where diffusion arithmetic goes wrong: per-column diagnostics of the decoder's carry traces.

Two measures on held-out thinking-mode additions of two numbers (seeds from `PROBE_SEED_BASE`, far from training's):

- **columns**: run the entropy-bound sampler (the checkpoint's generation config, seed 0 per problem)
  and read its trace column by column (`x+y=ss; ...; carry c c ...; write w w ...`): how often the
  operand digits are the prompt's, how often the two-digit sum is right *for the digits the model
  itself wrote*, how often each carry follows the model's own sum and carry before it, and each
  written digit its own sum and carry in; plus exact answers.
- **repair**: take the reference canvas, replace the ones digit of one column's sum, run one decoder
  step and read that position's argmax. Replaced by a token that cannot be a digit (`noise`), the
  decoder must compute the digit from the column; replaced by a wrong digit (`digit`), it must also
  notice that a likely-looking token is wrong, which the sampler needs: it renoises a canvas with the
  model's own samples, likely-looking tokens, not uniform ones.

A decoder that computes the sum but keeps likely-looking tokens scores high on `noise` and low on
`digit`, and its traces carry self-consistent wrong sums.

    python -m dg.tiny.probe [--model DIR] [--n 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import re

import torch

from dg.loading import load
from dg.prompts import build_inputs, decode_reply
from dg.drafts import Draft
from dg.sampler import generate_diffusion
from dg.tiny import skills
from dg.tiny.data import encode_example

PROBE_SEED_BASE = 30_000  # held out: training streams draw seeds >= 1000 far below their ranges' ends
COLUMN = re.compile(r"(\d)\+(\d)=(\d\d)")
CARRIES = re.compile(r"carry ((?:\d ?)+)")
WRITTEN = re.compile(r"write ((?:\d ?)+)")
NOT_A_DIGIT = "▁carry"  # a token of the trace that never stands where a digit does


def problem(i: int) -> skills.Example:
    """A held-out sum of two numbers (one trace: one pass of columns, carries and digits to read)."""
    rng = random.Random(PROBE_SEED_BASE + i)
    return skills.addition_example(rng, rng.choice(skills.ADD_DIGITS), thinking=True)


def _digits(pattern: re.Pattern, text: str) -> list[int]:
    found = pattern.search(text)
    return [int(d) for d in found.group(1).split()] if found else []


def columns(loaded, n: int) -> dict:
    """Column-by-column agreement of the sampler's traces on n problems."""
    counts = dict(columns=0, operands=0, sum_right=0, carry_follows=0, write_follows=0, exact=0)
    for i in range(n):
        ex = problem(i)
        torch.manual_seed(0)
        trace = generate_diffusion(loaded.model, build_inputs(loaded.processor, ex.prompt, thinking=True),
                                   loaded.sampler_config)
        reply = decode_reply(loaded.tokenizer, trace.token_ids)
        counts["exact"] += reply.answer.strip() == ex.answer
        thought = reply.thought or ""
        got_cols = COLUMN.findall(thought)
        carries, written = _digits(CARRIES, thought), _digits(WRITTEN, thought)
        for k, (want, got) in enumerate(zip(COLUMN.findall(ex.thought), got_cols)):
            counts["columns"] += 1
            counts["operands"] += got[:2] == want[:2]
            counts["sum_right"] += int(got[2]) == int(got[0]) + int(got[1])
            if k + 1 < len(carries):
                counts["carry_follows"] += carries[k + 1] == int(int(got[2]) + carries[k] >= 10)
            if k < len(written) and k < len(carries):
                counts["write_follows"] += written[k] == (int(got[2]) + carries[k]) % 10
    cols = max(counts["columns"], 1)
    return {"problems": n, "columns": counts["columns"], "exact": counts["exact"] / n,
            **{k: counts[k] / cols for k in ("operands", "sum_right", "carry_follows", "write_follows")}}


def repair(loaded, n: int) -> dict:
    """One decoder step on the reference canvas with one sum's ones digit replaced: share restored."""
    tok, length = loaded.tokenizer, loaded.model.config.canvas_length
    digit_ids = {str(d): tok.convert_tokens_to_ids(str(d)) for d in range(10)}
    config = loaded.sampler_config.replace(max_new_tokens=length, max_denoising_steps=1)
    restored, tried = {"noise": 0, "digit": 0}, 0
    for i in range(n):
        ex = problem(i)
        canvas = encode_example(ex, loaded.processor).reply_ids[:length]
        canvas += [tok.pad_token_id] * (length - len(canvas))  # a short reply's canvas ends in pad, as in training
        pieces = tok.convert_ids_to_tokens(canvas)
        inputs = build_inputs(loaded.processor, ex.prompt, thinking=True)
        for eq in [j for j, p in enumerate(pieces) if p == "="][1:3]:  # columns 2 and 3, inside the first canvas
            ones = eq + 2
            if ones >= length or pieces[ones] not in digit_ids:
                continue
            tried += 1
            for kind in restored:
                broken = list(canvas)
                broken[ones] = (digit_ids[str((int(pieces[ones]) + 3) % 10)] if kind == "digit"
                                else tok.convert_tokens_to_ids(NOT_A_DIGIT))
                torch.manual_seed(0)
                trace = generate_diffusion(loaded.model, inputs, config, draft=Draft.of(torch.tensor([broken])))
                restored[kind] += int(trace.steps[0].argmax[ones]) == canvas[ones]
    return {"positions": tried, **{k: v / max(tried, 1) for k, v in restored.items()}}


def probe(model: str | None = None, n: int = 20) -> dict:
    loaded = load(model)
    return {"columns": columns(loaded, n), "repair": repair(loaded, n)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--n", type=int, default=20, help="problems")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    if args.n <= 0:
        parser.error(f"--n must be > 0, got {args.n}")
    torch.set_num_threads(args.threads)
    result = probe(args.model, args.n)
    if args.json:
        print(json.dumps(result))
        return
    c, r = result["columns"], result["repair"]
    print(f"sampler traces, {c['problems']} problems, {c['columns']} columns: operands copied {c['operands']:.0%}, "
          f"sum right for its own digits {c['sum_right']:.0%}, carry follows {c['carry_follows']:.0%}, "
          f"written digit follows {c['write_follows']:.0%}, "
          f"exact answers {c['exact']:.0%}")
    print(f"one-step repair of a sum's ones digit, {r['positions']} positions: from a non-digit {r['noise']:.0%}, "
          f"from a wrong digit {r['digit']:.0%}")


if __name__ == "__main__":
    main()
