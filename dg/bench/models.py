"""The model benchmark: dg's sampler vs transformers' `generate()` vs AR mode, on real prompts.

One fixed prompt per skill where diffusion should win (`BENCH_SKILLS`); generate(), dg and diffusers'
`DiffusionGemmaPipeline` (`dg.bench.pipeline`) interleaved after a warm-up, same seed per prompt, so dg's tokens
must match generate()'s (the pipeline draws its own random numbers: its answers are scored instead).
Speedup of diffusion over AR ≈ TPF / (decoder step cost / AR token cost): both factors are reported; AR runs
on the loaded model's path (`dg.paths.choose_path`), as the app's do. The model is the embedded one
(`assets/diffusiongemma-tiny`) unless `--model` names another.

    python -m dg.bench --repeats 5 --report runs/bench.html
"""

import random
import statistics
from pathlib import Path

import torch

from dg.bench.common import format_table, timed
from dg.config import SamplerConfig
from dg.passes import pad_token_id

RUNS = Path(__file__).resolve().parents[2] / "runs"


def bench_checkpoint(model: str | None = None) -> tuple[str, str]:
    """(path, what it is): the given model, else the embedded tiny one."""
    from dg.loading import EMBEDDED_MODEL

    if model is not None:
        return str(model), "given checkpoint"
    return str(EMBEDDED_MODEL), "embedded tiny model"


# Where diffusion should win: long, fully determined answers (json, story), a puzzle whose cells settle
# in any order (sudoku) and a thinking trace over two canvases (arithmetic). Pictures are left out:
# their one-sentence answers leave little to parallelise.
BENCH_SKILLS = (("json", False), ("story", False), ("sudoku", False), ("arithmetic", True))


def bench_prompts(seed: int = 0) -> list[dict]:
    """One fixed held-out prompt per skill of `BENCH_SKILLS` (thinking on where the skill has a trace)."""
    from dg.tiny.skills import make_example

    prompts = []
    for i, (skill, thinking) in enumerate(BENCH_SKILLS):
        example = make_example(skill, random.Random(seed + i), thinking=thinking)
        prompts.append({"skill": skill, "text": example.prompt, "image": example.image, "thinking": thinking,
                        "example": example})
    return prompts


def run_reference(model, inputs, config: SamplerConfig, seed: int) -> dict:
    """transformers' `generate()` with the same knobs and seed."""
    torch.manual_seed(seed)
    out, wall = timed(lambda: model.generate(**inputs, **config.generate_kwargs()), model.device)
    new = out.sequences[0, inputs["input_ids"].shape[1]:]
    pad = pad_token_id(model)
    tokens = int((new != pad).sum()) if pad is not None else int(new.numel())
    steps = tokens / float(out.tokens_per_forward[0]) if tokens else 0
    return {"wall_s": wall, "tokens": tokens, "ids": new.tolist(), "decoder_steps": round(steps)}


def run_dg(model, inputs, config: SamplerConfig, seed: int) -> dict:
    from dg.sampler import generate_diffusion

    torch.manual_seed(seed)
    trace, wall = timed(lambda: generate_diffusion(model, inputs, config), model.device)
    ids = [int(i) for c in trace.canvases for i in c.committed]
    return {**trace.metrics(), "wall_s": wall, "ids": ids}


def run_ar(model, inputs, n_tokens: int, path: str = "eager") -> dict:
    """Greedy AR with the KV cache for exactly `n_tokens` (EOS ignored: same token count basis), on `path`
    (the loaded model's: what the app's AR runs take)."""
    from dg.ar import generate_ar

    config = SamplerConfig(max_new_tokens=max(n_tokens, 1))
    trace, wall = timed(lambda: generate_ar(model, inputs, config, eos_token_ids=(), path=path), model.device)
    return {**trace.metrics(), "wall_s": wall}


def run_hybrid(model, inputs, config: SamplerConfig, seed: int) -> dict:
    from dg.hybrid import generate_hybrid

    torch.manual_seed(seed)
    trace, wall = timed(lambda: generate_hybrid(model, inputs, config), model.device)
    return {**trace.metrics(), "wall_s": wall, "ids": trace.token_ids}


def greedy_ids(model, inputs, config: SamplerConfig) -> list[int]:
    """Greedy AR's reply up to its EOS: what hybrid must give token for token."""
    from dg.ar import generate_ar

    return generate_ar(model, inputs, config).token_ids


def bench_models(loaded, prompts: list[dict], repeats: int = 3, max_new_tokens: int | None = None,
                 seed: int = 0, backend: str = "torch") -> dict:
    """Interleave generate(), dg diffusion, diffusers' pipeline and dg AR on every prompt, `repeats` times,
    after a warm-up.

    generate(), dg and the pipeline run in reversed order in alternate repeats so drift (thermal, caches)
    hits them alike; each prompt keeps its seed across repeats so every repeat does the same work.
    """
    from dg.bench.pipeline import build_pipeline, run_pipeline
    from dg.prompts import build_inputs

    model = loaded.model
    canvas = model.config.canvas_length
    config = loaded.sampler_config.replace(max_new_tokens=max_new_tokens or 2 * canvas, backend=backend)
    inputs = [build_inputs(loaded.processor, p["text"], images=p["image"], thinking=p.get("thinking", False),
                           device=model.device) for p in prompts]
    pipes = {thinking: build_pipeline(loaded, thinking) for thinking in (False, True)}
    diffusion_runs = {
        "reference": lambda p, s: run_reference(model, inputs[p], config, s),
        "dg": lambda p, s: run_dg(model, inputs[p], config, s),
        "diffusers": lambda p, s: run_pipeline(pipes[prompts[p].get("thinking", False)], prompts[p], config,
                                               loaded.eos_token_ids, s),
    }

    warm = run_dg(model, inputs[0], config, seed)  # warm-up: allocator, kernels, caches
    run_reference(model, inputs[0], config, seed)
    diffusion_runs["diffusers"](0, seed)
    run_ar(model, inputs[0], warm["tokens"], loaded.path)
    run_hybrid(model, inputs[0], config, seed)
    greedy = [greedy_ids(model, prompt_inputs, config) for prompt_inputs in inputs]

    runs = []  # runs[r][p] = {"reference": ..., "dg": ..., "diffusers": ..., "ar": ..., ...}
    for r in range(repeats):
        row = []
        for p, prompt_inputs in enumerate(inputs):
            s = seed + p
            order = list(diffusion_runs) if r % 2 == 0 else list(reversed(diffusion_runs))
            run = {mode: diffusion_runs[mode](p, s) for mode in order}
            hybrid = run_hybrid(model, prompt_inputs, config, s)
            row.append({**run, "ar": run_ar(model, prompt_inputs, run["dg"]["tokens"], loaded.path),
                        "hybrid": hybrid, "ar_hybrid": run_ar(model, prompt_inputs, hybrid["tokens"], loaded.path),
                        "hybrid_equals_ar": hybrid["ids"] == greedy[p]})
        runs.append(row)
    result = summarise(runs, prompts, config)
    result["summary"]["answers_right"] = answers_right(loaded, runs[0], prompts)
    return result


def answers_right(loaded, row: list[dict], prompts: list[dict]) -> dict:
    """How many of the prompts' answers dg diffusion and diffusers' pipeline got right (the first repeat)."""
    from dg.prompts import decode_reply
    from dg.tiny import skills

    pad = loaded.pad_token_id

    def right(mode):
        return sum(skills.score(prompt["example"], decode_reply(loaded.tokenizer, [
            t for t in run[mode]["ids"] if t != pad]).answer) for run, prompt in zip(row, prompts))
    return {"dg": right("dg"), "diffusers": right("diffusers"), "of": len(prompts)}


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
        # the same ratio prompt by prompt: where the total comes from (one slow skill can dominate it)
        "speedup_by_skill": {prompt["skill"]: _per_repeat(runs, lambda row, p=p: row[p]["ar"]["wall_s"] / row[p]["dg"]["wall_s"]
                                                          if row[p]["dg"]["wall_s"] > 0 else 0.0)
                             for p, prompt in enumerate(prompts)},
        "hybrid_vs_ar_speedup": _per_repeat(runs, lambda row: tok_s(row, "hybrid") / tok_s(row, "ar_hybrid")),
        "hybrid_vs_diffusion_speed": _per_repeat(runs, lambda row: tok_s(row, "hybrid") / tok_s(row, "dg")),
        "hybrid_tokens_per_round": _total(first, "hybrid", "tokens") / max(_total(first, "hybrid", "rounds"), 1),
        "hybrid_equals_ar": sum(run["hybrid_equals_ar"] for row in runs for run in row) / sum(len(row) for row in runs),
        "hybrid_speedup_by_skill": {
            prompt["skill"]: _per_repeat(runs, lambda row, p=p: row[p]["ar_hybrid"]["wall_s"] / row[p]["hybrid"]["wall_s"]
                                         if row[p]["hybrid"]["wall_s"] > 0 else 0.0)
            for p, prompt in enumerate(prompts)},
        "dg_vs_diffusers_time_ratio": _per_repeat(
            runs, lambda row: _total(row, "dg", "wall_s") / _total(row, "diffusers", "wall_s")),
        "diffusers_decoder_steps": _total(first, "diffusers", "decoder_steps"),
        "dg_decoder_steps": _total(first, "dg", "total_steps"),
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
        for mode in ("dg", "reference", "diffusers", "ar", "hybrid"):
            results = [row[p][mode] for row in runs]
            wall = statistics.median(r["wall_s"] for r in results)
            last = results[0]
            ttft = [r["ttft_s"] for r in results if r.get("ttft_s") is not None]
            rows.append({
                "skill": prompt["skill"], "mode": {"dg": "dg diffusion", "reference": "generate()", "ar": "dg AR",
                                              "hybrid": "dg hybrid", "diffusers": "diffusers pipeline"}[mode],
                "wall_s": wall, "tokens": last["tokens"], "effective_tok_s": last["tokens"] / wall if wall else 0.0,
                "tpf": last.get("tpf"), "nfe": last.get("nfe"), "ttft_s": statistics.median(ttft) if ttft else None,
                "effective_steps": last.get("effective_steps"),
            })
    return rows


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
    right = s["answers_right"]
    print(f"dg / diffusers' DiffusionGemmaPipeline time {s['dg_vs_diffusers_time_ratio']:.3f} (decoder steps "
          f"{s['dg_decoder_steps']:.0f} vs {s['diffusers_decoder_steps']:.0f}); answers right: dg {right['dg']}, "
          f"diffusers {right['diffusers']} of {right['of']}")
    print(f"hybrid vs AR speedup {s['hybrid_vs_ar_speedup']:.3f}, vs diffusion {s['hybrid_vs_diffusion_speed']:.3f}; "
          f"{s['hybrid_tokens_per_round']:.1f} tokens per round; equal to greedy AR on {s['hybrid_equals_ar']:.0%}")
    if args.three_term:
        models["three_term"] = three_term(loaded, args.three_term, args.seed)
        t = models["three_term"]
        print(f"sums of three numbers with the trace ({t['n']}): right diffusion {t['accuracy']['diffusion']:.0%}, "
              f"AR {t['accuracy']['ar']:.0%}, hybrid {t['accuracy']['hybrid']:.0%}; hybrid vs AR speedup "
              f"{t['hybrid_vs_ar_speedup']:.2f}")
    return models


def three_term(loaded, n: int, seed: int = 0) -> dict:
    """Accuracy of diffusion, AR and hybrid on n held-out sums of three numbers with the trace (thinking on),
    and hybrid's speed over AR's on them (total time, the same tokens)."""
    from dg.prompts import build_inputs, decode_reply
    from dg.tiny import skills

    model, config = loaded.model, loaded.sampler_config
    right = {"diffusion": [], "ar": [], "hybrid": []}
    wall = {"ar": 0.0, "hybrid": 0.0}
    for i, example in enumerate(skills.sample_examples(seed + 1000, n, ("arithmetic",), add_terms=(3,))):
        inputs = build_inputs(loaded.processor, example.prompt, thinking=True, device=model.device)
        ar_ids, ar_wall = timed(lambda: greedy_ids(model, inputs, config), model.device)
        hybrid = run_hybrid(model, inputs, config, seed + i)
        diffusion = run_dg(model, inputs, config, seed + i)
        wall["ar"] += ar_wall
        wall["hybrid"] += hybrid["wall_s"]
        for mode, ids in (("diffusion", diffusion["ids"]), ("ar", ar_ids), ("hybrid", hybrid["ids"])):
            pad = pad_token_id(model)
            reply = decode_reply(loaded.tokenizer, [t for t in ids if t != pad]).answer
            right[mode].append(skills.score(example, reply))
    return {"n": n, "accuracy": {mode: sum(r) / n for mode, r in right.items()},
            "hybrid_vs_ar_speedup": wall["ar"] / wall["hybrid"] if wall["hybrid"] > 0 else 0.0}
