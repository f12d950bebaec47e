"""The GPU check's `embedded` part: the embedded tiny model on the device, as the app runs it there.

Three things, each measured in one process on one device:
- start-up: `load()` of the embedded model on the path `auto` picks (the graphed passes on CUDA; a smoke check
  takes their CPU stand-in), then the time from the loaded model to its first decoder step's record (a graph
  is captured there on CUDA);
- the race's three lanes (diffusion, hybrid, AR) on the race prompt, each on that path and on the eager one,
  with their tokens compared and their tokens/s side by side (diffusion ÷ AR on each path);
- parity: dg's sampler (torch backend, eager) against transformers' `model.generate()` on the same seed.

    python -m dg.bench.gpu_check --out runs/smoke --smoke   # this part at the CPU's sizes, with the others
"""

import time

import torch

from dg.bench.common import fmt, sync, timed
from dg.config import MODES


def first_step_s(loaded, inputs: dict, config) -> float:
    """Seconds from a loaded model to its first decoder step's record (the run is closed after it)."""
    from dg.modes import stream_mode

    sync(loaded.device)
    start = time.perf_counter()
    records = stream_mode(loaded.model, "diffusion", inputs, config, path=loaded.path)
    try:
        next(record for record in records if record.kind == "step")
    finally:
        records.close()
    sync(loaded.device)
    return time.perf_counter() - start


def lane(loaded, mode: str, inputs: dict, config, seed: int = 0) -> dict:
    """One race lane on the model's path: its tokens, tokens/s and finish."""
    from dg.modes import stream_mode
    from dg.trace import Trace

    torch.manual_seed(seed)
    trace, seconds = timed(lambda: Trace.collect(stream_mode(loaded.model, mode, inputs, config, path=loaded.path)),
                           loaded.device)
    tokens = len(trace.token_ids)
    return {"ids": trace.token_ids, "tokens": tokens, "tok_s": tokens / seconds if seconds else None,
            "wall_s": seconds, "finish": trace.end.finish_reason}


def embedded_part(plan, device) -> tuple[dict, str | None]:
    """Start-up, the race's lanes on the device's path against eager, and parity with `generate()`."""
    # imported here: the check's parent imports this module, and a Python that lacks a part's needs still runs
    from dg.bench.models import run_dg, run_reference
    from dg.examples import SkillExamples
    from dg.loading import EMBEDDED_MODEL, load
    from dg.prompts import build_inputs

    start = time.perf_counter()
    fast = load(EMBEDDED_MODEL, device=device, path="graphs" if plan.smoke else "auto")  # a CPU: the stand-in
    load_s = time.perf_counter() - start
    example = SkillExamples.load().race_example()
    inputs = build_inputs(fast.processor, example.prompt, thinking=example.thinking, device=fast.device)
    config = fast.sampler_config  # the app's: on CUDA the fused sampling step
    if plan.smoke:  # the CPU's sizes: one canvas a lane
        config = config.replace(max_new_tokens=fast.model.config.canvas_length)
    first_s = first_step_s(fast, inputs, config)
    eager = load(EMBEDDED_MODEL, device=device, path="eager")
    lanes = {}
    for mode in MODES:
        on_path, on_eager = lane(fast, mode, inputs, config), lane(eager, mode, inputs, config)
        lanes[mode] = {"path": fast.path, "same_tokens_as_eager": on_path.pop("ids") == on_eager.pop("ids")
                       and on_path["finish"] == on_eager["finish"], **on_path, "eager": on_eager}
    torch_backend = config.replace(backend="torch")  # the backend whose parity with generate() is exact
    reference = run_reference(eager.model, inputs, torch_backend, seed=0)
    ours = run_dg(eager.model, inputs, torch_backend, seed=0)
    parity = {"same_tokens": ours["ids"] == reference["ids"], "tokens": len(ours["ids"]),
              "dg_s": ours["wall_s"], "generate_s": reference["wall_s"]}
    result = {"model": fast.describe(), "path": fast.path, "prompt": example.prompt, "thinking": example.thinking,
              "load_s": load_s, "first_step_s": first_s, "start_up_s": load_s + first_s, "lanes": lanes,
              "diffusion_vs_ar": _ratio(lanes["diffusion"]["tok_s"], lanes["ar"]["tok_s"]),
              "eager_diffusion_vs_ar": _ratio(lanes["diffusion"]["eager"]["tok_s"], lanes["ar"]["eager"]["tok_s"]),
              "generate_parity": parity}
    bad = [mode for mode, row in lanes.items() if not row["same_tokens_as_eager"]]
    failure = (f"{', '.join(bad)} on the {fast.path} path gave other tokens than eager" if bad else None) or (
        None if parity["same_tokens"] else "dg's sampler gave other tokens than generate() on the same seed")
    return result, failure


def _ratio(a, b):
    return a / b if a and b else None


def describe(result: dict) -> list[str]:
    """The part's result as the check prints it."""
    lines = [f"start-up on {result['path']}: load {fmt(result['load_s'])} s, then the first step "
             f"{fmt(result['first_step_s'])} s ({fmt(result['start_up_s'])} s in all)"]
    for mode, row in result["lanes"].items():
        lines.append(f"{mode}: {fmt(row['tok_s'], '.4g')} tok/s on {row['path']}, {fmt(row['eager']['tok_s'], '.4g')} "
                     f"eager; same tokens as eager: {row['same_tokens_as_eager']} ({row['tokens']}, {row['finish']})")
    parity = result["generate_parity"]
    lines.append(f"diffusion ÷ AR: {fmt(result['diffusion_vs_ar'])}x on {result['path']}, "
                 f"{fmt(result['eager_diffusion_vs_ar'])}x eager; dg = generate(): {parity['same_tokens']} "
                 f"({parity['tokens']} tokens)")
    return lines
