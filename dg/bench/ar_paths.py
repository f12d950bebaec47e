"""AR's two paths side by side: eager on a growing cache vs a static cache and the compiled step (dg.ar).

Greedy AR on the bench's prompts, each path warmed first (the compiled one compiles there, timed apart),
then the paths interleaved for `--repeats` rounds, `--tokens` tokens a run (EOS ignored, so both do the same
work): tokens/s of each, the ratio, and whether every run gave the same tokens. One JSON line at the end.
This is the measurement behind `--ar-path auto` choosing eager on a CPU.

    python -m dg.bench.ar_paths --threads 1 --tokens 128 --repeats 3
"""

import argparse
import json
import statistics

import torch

from dg.ar import generate_ar
from dg.config import SamplerConfig
from dg.bench.common import timed
from dg.bench.models import bench_prompts
from dg.loading import load
from dg.prompts import build_inputs

PATHS = ("eager", "compiled")


def measure(loaded, tokens: int, repeats: int) -> dict:
    """Median over repeats of each path's tokens/s over all prompts, its warm-up, and token equality."""
    model = loaded.model
    inputs = [build_inputs(loaded.processor, p["text"], thinking=p["thinking"], device=model.device)
              for p in bench_prompts()]
    config = SamplerConfig(max_new_tokens=tokens)
    run = {path: (lambda x, path=path: generate_ar(model, x, config, path=path)) for path in PATHS}
    warm_up_s = {path: timed(lambda path=path: run[path](inputs[0]), model.device)[1] for path in PATHS}
    tok_s = {path: [] for path in PATHS}
    same = True
    for r in range(repeats):
        order = PATHS if r % 2 == 0 else PATHS[::-1]
        walls, ids = {path: 0.0 for path in PATHS}, {}
        for x in inputs:
            for path in order:
                trace, wall = timed(lambda path=path: run[path](x), model.device)
                walls[path] += wall
                ids[path] = trace.token_ids
            same &= ids["eager"] == ids["compiled"]
        for path in PATHS:
            tok_s[path].append(tokens * len(inputs) / walls[path])
    median = {path: statistics.median(tok_s[path]) for path in PATHS}
    return {"device": str(model.device), "threads": torch.get_num_threads(), "prompts": len(inputs),
            "tokens_per_run": tokens, "repeats": repeats, "eager_tok_s": median["eager"],
            "compiled_tok_s": median["compiled"], "compiled_vs_eager": median["compiled"] / median["eager"],
            "compile_warm_up_s": warm_up_s["compiled"], "eager_warm_up_s": warm_up_s["eager"],
            "same_tokens": same}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.ar_paths", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=128, help="tokens per run")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    if args.tokens < 1 or args.repeats < 1 or args.threads < 1:
        parser.error(f"--tokens, --repeats and --threads must be >= 1, got {args.tokens}, {args.repeats}, "
                     f"{args.threads}")
    torch.set_num_threads(args.threads)
    result = measure(load(args.model, device=args.device, path="eager"), args.tokens, args.repeats)
    print(f"AR on {result['device']}, {result['threads']} thread(s): eager {result['eager_tok_s']:.1f} tok/s, "
          f"compiled {result['compiled_tok_s']:.1f} tok/s ({result['compiled_vs_eager']:.2f}x; compiling took "
          f"{result['compile_warm_up_s']:.1f} s); same tokens: {result['same_tokens']}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
