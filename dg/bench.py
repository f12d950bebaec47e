"""Benchmarks: dg's sampler vs transformers' `generate()` vs AR mode, and the sampling step alone.

    python -m dg.bench                         # embedded tiny model, one prompt per skill
    python -m dg.bench --repeats 5 --report runs/bench.html
    python -m dg.bench --device-check          # full-size random DiffusionGemma 26B-A4B, needs CUDA

Prints a table, writes a plotly HTML report, and ends with one JSON line. Until the embedded model
(`assets/diffusiongemma-tiny`) exists, a random-weights tiny checkpoint built with
`dg.testing.tiny_random_checkpoint` stands in (timings are still real; TPF is then that of a model
that never settles). Speedup of diffusion over AR ≈ TPF / (decoder step cost / AR token cost): both
factors are reported.
"""

import argparse
import json
import math
import random
import statistics
import time
from pathlib import Path

import torch

from dg.config import SamplerConfig

RUNS = Path(__file__).resolve().parent.parent / "runs"
FALLBACK_CHECKPOINT = RUNS / "bench-tiny-random"
STEP_SHAPE = (1, 256, 262_144)  # (B, C, V) of the release: one canvas over the real vocabulary


# --- setup ------------------------------------------------------------------------------------------
def sync(device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def timed(fn, device):
    """(result, seconds) with the device drained before and after."""
    sync(device)
    start = time.perf_counter()
    result = fn()
    sync(device)
    return result, time.perf_counter() - start


def bench_checkpoint(model: str | None = None) -> tuple[str, str]:
    """(path, what it is): the given model, the embedded tiny one, or a cached random stand-in."""
    from dg.loading import EMBEDDED_MODEL

    if model is not None:
        return str(model), "given checkpoint"
    if (EMBEDDED_MODEL / "config.json").exists():
        return str(EMBEDDED_MODEL), "embedded tiny model"
    if not (FALLBACK_CHECKPOINT / "config.json").exists():
        from dg.testing import tiny_random_checkpoint
        from dg.tiny.skills import corpus
        from dg.tiny.tokenizer import TokenizerConfig, build_processor

        processor = build_processor(corpus(0, 300), TokenizerConfig(vocab_size=400, corpus_size=300))
        tiny_random_checkpoint(FALLBACK_CHECKPOINT, processor, canvas_length=64)
    return str(FALLBACK_CHECKPOINT), "random-weights tiny stand-in (embedded model not built yet)"


def bench_prompts(seed: int = 0) -> list[dict]:
    """One fixed prompt per skill of the tiny suite (the picture one carries its image)."""
    from dg.tiny.skills import SKILLS, make_example

    prompts = []
    for i, skill in enumerate(SKILLS):
        example = make_example(skill, random.Random(seed + i))
        prompts.append({"skill": skill, "text": example.prompt, "image": example.image})
    return prompts


# --- one run of each mode ---------------------------------------------------------------------------
def run_reference(model, inputs, config: SamplerConfig, seed: int) -> dict:
    """transformers' `generate()` with the same knobs and seed."""
    torch.manual_seed(seed)
    out, wall = timed(lambda: model.generate(**inputs, **config.generate_kwargs()), model.device)
    new = out.sequences[0, inputs["input_ids"].shape[1]:]
    pad = model.generation_config.pad_token_id
    tokens = int((new != pad).sum()) if pad is not None else int(new.numel())
    steps = tokens / float(out.tokens_per_forward[0]) if tokens else 0
    return {"wall_s": wall, "tokens": tokens, "ids": new.tolist(), "decoder_steps": round(steps)}


def run_dg(model, inputs, config: SamplerConfig, seed: int) -> dict:
    from dg.sampler import generate_diffusion

    torch.manual_seed(seed)
    trace, wall = timed(lambda: generate_diffusion(model, inputs, config), model.device)
    ids = [int(i) for c in trace.canvases for i in c.committed]
    return {**trace.metrics(), "wall_s": wall, "ids": ids}


def run_ar(model, inputs, n_tokens: int) -> dict:
    """Greedy AR with the KV cache for exactly `n_tokens` (EOS ignored: same token count basis)."""
    from dg.ar import generate_ar

    trace, wall = timed(lambda: generate_ar(model, inputs, max(n_tokens, 1), eos_token_ids=()), model.device)
    return {**trace.metrics(), "wall_s": wall}


# --- the model-level benchmark ----------------------------------------------------------------------
def bench_models(loaded, prompts: list[dict], repeats: int = 3, max_new_tokens: int | None = None,
                 seed: int = 0, backend: str = "torch") -> dict:
    """Interleave generate(), dg diffusion and dg AR on every prompt, `repeats` times, after a warm-up.

    generate() and dg run first in alternate repeats so drift (thermal, caches) hits both alike; each
    prompt keeps its seed across repeats so every repeat does the same work.
    """
    from dg.prompts import build_inputs

    model = loaded.model
    canvas = model.config.canvas_length
    config = loaded.sampler_config.replace(max_new_tokens=max_new_tokens or 2 * canvas, backend=backend)
    inputs = [build_inputs(loaded.processor, p["text"], images=p["image"], device=model.device) for p in prompts]

    warm = run_dg(model, inputs[0], config, seed)  # warm-up: allocator, kernels, caches
    run_reference(model, inputs[0], config, seed)
    run_ar(model, inputs[0], warm["tokens"])

    runs = []  # runs[r][p] = {"reference": ..., "dg": ..., "ar": ...}
    for r in range(repeats):
        row = []
        for p, prompt_inputs in enumerate(inputs):
            s = seed + p
            if r % 2 == 0:
                ref, dg = run_reference(model, prompt_inputs, config, s), run_dg(model, prompt_inputs, config, s)
            else:
                dg, ref = run_dg(model, prompt_inputs, config, s), run_reference(model, prompt_inputs, config, s)
            row.append({"reference": ref, "dg": dg, "ar": run_ar(model, prompt_inputs, dg["tokens"])})
        runs.append(row)
    return summarise(runs, prompts, config)


def _per_repeat(runs, fn) -> float:
    return statistics.median(fn(row) for row in runs)


def _total(row, mode, key) -> float:
    return sum(run[mode][key] or 0.0 for run in row)


def summarise(runs: list, prompts: list[dict], config: SamplerConfig) -> dict:
    """Ratios from per-repeat totals over the prompt set, median over repeats; per-prompt medians."""
    def tok_s(row, mode):
        wall = _total(row, mode, "wall_s")
        return _total(row, mode, "tokens") / wall if wall > 0 else 0.0

    first = runs[0]
    denominators = sum(run["dg"]["total_steps"] + run["dg"]["canvases"] - 1 for run in first)
    tpf = _total(first, "dg", "tokens") / denominators if denominators > 0 else 0.0
    step_cost = _per_repeat(runs, lambda row: _total(row, "dg", "wall_s") / max(denominators, 1))
    ar_token_cost = _per_repeat(runs, lambda row: _total(row, "ar", "wall_s") / max(_total(row, "ar", "tokens"), 1))
    summary = {
        "dg_vs_reference_time_ratio": _per_repeat(
            runs, lambda row: _total(row, "dg", "wall_s") / _total(row, "reference", "wall_s")),
        "diffusion_vs_ar_speedup": _per_repeat(runs, lambda row: tok_s(row, "dg") / tok_s(row, "ar")),
        "tpf": tpf,
        "decoder_step_vs_ar_token_cost": step_cost / ar_token_cost,
        "decoder_step_ms": 1e3 * step_cost,
        "ar_token_ms": 1e3 * ar_token_cost,
        "dg_matches_generate": all(run["dg"]["ids"] == run["reference"]["ids"] for row in runs for run in row),
        "repeats": len(runs),
        "prompts": len(prompts),
        "max_new_tokens": config.max_new_tokens,
        "backend": config.backend,
    }
    return {"summary": summary, "rows": _rows(runs, prompts)}


def _rows(runs: list, prompts: list[dict]) -> list[dict]:
    """One row per (prompt, mode): medians over repeats of wall time and throughput, plus counts."""
    rows = []
    for p, prompt in enumerate(prompts):
        for mode in ("dg", "reference", "ar"):
            results = [row[p][mode] for row in runs]
            wall = statistics.median(r["wall_s"] for r in results)
            last = results[0]
            ttft = [r["ttft_s"] for r in results if r.get("ttft_s") is not None]
            rows.append({
                "skill": prompt["skill"], "mode": {"dg": "dg diffusion", "reference": "generate()", "ar": "dg AR"}[mode],
                "wall_s": wall, "tokens": last["tokens"], "effective_tok_s": last["tokens"] / wall if wall else 0.0,
                "tpf": last.get("tpf"), "nfe": last.get("nfe"), "ttft_s": statistics.median(ttft) if ttft else None,
                "effective_steps": last.get("effective_steps"),
            })
    return rows


# --- the sampling step alone ------------------------------------------------------------------------
def memory_bandwidth(device, megabytes: int = 1024) -> float:
    """Measured copy bandwidth in GB/s (bytes read + written), the yardstick for the step's GB/s."""
    n = megabytes * 2**20 // 4
    src = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = [timed(lambda: dst.copy_(src), device)[1] for _ in range(3)]
    return 2 * src.numel() * 4 / min(times) / 1e9


def bench_sampling_step(device, shape=STEP_SHAPE, repeats: int | None = None, bandwidth_mb: int | None = None) -> dict:
    """torch path vs Triton path on one canvas of logits; GB/s counts the floor traffic of the step:
    reading the logits and writing the scaled logits once (2 x B x C x V x itemsize bytes).

    On CUDA both bf16 and float32 logits (the decoder head emits float32 after the softcap); on CPU
    float32 and the torch path only.
    """
    device = torch.device(device)
    on_cuda = device.type == "cuda"
    repeats = repeats or (10 if on_cuda else 2)
    result = {"shape": list(shape), "device": str(device),
              "bandwidth_gb_s": memory_bandwidth(device, bandwidth_mb or (1024 if on_cuda else 256)), "paths": {}}
    for dtype in (torch.bfloat16, torch.float32) if on_cuda else (torch.float32,):
        for name, fn, nbytes in _step_paths(device, shape, dtype):
            fn()  # warm-up (compiles the kernels)
            seconds = statistics.median(timed(fn, device)[1] for _ in range(repeats))
            result["paths"][name] = {"ms": 1e3 * seconds, "gb_s": nbytes / seconds / 1e9,
                                     "fraction_of_bandwidth": nbytes / seconds / 1e9 / result["bandwidth_gb_s"]}
    if not on_cuda:
        result["note"] = "no CUDA device: torch path only (Triton runs on CPU only in its interpreter)"
    return result


def _step_paths(device, shape, dtype):
    from dg.kernels.sampling import sample_step_torch

    generator = torch.Generator(device=device).manual_seed(0)
    logits = (torch.randn(shape, generator=generator, device=device) * 3).to(dtype)
    canvas = torch.zeros(shape[:2], dtype=torch.long, device=device)
    nbytes = 2 * logits.numel() * logits.element_size()
    label = str(dtype).removeprefix("torch.")
    yield f"torch {label}", lambda: sample_step_torch(logits, 0.6, canvas, 0.1), nbytes
    if device.type == "cuda":
        from dg.kernels.fused_sampling import sample_step_triton

        yield f"triton {label}", lambda: sample_step_triton(logits, 0.6, canvas, 0.1, seed=0), nbytes


# --- printing and the CLI ---------------------------------------------------------------------------
def _fmt(value, spec=".3g") -> str:
    if value is None:
        return "-"
    return format(value, spec) if isinstance(value, float) else str(value)


def format_table(rows: list[dict], columns: list[str]) -> str:
    cells = [[_fmt(row.get(c)) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def final_json(result: dict) -> dict:
    """The one-line summary: the three headline figures first, then the rest."""
    out = dict(result.get("models", {}).get("summary", {}))
    if "step" in result:
        out["sampling_step"] = {k: v for k, v in result["step"].items() if k != "shape"}
    if "device_check" in result:
        out["device_check"] = result["device_check"]["summary"]
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in out.items()}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dg.bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: the embedded tiny model)")
    parser.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    parser.add_argument("--repeats", type=int, default=3, help="timed repeats per prompt (after a warm-up)")
    parser.add_argument("--prompts", type=int, default=None, help="use only the first N prompts")
    parser.add_argument("--max-new-tokens", type=int, default=None, help="default: two canvases")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip-step", action="store_true", help="skip the sampling-step benchmark")
    parser.add_argument("--device-check", action="store_true",
                        help="full-size random DiffusionGemma 26B-A4B on CUDA instead of the tiny model")
    parser.add_argument("--report", default=str(RUNS / "bench.html"), help="plotly HTML report path")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    return args


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    result = {"threads": torch.get_num_threads(), "torch": torch.__version__}
    if args.device_check:
        from dg.bench_device import device_check, format_device_check

        result["device_check"] = device_check(seed=args.seed)
        print(format_device_check(result["device_check"]))
    else:
        result["models"] = run_model_bench(args)
    if not args.skip_step:
        result["step"] = bench_sampling_step(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        print(format_step(result["step"]))
    from dg.bench_report import write_report

    print(f"\nreport: {write_report(result, args.report)}")
    line = final_json(result)
    print(json.dumps(line))
    return line


def run_model_bench(args) -> dict:
    from dg.loading import load

    path, what = bench_checkpoint(args.model)
    loaded = load(path, device=args.device)
    prompts = bench_prompts(args.seed)[: args.prompts]
    print(f"model: {loaded.describe()} [{what}]; threads {torch.get_num_threads()}; "
          f"{len(prompts)} prompts x {args.repeats} repeats, interleaved, after a warm-up")
    models = bench_models(loaded, prompts, args.repeats, args.max_new_tokens, args.seed)
    models["model"] = {"path": path, "what": what, "describe": loaded.describe()}
    print(format_table(models["rows"], ["skill", "mode", "wall_s", "tokens", "effective_tok_s", "tpf", "nfe",
                                        "ttft_s", "effective_steps"]))
    s = models["summary"]
    print(f"dg / generate() time {s['dg_vs_reference_time_ratio']:.3f} (same tokens: {s['dg_matches_generate']}); "
          f"diffusion vs AR speedup {s['diffusion_vs_ar_speedup']:.3f} = TPF {s['tpf']:.3f} / "
          f"(step {s['decoder_step_ms']:.2f} ms / AR token {s['ar_token_ms']:.2f} ms "
          f"= {s['decoder_step_vs_ar_token_cost']:.3f})")
    return models


def format_step(step: dict) -> str:
    rows = [{"path": name, **values} for name, values in step["paths"].items()]
    head = (f"\nsampling step alone: (B, C, V) = {tuple(step['shape'])} on {step['device']}, "
            f"measured copy bandwidth {step['bandwidth_gb_s']:.1f} GB/s")
    note = f"\n({step['note']})" if "note" in step else ""
    return head + "\n" + format_table(rows, ["path", "ms", "gb_s", "fraction_of_bandwidth"]) + note


if __name__ == "__main__":
    main()
