"""Eager vs graphed passes side by side: ms per decoder step and per AR token (dg.paths "eager" vs "graphs").

One prompt, each path in turn for `--repeats` rounds (the order alternating): a prefill, then `--steps` decoder
passes over one canvas with self-conditioning from the step before (sampling left out: it is the same on both
paths), then `--tokens` greedy AR tokens (encoder pass + lm_head + argmax). The first pass of each shape is
timed apart: on CUDA the graphed path captures its graph there. Medians, the ratios eager / graphs measured in
the same run, and whether the paths agree (AR tokens equal, decoder argmax equal, largest logit difference).
On a CPU the graphed path calls the same buffers eagerly: its ratio there is the cost of its buffer and mask
writes and of its full-length sliding layers, not of graphs. One JSON line at the end.

    python -m dg.bench.graphs --device cuda --steps 32 --tokens 64 --repeats 3
"""

import argparse
import json
import statistics

import torch

from dg.ar import next_token_logits
from dg.bench.common import timed
from dg.bench.models import bench_prompts
from dg.loading import load
from dg.passes import split_inputs
from dg.paths import open_passes
from dg.prompts import build_inputs

PATHS = ("eager", "graphs")


def one_round(model, inputs: dict, path: str, steps: int, tokens: int) -> dict:
    """One run's passes on `path`: seconds of the first and the later decoder steps and AR tokens, and outputs."""
    ids, extra = split_inputs(inputs)
    length, device = model.config.canvas_length, model.device
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    canvas = torch.randint(0, model.config.text_config.vocab_size, (1, length),
                           generator=torch.Generator().manual_seed(0)).to(device)
    with torch.no_grad(), open_passes(model, path, ids.shape[1] + max(tokens, length)) as passes:
        hidden = passes.prefill(ids, extra)
        logits, first_step = timed(lambda: passes.decode(canvas, None), device)

        def denoise(logits):
            for _ in range(steps):
                logits = passes.decode(canvas, logits.to(embed_dtype))
            return logits

        logits, later_steps = timed(lambda: denoise(logits), device)
        token = next_token_logits(model, hidden[:, -1]).argmax(-1, keepdim=True)  # (1, 1)
        ar_ids = [int(token)]

        def ar(token, n):
            for _ in range(n):
                token = next_token_logits(model, passes.encode(token)[:, -1]).argmax(-1, keepdim=True)
                ar_ids.append(int(token))
            return token

        token, first_token = timed(lambda: ar(token, 1), device)
        _, later_tokens = timed(lambda: ar(token, tokens - 1), device)
    return {"first_step_ms": first_step * 1e3, "step_ms": later_steps * 1e3 / steps,
            "first_token_ms": first_token * 1e3, "token_ms": later_tokens * 1e3 / max(tokens - 1, 1),
            "logits": logits.float().cpu(), "ar_ids": ar_ids}


def measure(loaded, steps: int, tokens: int, repeats: int) -> dict:
    """`compare_paths` on the first bench prompt, built with the checkpoint's processor."""
    p = bench_prompts()[0]
    inputs = build_inputs(loaded.processor, p["text"], thinking=p["thinking"], device=loaded.model.device)
    return compare_paths(loaded.model, inputs, steps, tokens, repeats)


def compare_paths(model, inputs: dict, steps: int, tokens: int, repeats: int) -> dict:
    """Medians over repeats of each path's times, the eager / graphs ratios, and the paths' agreement."""
    rounds = {path: [] for path in PATHS}
    for r in range(repeats):
        for path in PATHS if r % 2 == 0 else PATHS[::-1]:
            rounds[path].append(one_round(model, inputs, path, steps, tokens))
    keys = ("first_step_ms", "step_ms", "first_token_ms", "token_ms")
    median = {path: {k: statistics.median(x[k] for x in rounds[path]) for k in keys} for path in PATHS}
    eager, graphs = rounds["eager"][0], rounds["graphs"][0]
    return {"device": str(model.device), "threads": torch.get_num_threads(),
            "prompt_tokens": inputs["input_ids"].shape[1], "canvas": model.config.canvas_length, "steps": steps,
            "tokens": tokens, "repeats": repeats,
            **{f"{path}_{k}": median[path][k] for path in PATHS for k in keys},
            "step_eager_vs_graphs": median["eager"]["step_ms"] / median["graphs"]["step_ms"],
            "token_eager_vs_graphs": median["eager"]["token_ms"] / median["graphs"]["token_ms"],
            "same_ar_tokens": all(x["ar_ids"] == eager["ar_ids"] for path in PATHS for x in rounds[path]),
            "same_decoder_argmax": bool(torch.equal(eager["logits"].argmax(-1), graphs["logits"].argmax(-1))),
            "max_logit_difference": float((eager["logits"] - graphs["logits"]).abs().max())}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.graphs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16, help="decoder steps timed per round")
    parser.add_argument("--tokens", type=int, default=32, help="AR tokens per round")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if min(args.steps, args.repeats, args.threads) < 1 or args.tokens < 2:
        parser.error(f"--steps, --repeats and --threads must be >= 1 and --tokens >= 2, got {args.steps}, "
                     f"{args.repeats}, {args.threads}, {args.tokens}")
    torch.set_num_threads(args.threads)
    result = measure(load(args.model, device=args.device, path="eager"), args.steps, args.tokens, args.repeats)
    print(f"{result['device']}, {result['threads']} thread(s): decoder step eager {result['eager_step_ms']:.2f} ms, "
          f"graphs {result['graphs_step_ms']:.2f} ms ({result['step_eager_vs_graphs']:.2f}x); AR token eager "
          f"{result['eager_token_ms']:.2f} ms, graphs {result['graphs_token_ms']:.2f} ms "
          f"({result['token_eager_vs_graphs']:.2f}x); same AR tokens: {result['same_ar_tokens']}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
