"""The prepared GPU check: one command, at most 6 minutes on one H100/H200, one JSON file.

    bash scripts/gpu-check.sh runs/gpu-check --wheels DIR    # python -m dg.bench.gpu_check --out runs/gpu-check
    python -m dg.bench.gpu_check --out runs/smoke --smoke    # the same code on the CPU at tiny shapes

Seven parts, each in a process of its own under its own time limit, printed with its result (a crash, an
out-of-memory or a hang is recorded and the next part still runs, on a clean GPU; the graphs part writes
its figures as it goes, so one cut at its limit still reports what it measured; a part whose imports
this Python lacks is not run, and one line says what to carry):
1. `kernel_tests`: `pytest tests/kernels` with TRITON_INTERPRET unset: the Triton kernels compiled;
2. `sampling_step`: the fused Triton step vs the torch reference at (B, C, V) = (1, 256, 262144), bf16 and
   float32, through the sampler's dispatcher: ms per call, GB/s of the step's floor traffic against the
   datasheet and the measured copy bandwidth, whether both accept the same positions and tokens, and
   the ms of the sampler's per-step record of each;
3. `sampler`: DiffusionGemma 26B-A4B, random weights (`dg.bench.device`), 12 steps per canvas: tokens/s,
   ms per step, and the step split into decoder forward / sampling / recording; AR on the same weights;
4. `graphs`: the same model again, ms per decoder step (with self-conditioning) and per AR token on the eager
   path, the graphed one (dg.graphs: one CUDA graph per pass shape, capture timed apart as the first pass) and
   the fused one (the graphed passes with every RMSNorm on dg's Triton kernel; not in a smoke check, where the
   kernel would run in Triton's interpreter), side by side (dg.bench.graphs), each as a fraction of its
   bandwidth/compute bound (dg.roofline); then two passes of each kind per path under torch.profiler: the
   host's launch calls per pass (a kernel or a whole graph each) and the share of the wall time the GPU was busy;
5. `hybrid`: the same model again, hybrid decoding's tokens/s beside AR's and diffusion's (random drafts rarely
   agree with AR: about one token a round, so it measures the cost of a round at full size);
6. `embedded`: the embedded model as the app runs it on the device (dg.bench.embedded_check): `load()` and the
   time to its first step, the race's three lanes on the device's path against eager (tokens and tokens/s),
   and dg's sampler against `generate()` on the same seed;
7. `replicas`: one Ray Serve replica of the embedded model per visible GPU, a run on each
   (dg.bench.replica_check; in a smoke check one line says it does not apply).

OUT/gpu-check.json: `ok`, `mode` ("gpu" | "smoke"), `started`, `wall_s`, `device` (name, datasheet peak
bandwidth or null), `versions` (python, torch, triton, transformers, cuda, commit, the carried wheels and
every installed package's version), `plan`, and `parts`, each {`status` ("ok" | "failed": its checks did
not pass | "error" | "timeout" | "missing": this Python lacks what it imports), `wall_s`, `limit_s`,
`error` (one line or null), `log_tail` (when not ok), `result`}. Exit 0 when every part is ok, else 1;
2 without CUDA (unless --smoke).
"""

import argparse
import datetime
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path

import torch

from dg.bench.common import fmt, timed
from dg.bench.device import peak_bandwidth_gb_s, require_cuda
from dg.bench.embedded_check import describe as describe_embedded, embedded_part
from dg.bench.replica_check import replicas_part
from dg.bench.stack import device_info, missing_needs, versions

ROOT = Path(__file__).resolve().parents[2]
REPORT_NAME = "gpu-check.json"
TOTAL_BUDGET_S = 360  # the promise: the whole check within 6 min, so a second try fits a 15-minute lease
START_OVERHEAD_S = 30  # the parent's own imports, device queries, installing carried wheels, writing the report
PART_LIMITS_S = {"kernel_tests": 55, "sampling_step": 40, "sampler": 60, "graphs": 85, "hybrid": 30,
                 "embedded": 30, "replicas": 30}
SMOKE_KERNEL_TESTS = "acceptance_equals_entropy_bound_mask or launcher_rejects or looser_entropy_bound"
CLEAR_MARGIN = 1.0  # logits of lead for every argmax: far more than one bf16 rounding step of the scaled logits
ONE_HOT_MARGIN = 120.0  # logits of lead that make softmax(logits / τ) exactly one-hot in float32 for τ <= 1
SPREAD_LOGITS = (2.0, 0.0, 0.0, 0.0)  # the one position the bound admits past the one-hot ones (H ≈ 0.7 nats)


@dataclass(frozen=True)
class CheckPlan:
    """What each part runs and its time limit; `CheckPlan.for_smoke()` is the same check at CPU sizes."""

    smoke: bool = False
    step_shape: tuple[int, int, int] = (1, 256, 262_144)  # (B, C, V) of the release
    step_repeats: int = 20
    copy_mb: int = 1024
    kernel_tests: str | None = None  # a pytest -k selection; None runs them all
    steps_per_canvas: int = 12
    canvases: int = 2
    prompt_length: int = 512
    ar_tokens: int = 64
    hybrid_tokens: int = 32  # the hybrid part's tokens (about one a round on random weights), AR's there too
    graph_repeats: int = 2  # the graphs part's rounds per path (the order alternating)
    graph_tokens: int = 32  # the graphs part's AR tokens a round (eager: ~0.14 s each at full size)
    limits_s: dict = field(default_factory=lambda: dict(PART_LIMITS_S))

    def __post_init__(self):
        batch, canvas, vocab = self.step_shape
        if batch < 1 or canvas < 2 or vocab < 64:
            raise ValueError(f"step_shape must be (B >= 1, C >= 2, V >= 64), got {self.step_shape}")
        if self.steps_per_canvas < 2:  # ms/step is the gap between two steps
            raise ValueError(f"steps_per_canvas must be >= 2, got {self.steps_per_canvas}")
        if set(self.limits_s) != set(PART_LIMITS_S) or not all(v > 0 for v in self.limits_s.values()):
            raise ValueError(f"limits_s must give every part of {list(PART_LIMITS_S)} > 0 s, got {self.limits_s}")
        if not self.smoke and sum(self.limits_s.values()) + START_OVERHEAD_S > TOTAL_BUDGET_S:
            raise ValueError(f"part limits {self.limits_s} exceed the {TOTAL_BUDGET_S} s budget")

    @classmethod
    def for_smoke(cls) -> "CheckPlan":
        return cls(smoke=True, step_shape=(1, 16, 512), step_repeats=3, copy_mb=16, kernel_tests=SMOKE_KERNEL_TESTS,
                   steps_per_canvas=2, canvases=2, prompt_length=12, ar_tokens=4, hybrid_tokens=4, graph_tokens=4,
                   limits_s={"kernel_tests": 60, "sampling_step": 60, "sampler": 60, "graphs": 60, "hybrid": 60,
                             "embedded": 60, "replicas": 60})


# Part 2: the sampling step, fused vs torch.
def designed_logits(shape, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """float32 logits whose step is determined where the paths are compared: (logits, one-hot, expected accepted).

    Every position's argmax leads by CLEAR_MARGIN, so both paths must agree on it. A third of the
    positions are one-hot in float32 (entropy 0, the sample is the argmax whatever the RNG), so the
    entropy bound accepts all of them; position 1 spreads over four tokens (H ≈ 0.7 nats, far below
    the Gaussian rows' H ≥ 4) and is the one the bound admits next (its excess is 0), and no other
    (the next excess is ≈ 0.7 > 0.1). Its token is a random draw, so it is not compared.
    """
    batch, canvas, _ = shape
    generator = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn(shape, generator=generator, device=device)  # (B, C, V)
    top = logits.argmax(dim=-1, keepdim=True)  # (B, C, 1)
    one_hot = torch.zeros((batch, canvas), dtype=torch.bool, device=device)
    one_hot[:, ::3] = True  # position 1 is not among them
    lead = torch.where(one_hot, ONE_HOT_MARGIN, CLEAR_MARGIN).unsqueeze(-1)  # (B, C, 1)
    logits.scatter_add_(-1, top, lead)
    logits[:, 1] = float("-inf")
    logits[:, 1, :len(SPREAD_LOGITS)] = torch.tensor(SPREAD_LOGITS, device=device)
    expected = one_hot.clone()
    expected[:, 1] = True
    return logits, one_hot, expected


def time_call_ms(fn, device, repeats: int) -> float:
    """Median ms of one call after two warm-ups (the first compiles); CUDA events on a GPU."""
    fn()
    fn()
    if device.type != "cuda":
        return 1e3 * statistics.median(timed(fn, device)[1] for _ in range(repeats))
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return statistics.median(start.elapsed_time(end) for start, end in events)


def agreement(fused, reference, one_hot, expected) -> dict:
    """Do both paths take the same decisions where the step is determined?"""
    compared = fused.accepted & reference.accepted & one_hot
    checks = {
        "same_argmax": torch.equal(fused.argmax, reference.argmax),
        "same_accepted_positions": torch.equal(fused.accepted, reference.accepted),
        "accepted_as_designed": torch.equal(fused.accepted, expected),
        "same_accepted_tokens": torch.equal(fused.next_canvas[compared], reference.next_canvas[compared]),
    }
    return {**checks, "agree": all(checks.values()), "accepted": int(fused.accepted.sum()),
            "compared_tokens": int(compared.sum()),
            "max_entropy_diff": float((fused.entropy.float() - reference.entropy.float()).abs().max())}


def record_step(step, temperature, canvas, config):
    """The sampler's own per-step record of one step (its top-k, sums and the one copy to the host)."""
    from dg.paths import Run
    from dg.sampler import Denoised, step_record

    return step_record(Run(None, None), Denoised(0, 1, temperature, canvas, step, config.entropy_bound, None, (0, 0)))


def sampling_step_part(plan: CheckPlan, device) -> tuple[dict, str | None]:
    """Both paths timed per dtype on the designed logits, then one step of each compared."""
    from dg.bench.step import memory_bandwidth
    from dg.config import SamplerConfig
    from dg.kernels.sampling import sample_step

    config = SamplerConfig(max_denoising_steps=plan.steps_per_canvas)
    # τ of a canvas's first step, a device tensor as in the sampler
    temperature = config.temperature(torch.tensor(config.max_denoising_steps, dtype=torch.int32, device=device))
    peak = peak_bandwidth_gb_s(torch.cuda.get_device_name(device)) if device.type == "cuda" else None
    result = {"shape": list(plan.step_shape), "temperature": float(temperature), "entropy_bound": config.entropy_bound,
              "repeats": plan.step_repeats, "peak_bandwidth_gb_s": peak,
              "copy_gb_s": memory_bandwidth(device, plan.copy_mb), "dtypes": {}}
    logits32, one_hot, expected = designed_logits(plan.step_shape, device)
    canvas = torch.zeros(plan.step_shape[:2], dtype=torch.long, device=device)
    for dtype in (torch.bfloat16, torch.float32):
        logits = logits32.to(dtype)
        nbytes = 2 * logits.numel() * logits.element_size()  # read the logits, write the scaled logits
        paths, steps = {}, {}
        for backend in ("torch", "triton"):
            run = partial(sample_step, logits, temperature, canvas, config.entropy_bound, backend=backend)
            ms = time_call_ms(run, device, plan.step_repeats)
            gb_s = nbytes / ms / 1e6
            paths[backend] = {"ms": ms, "gb_s": gb_s, "fraction_of_peak": gb_s / peak if peak else None,
                              "fraction_of_copy": gb_s / result["copy_gb_s"]}
            torch.manual_seed(0)
            steps[backend] = run()
            paths[backend]["record_ms"] = time_call_ms(partial(record_step, steps[backend], temperature, canvas, config),
                                                       device, plan.step_repeats)
        result["dtypes"][str(dtype).removeprefix("torch.")] = {
            **paths, "bytes": nbytes, "speedup": paths["torch"]["ms"] / paths["triton"]["ms"],
            "agreement": agreement(steps["triton"], steps["torch"], one_hot, expected)}
        del logits, steps
    disagree = {name: [k for k, v in d["agreement"].items() if v is False and k != "agree"]
                for name, d in result["dtypes"].items()}
    failure = "; ".join(f"{name}: not {', '.join(keys)}" for name, keys in disagree.items() if keys)
    return result, (f"the fused and torch steps disagree ({failure})" if failure else None)


# Parts 3 and 5: the sampler on the full-size model, eager, and hybrid.
def _device_check(plan: CheckPlan, device, mode: str) -> tuple[dict, str | None]:
    """The device check in one mode (both sampling backends on CUDA, plus AR); smoke: a tiny config on the CPU."""
    from dg.bench.device import device_check

    if plan.smoke:
        from dg.testing import tiny_config

        config, dtype = tiny_config(vocab_size=plan.step_shape[-1], canvas_length=plan.step_shape[1]), torch.float32
    else:
        config, dtype = None, torch.bfloat16  # the release's 26B-A4B
    result = device_check(config, device, dtype, prompt_length=plan.prompt_length, steps=plan.steps_per_canvas,
                          canvases=plan.canvases, ar_tokens=plan.hybrid_tokens if mode == "hybrid" else plan.ar_tokens,
                          modes=(mode,))
    runs = result["diffusion"]
    short = [r["backend"] for r in runs if r["steps"] != plan.steps_per_canvas * plan.canvases]
    return result, (f"runs stopped early ({', '.join(short)})" if short else None)


def graphs_part(plan: CheckPlan, device, keep) -> tuple[dict, str | None]:
    """Part 4: eager vs graphed passes on the full-size model (smoke: a tiny config on the CPU, where the graphed
    path runs its buffers eagerly), each pass as a fraction of its roofline bound when the device is known;
    `keep(result)` after every repeat and profiled path, so a part cut at its limit still reports them."""
    from dg import roofline
    from dg.bench.device import _text_id_limit, materialise, release_config
    from dg.bench.graphs import compare_paths, default_paths

    if plan.smoke:
        from dg.testing import tiny_config

        config, dtype = tiny_config(vocab_size=plan.step_shape[-1], canvas_length=plan.step_shape[1]), torch.float32
    else:
        config, dtype = release_config(), torch.bfloat16
    model = materialise(config, device, dtype)
    ids = torch.randint(3, _text_id_limit(model.config), (1, plan.prompt_length),
                        generator=torch.Generator().manual_seed(0)).to(device)
    paths = ("eager", "graphs") if plan.smoke else default_paths(device)  # interpreted kernels: minutes a pass
    known = roofline_device(device) if not plan.smoke else None
    if known is not None:
        step = roofline.canvas_step(roofline.RELEASE, known, "bf16")
        token = roofline.ar_token(roofline.RELEASE, known, "bf16")

    def with_bounds(result: dict) -> dict:
        if known is not None:
            result["roofline"] = {"device": known.name, "step_bound_ms": step.seconds * 1e3,
                                  "token_bound_ms": token.seconds * 1e3,
                                  **{f"{path}_step_fraction": roofline.fraction(result[f"{path}_step_ms"] / 1e3, step)
                                     for path in paths},
                                  **{f"{path}_token_fraction": roofline.fraction(result[f"{path}_token_ms"] / 1e3,
                                                                                 token) for path in paths}}
        return result

    result = with_bounds(compare_paths(model, {"input_ids": ids}, plan.steps_per_canvas, plan.graph_tokens,
                                       plan.graph_repeats, paths, profiled=True,
                                       on_round=lambda so_far: keep(with_bounds(so_far))))
    bad = [what for what, ok in (("decoder argmax", result["same_decoder_argmax"]),
                                 ("AR tokens", result["same_ar_tokens"])) if not ok]
    # on random weights in bf16 a near-tie may flip between cache layouts: reported, failed only in float32
    failure = f"the graphed path's {' and '.join(bad)} differ from eager's" if bad and dtype == torch.float32 else None
    return result, failure


def profile_line(path: str, profile: dict) -> str:
    """One path's profiled passes (dg.bench.graphs.profile_passes) on one line."""
    def one(kind: str) -> str:
        p = profile[kind]
        if p["launches"] is None:  # a CPU: no launches to count, the ops the host called
            return f"{kind} {fmt(p['wall_ms'])} ms, {fmt(p['host_ops'], '.4g')} host ops"
        return (f"{kind} {fmt(p['wall_ms'])} ms, {fmt(p['launches'], '.4g')} launches, GPU busy "
                f"{fmt(p['gpu_busy_ms'])} ms ({p['gpu_busy_share']:.0%})")
    return f"profiled, {path}: " + "; ".join(one(kind) for kind in ("step", "token")) + " per pass"


def roofline_device(device):
    """dg.roofline's entry for this CUDA device by name (H100, H200), or None."""
    from dg import roofline

    if torch.device(device).type != "cuda":
        return None
    key = roofline.device_named(torch.cuda.get_device_name(device))
    return roofline.DEVICES[key] if key else None


CHILD_PARTS = {"sampling_step": sampling_step_part, "sampler": partial(_device_check, mode="eager"),
               "graphs": graphs_part, "hybrid": partial(_device_check, mode="hybrid"), "embedded": embedded_part,
               "replicas": replicas_part}
KEEPS_AS_IT_GOES = ("graphs",)  # parts given `keep`: the longest, so a cut at its limit loses the least


def run_child(part: str, plan: CheckPlan, result_path: Path) -> int:
    """One part in this process: {"result": ..., "failure": one line or null} goes to `result_path`; a part of
    KEEPS_AS_IT_GOES writes its result so far there as it goes (with no failure: its checks come at its end),
    read if it is cut short."""
    device = torch.device("cpu" if plan.smoke else "cuda")

    def write(result: dict, failure: str | None) -> None:
        written = result_path.with_suffix(".writing")  # a kill mid-write never leaves half a file
        written.write_text(json.dumps(finite({"result": result, "failure": failure})))
        written.replace(result_path)

    keep = {"keep": lambda so_far: write(so_far, None)} if part in KEEPS_AS_IT_GOES else {}
    result, failure = CHILD_PARTS[part](plan, device, **keep)
    write(result, failure)
    return 0


def read_child(path: Path) -> tuple[dict, str | None]:
    """A child's written result and failure (a partial result has none: its part was cut before its checks)."""
    written = json.loads(path.read_text())
    return written["result"], written["failure"]


# The parent: each part in a subprocess with a time limit, one report.
def finite(value):
    """JSON-safe: NaN and ±inf become null, at any depth."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


UNREADABLE = (OSError, ValueError, KeyError, ET.ParseError)  # no result file, or not one a part writes


def last_line(log: str, otherwise: str) -> str:
    """A part's last line of output (its error, when it crashed), or `otherwise`."""
    lines = [line for line in log.splitlines() if line.strip()]
    return lines[-1] if lines else otherwise


def run_part(argv: list[str], env: dict, limit_s: float, read_result) -> dict:
    """Run one part's command under a time limit; `read_result()` -> (result, failure or None), or raises.

    Status: "ok" (exit 0, no failure), "failed" (a result whose checks did not pass), "error" (no
    result: the part crashed), "timeout" (its process group is killed at `limit_s`; `result` is what the part
    wrote as it went, or null).
    """
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        log, _ = proc.communicate(timeout=limit_s)
    except BaseException as stop:  # the limit, or Ctrl-C: never leave a part running on the GPU
        os.killpg(proc.pid, signal.SIGKILL)  # the part's own process group, grandchildren included
        log, _ = proc.communicate()
        if not isinstance(stop, subprocess.TimeoutExpired):
            raise
        try:
            kept, _ = read_result()
        except UNREADABLE:
            kept = None
        kept_note = "; what it measured before is kept" if kept else ""
        return {"status": "timeout", "wall_s": time.perf_counter() - start, "limit_s": limit_s,
                "error": f"stopped at its {limit_s:g} s limit{kept_note}", "log_tail": log[-4000:], "result": kept}
    record = {"wall_s": time.perf_counter() - start, "limit_s": limit_s, "error": None}
    try:
        result, failure = read_result()
    except UNREADABLE as error:
        return {"status": "error", **record,
                "error": f"exit code {proc.returncode}: {last_line(log, f'{type(error).__name__}: {error}')}",
                "log_tail": log[-4000:], "result": None}
    if failure is None and proc.returncode != 0:  # e.g. a crash after a part kept its figures so far
        failure = f"exit code {proc.returncode}: {last_line(log, 'no output')}"
    if failure is not None:
        record.update(error=failure, log_tail=log[-4000:])
    return {"status": "ok" if failure is None else "failed", **record, "result": result}


def read_junit(path: Path, plan: CheckPlan) -> tuple[dict, str | None]:
    """pytest's JUnit XML -> counts and the names of the tests that did not pass."""
    suites = ET.parse(path).getroot()
    suites = suites.findall("testsuite") if suites.tag == "testsuites" else [suites]
    counts = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    failing = [f"{case.get('classname')}::{case.get('name')}" for s in suites for case in s.iter("testcase")
               if case.find("failure") is not None or case.find("error") is not None]
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    result = {"compiled": not plan.smoke, "selection": plan.kernel_tests, "total": counts["tests"],
              "passed": passed, "failed": counts["failures"], "errors": counts["errors"],
              "skipped": counts["skipped"], "failing": failing[:20]}
    if failing:
        return result, f"{len(failing)} kernel test(s) did not pass: {', '.join(failing[:3])}"
    return result, None if passed > 0 else "no kernel test ran"


def part_env(plan: CheckPlan) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("TRITON_INTERPRET", None)  # compiled kernels on the GPU, whatever the caller's shell says
    if plan.smoke:
        env["TRITON_INTERPRET"] = "1"
    return env


def run_parts(plan: CheckPlan, scratch: Path) -> dict:
    env = part_env(plan)
    smoke = ["--smoke"] if plan.smoke else []
    junit = scratch / "kernel-tests.xml"
    pytest_argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/kernels",
                   f"--junitxml={junit}", *(["-k", plan.kernel_tests] if plan.kernel_tests else [])]
    commands = {"kernel_tests": (pytest_argv, lambda: read_junit(junit, plan))}
    for part in CHILD_PARTS:
        result_path = scratch / f"{part}.json"
        argv = [sys.executable, "-m", "dg.bench.gpu_check", "--part", part, "--result", str(result_path), *smoke]
        commands[part] = (argv, lambda p=result_path: read_child(p))
    parts = {}
    for part, (argv, read_result) in commands.items():
        if need := missing_needs(part):
            parts[part] = {"status": "missing", "wall_s": 0.0, "limit_s": plan.limits_s[part], "error": need,
                           "result": None}
            print(f"{part}: {need}", flush=True)
            continue
        print(f"{part} ...", flush=True)
        parts[part] = run_part(argv, env, plan.limits_s[part], read_result)
        _print_part(part, parts[part])
    return parts


def describe(name: str, result: dict) -> list[str]:
    """The headline figures of one part's result, one line each."""
    if name == "kernel_tests":
        mode = "compiled" if result["compiled"] else "interpreted"
        return [f"{result['passed']}/{result['total']} passed ({mode}), {result['failed']} failed, "
                f"{result['errors']} errors, {result['skipped']} skipped"]
    if name == "sampling_step":
        lines = []
        for dtype, d in result["dtypes"].items():
            peak = d["triton"]["fraction_of_peak"]
            of_peak = "peak unknown" if peak is None else f"{peak:.0%} of peak"
            lines.append(f"{dtype}: torch {fmt(d['torch']['ms'])} ms, triton {fmt(d['triton']['ms'])} ms "
                         f"({fmt(d['triton']['gb_s'], '.4g')} GB/s, {of_peak}); record {fmt(d['torch'].get('record_ms'))}"
                         f" / {fmt(d['triton'].get('record_ms'))} ms; "
                         f"{'same' if d['agreement']['agree'] else 'DIFFERENT'} accepted positions and tokens")
        return lines
    if name == "replicas":
        if not result["applicable"]:
            return [result["reason"]]
        return [f"{result['description']}: up in {fmt(result['start_s'])} s, {fmt(result['tokens_per_s'], '.4g')} tok/s "
                f"over {result['gpus']} runs at once"] + [f"{r['replica']}: {r['finish']} in {fmt(r['seconds'])} s"
                                                          for r in result["runs"]]
    if name == "hybrid":
        h, summary = result["hybrid"], result["summary"]
        return [f"hybrid: {fmt(h['tps'], '.4g')} tok/s, {fmt(h['tokens_per_round'])} tokens/round, "
                f"{fmt(h['ms_per_round'])} ms/round; vs AR {fmt(summary['hybrid_vs_ar'])}x, vs diffusion "
                f"{fmt(summary['hybrid_vs_diffusion'])}x ({h['measures']})"]
    if name == "embedded":
        return describe_embedded(result)
    if name == "graphs":
        bounds = result.get("roofline")
        share = (lambda path, kind: f" ({bounds[f'{path}_{kind}_fraction']:.0%} of the bound)") if bounds else (
            lambda path, kind: "")
        return [f"decoder step: eager {fmt(result['eager_step_ms'])} ms{share('eager', 'step')}, graphs "
                f"{fmt(result['graphs_step_ms'])} ms{share('graphs', 'step')} (first, with capture: "
                f"{fmt(result['graphs_first_step_ms'])} ms); {fmt(result['step_eager_vs_graphs'])}x",
                f"AR token: eager {fmt(result['eager_token_ms'])} ms{share('eager', 'token')}, graphs "
                f"{fmt(result['graphs_token_ms'])} ms{share('graphs', 'token')}; {fmt(result['token_eager_vs_graphs'])}x",
                f"same AR tokens: {result['same_ar_tokens']}, same decoder argmax: {result['same_decoder_argmax']}, "
                f"largest logit difference {fmt(result['max_logit_difference'], '.3g')}"] + ([
                f"fused: decoder step {fmt(result['fused_step_ms'])} ms{share('fused', 'step')}, "
                f"{fmt(result['step_graphs_vs_fused'])}x graphs; AR token {fmt(result['fused_token_ms'])} ms"
                f"{share('fused', 'token')}, {fmt(result['token_graphs_vs_fused'])}x graphs; same AR tokens as eager: "
                f"{result['fused_same_ar_tokens']} (up to rounding), largest logit difference "
                f"{fmt(result['fused_max_logit_difference'], '.3g')}"] if "fused" in result["paths"] else []) + [
                profile_line(path, result["profile"][path]) for path in result.get("profile", {})]
    lines = [f"{r['backend']} sampling, {r['fast_paths']}: {fmt(r['tps'], '.4g')} tok/s, {fmt(r['ms_per_step'])} "
             f"ms/step (warm-up {fmt(r['warm_up_s'])} s)" + ("; split (ms): " + ", ".join(
                 f"{phase} {fmt(ms)}" for phase, ms in r["split_ms_per_step"].items()) if "split_ms_per_step" in r else "")
             for r in result["diffusion"]]
    ar = result["ar"]
    return lines + [f"AR, {ar['fast_paths']}: {fmt(ar['tps'], '.4g')} tok/s, {fmt(ar['ms_per_token'])} ms/token "
                    f"(warm-up {fmt(ar['warm_up_s'])} s)"]


def _print_part(name: str, record: dict) -> None:
    note = f": {record['error']}" if record["error"] else ""
    print(f"{name}: {record['status']} in {record['wall_s']:.1f} s of its {record['limit_s']:g} s limit{note}",
          flush=True)
    try:  # a summary line never stops the check: the JSON has the figures
        lines = describe(name, record["result"]) if record["result"] else []
    except (KeyError, TypeError, ValueError) as error:
        lines = [f"(no summary: {type(error).__name__} {error})"]
    for line in lines:
        print(f"  {line}", flush=True)


def run_check(plan: CheckPlan, out_dir: Path) -> dict:
    """Every part, then OUT/gpu-check.json; returns the report."""
    start = time.perf_counter()
    report = {"ok": False, "mode": "smoke" if plan.smoke else "gpu",
              "started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "wall_s": None, "device": device_info(plan.smoke), "versions": versions(), "plan": asdict(plan)}
    with tempfile.TemporaryDirectory(prefix="dg-gpu-check-") as scratch:
        report["parts"] = run_parts(plan, Path(scratch))
    report["ok"] = all(p["status"] == "ok" for p in report["parts"].values())
    report["wall_s"] = time.perf_counter() - start
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / REPORT_NAME).write_text(json.dumps(finite(report), indent=2) + "\n")
    return report


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.gpu_check", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help=f"folder for {REPORT_NAME}")
    parser.add_argument("--smoke", action="store_true", help="the same code on the CPU at tiny shapes (< 60 s)")
    parser.add_argument("--part", choices=list(CHILD_PARTS), help=argparse.SUPPRESS)  # one part, in a child
    parser.add_argument("--result", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.part is None and args.out is None:
        parser.error("--out DIR is required")
    if args.part is not None and args.result is None:
        parser.error("--part needs --result FILE")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    plan = CheckPlan.for_smoke() if args.smoke else CheckPlan()
    if args.part is not None:
        return run_child(args.part, plan, args.result)
    if not args.smoke:
        try:
            require_cuda("the GPU check", "run it with --smoke for the same code on the CPU at tiny shapes")
        except SystemExit as refusal:
            print(refusal, file=sys.stderr)
            return 2
    report = run_check(plan, args.out)
    print(f"{'ok' if report['ok'] else 'NOT ok'} in {report['wall_s']:.1f} s: {args.out / REPORT_NAME}")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
