"""Eager, graphed and fused passes side by side: ms per decoder step and per AR token (dg.paths "eager",
"graphs" and, where Triton runs, "fused": the graphed passes with every RMSNorm on dg's kernel).

One prompt, each path in turn for `--repeats` rounds (the order alternating): a prefill, then `--steps` decoder
passes over one canvas with self-conditioning from the step before (sampling left out: it is the same on both
paths), then `--tokens` greedy AR tokens (encoder pass + lm_head + argmax). The first pass of each shape is
timed apart: on CUDA the graphed path captures its graph there. The fused path runs on the same model, its
norms swapped in for its rounds and out after them, with graphs of its own (captured with the kernel in them).
Medians, the ratios eager / graphs and graphs / fused measured in the same run, and whether the paths agree
with eager (AR tokens equal, decoder argmax equal, largest logit difference; the fused path's float32 sums run
in another order, so it agrees up to rounding).
On a CPU the graphed path calls the same buffers eagerly: its ratio there is the cost of its buffer and mask
writes and of its full-length sliding layers, not of graphs. One JSON line at the end.

    python -m dg.bench.graphs --device cuda --steps 32 --tokens 64 --repeats 3
    TRITON_INTERPRET=1 python -m dg.bench.graphs --paths eager graphs fused --steps 2 --tokens 4 --repeats 1  # CPU
"""

import argparse
import json
import os
import statistics
from contextlib import contextmanager

import torch

from dg.ar import next_token_logits
from dg.bench.common import sync, timed
from dg.bench.models import bench_prompts
from dg.loading import load
from dg.passes import split_inputs
from dg.paths import open_passes
from dg.prompts import build_inputs

PATHS = ("eager", "graphs", "fused")


def default_paths(device) -> tuple:
    """Every path where Triton's kernels run (CUDA, or its interpreter on a CPU), else eager and graphs."""
    runs_triton = torch.device(device).type == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"
    return PATHS if runs_triton else PATHS[:2]


@contextmanager
def passes_on(model, path: str, tokens: int):
    """A round's passes on `path` for `tokens` positions: "fused" is the graphed path with the model's norms
    fused for the round only (its captures come from a pool of their own, dg.graphs.graphed_passes)."""
    if path != "fused":
        with open_passes(model, path, tokens) as passes:
            yield passes
        return
    from dg.kernels.fused_norms import fuse_norms, unfuse_norms

    fuse_norms(model)
    try:
        with open_passes(model, "graphs", tokens) as passes:
            yield passes
    finally:
        unfuse_norms(model)


def random_canvas(model) -> torch.Tensor:
    """The canvas every round decodes: random ids, the same each time."""
    return torch.randint(0, model.config.text_config.vocab_size, (1, model.config.canvas_length),
                         generator=torch.Generator().manual_seed(0)).to(model.device)


def one_round(model, inputs: dict, path: str, steps: int, tokens: int) -> dict:
    """One run's passes on `path`: seconds of the first and the later decoder steps and AR tokens, and outputs."""
    ids, extra = split_inputs(inputs)
    length, device = model.config.canvas_length, model.device
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype
    canvas = random_canvas(model)
    with torch.no_grad(), passes_on(model, path, ids.shape[1] + max(tokens, length)) as passes:
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


LAUNCHES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch")


def profile_passes(model, inputs: dict, path: str, passes_each: int = 2) -> dict:
    """torch.profiler over `passes_each` decoder steps and as many AR tokens on `path`, after one of each
    unprofiled (a graph is captured there): per pass, the wall ms, the host's launch calls (a kernel or a
    whole graph each) and, on CUDA, the ms the GPU was busy and that as a share of the wall time."""
    from torch.profiler import ProfilerActivity, profile

    ids, extra = split_inputs(inputs)
    device, length = model.device, model.config.canvas_length
    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    canvas = random_canvas(model)
    embed_dtype = model.model.decoder.embed_tokens.weight.dtype

    def profiled(fn) -> dict:
        sync(device)
        with profile(activities=activities) as prof:
            _, seconds = timed(fn, device)
        events = prof.key_averages()
        launches = sum(e.count for e in events if e.key in LAUNCHES)
        busy_ms = sum(e.self_device_time_total for e in events) / 1e3 if cuda else None
        wall_ms = seconds * 1e3 / passes_each
        return {"wall_ms": wall_ms, "launches": launches / passes_each if cuda else None,
                "host_ops": sum(e.count for e in events) / passes_each,
                "gpu_busy_ms": None if busy_ms is None else busy_ms / passes_each,
                "gpu_busy_share": None if busy_ms is None else busy_ms / passes_each / wall_ms}

    with torch.no_grad(), passes_on(model, path, ids.shape[1] + max(passes_each + 1, length)) as passes:
        hidden = passes.prefill(ids, extra)
        logits = passes.decode(canvas, None)
        logits = passes.decode(canvas, logits.to(embed_dtype))  # both decoder shapes seen (captured) first

        def steps():
            out = logits
            for _ in range(passes_each):
                out = passes.decode(canvas, out.to(embed_dtype))

        step = profiled(steps)
        token = next_token_logits(model, passes.encode(
            next_token_logits(model, hidden[:, -1]).argmax(-1, keepdim=True))[:, -1]).argmax(-1, keepdim=True)

        def tokens():
            nonlocal token
            for _ in range(passes_each):
                token = next_token_logits(model, passes.encode(token)[:, -1]).argmax(-1, keepdim=True)

        return {"step": step, "token": profiled(tokens)}


def measure(loaded, steps: int, tokens: int, repeats: int, paths: tuple = ("eager", "graphs")) -> dict:
    """`compare_paths` on the first bench prompt, built with the checkpoint's processor."""
    p = bench_prompts()[0]
    inputs = build_inputs(loaded.processor, p["text"], thinking=p["thinking"], device=loaded.model.device)
    return compare_paths(loaded.model, inputs, steps, tokens, repeats, paths)


def compare_paths(model, inputs: dict, steps: int, tokens: int, repeats: int,
                  paths: tuple = ("eager", "graphs"), profiled: bool = False, on_round=None) -> dict:
    """Medians over repeats of each path's times, the eager / graphs (and graphs / fused) ratios, and each path's
    agreement with eager; `profiled`: each path's `profile_passes` too, under "profile". `on_round(result)`, when
    given, gets the result so far after every repeat and every profiled path (a caller cut short keeps it)."""
    if paths[:2] != ("eager", "graphs") or not set(paths) <= set(PATHS):
        raise ValueError(f"paths must be eager, graphs, then optionally fused; got {', '.join(paths)}")
    rounds = {path: [] for path in paths}
    for r in range(repeats):
        for path in paths if r % 2 == 0 else paths[::-1]:
            rounds[path].append(one_round(model, inputs, path, steps, tokens))
        result = summarise(model, inputs, rounds, steps, tokens)
        if on_round is not None:
            on_round(result)
    if profiled:
        result["profile"] = {}
        for path in paths:
            result["profile"][path] = profile_passes(model, inputs, path)
            if on_round is not None:
                on_round(result)
    return result


def summarise(model, inputs: dict, rounds: dict, steps: int, tokens: int) -> dict:
    """`compare_paths`'s result from the rounds so far ({path: [one_round's result, ...]}, every path run)."""
    paths = tuple(rounds)
    keys = ("first_step_ms", "step_ms", "first_token_ms", "token_ms")
    median = {path: {k: statistics.median(x[k] for x in rounds[path]) for k in keys} for path in paths}
    eager, graphs = rounds["eager"][0], rounds["graphs"][0]
    result = {"device": str(model.device), "threads": torch.get_num_threads(), "paths": list(paths),
              "prompt_tokens": inputs["input_ids"].shape[1], "canvas": model.config.canvas_length, "steps": steps,
              "tokens": tokens, "repeats": len(rounds["eager"]),
              **{f"{path}_{k}": median[path][k] for path in paths for k in keys},
              "step_eager_vs_graphs": median["eager"]["step_ms"] / median["graphs"]["step_ms"],
              "token_eager_vs_graphs": median["eager"]["token_ms"] / median["graphs"]["token_ms"],
              "same_ar_tokens": all(x["ar_ids"] == eager["ar_ids"] for x in rounds["eager"] + rounds["graphs"]),
              **agreement(eager, graphs)}
    if "fused" in paths:
        fused = rounds["fused"][0]
        result |= {"step_graphs_vs_fused": median["graphs"]["step_ms"] / median["fused"]["step_ms"],
                   "token_graphs_vs_fused": median["graphs"]["token_ms"] / median["fused"]["token_ms"],
                   "fused_same_ar_tokens": all(x["ar_ids"] == eager["ar_ids"] for x in rounds["fused"]),
                   **{f"fused_{k}": v for k, v in agreement(eager, fused).items()}}
    return result


def agreement(eager: dict, other: dict) -> dict:
    """Whether a path's last decoder logits pick eager's argmax, and how far apart they are."""
    return {"same_decoder_argmax": bool(torch.equal(eager["logits"].argmax(-1), other["logits"].argmax(-1))),
            "max_logit_difference": float((eager["logits"] - other["logits"]).abs().max())}


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.graphs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--steps", type=int, default=16, help="decoder steps timed per round")
    parser.add_argument("--tokens", type=int, default=32, help="AR tokens per round")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=None,
                        help="eager and graphs, then optionally fused (default: fused too where Triton runs)")
    args = parser.parse_args(argv)
    if min(args.steps, args.repeats, args.threads) < 1 or args.tokens < 2:
        parser.error(f"--steps, --repeats and --threads must be >= 1 and --tokens >= 2, got {args.steps}, "
                     f"{args.repeats}, {args.threads}, {args.tokens}")
    torch.set_num_threads(args.threads)
    loaded = load(args.model, device=args.device, path="eager")
    paths = tuple(args.paths) if args.paths else default_paths(loaded.device)
    if "fused" in paths:
        from dg.loading import check_fused

        try:
            check_fused(loaded.device)
        except ValueError as err:
            parser.error(str(err))
    try:
        result = measure(loaded, args.steps, args.tokens, args.repeats, paths)
    except ValueError as err:
        parser.error(str(err))
    print(f"{result['device']}, {result['threads']} thread(s): decoder step eager {result['eager_step_ms']:.2f} ms, "
          f"graphs {result['graphs_step_ms']:.2f} ms ({result['step_eager_vs_graphs']:.2f}x); AR token eager "
          f"{result['eager_token_ms']:.2f} ms, graphs {result['graphs_token_ms']:.2f} ms "
          f"({result['token_eager_vs_graphs']:.2f}x); same AR tokens: {result['same_ar_tokens']}")
    if "fused" in paths:
        print(f"fused: decoder step {result['fused_step_ms']:.2f} ms ({result['step_graphs_vs_fused']:.2f}x graphs), "
              f"AR token {result['fused_token_ms']:.2f} ms ({result['token_graphs_vs_fused']:.2f}x graphs); same AR "
              f"tokens as eager: {result['fused_same_ar_tokens']}, largest logit difference "
              f"{result['fused_max_logit_difference']:.3g}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
