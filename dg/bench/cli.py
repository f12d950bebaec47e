"""`python -m dg.bench`: the model benchmark, the sampling step alone, or the full-size device check.

    python -m dg.bench                         # embedded tiny model, one prompt per skill
    python -m dg.bench --repeats 5 --report runs/bench.html
    python -m dg.bench --device-check          # full-size random DiffusionGemma 26B-A4B, needs CUDA

Prints a table, writes a plotly HTML report, and ends with one JSON line.
"""

import argparse
import json
import math

import torch

from dg.bench.models import RUNS, run_model_bench
from dg.bench.step import bench_sampling_step, format_step


def final_json(result: dict) -> dict:
    """The one-line summary: the three headline figures first, then the rest."""
    out = dict(result.get("models", {}).get("summary", {}))
    if "three_term" in result.get("models", {}):
        out["three_term_accuracy"] = result["models"]["three_term"]["accuracy"]
        out["three_term_hybrid_vs_ar_speedup"] = result["models"]["three_term"]["hybrid_vs_ar_speedup"]
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
    parser.add_argument("--three-term", type=int, default=10,
                        help="sums of three numbers with the trace: accuracy of each mode on N problems (0: skip)")
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
        from dg.bench.device import device_check, format_device_check

        result["device_check"] = device_check(seed=args.seed)
        print(format_device_check(result["device_check"]))
    else:
        result["models"] = run_model_bench(args)
    if not args.skip_step:
        result["step"] = bench_sampling_step(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
        print(format_step(result["step"]))
    from dg.bench.report import write_report

    print(f"\nreport: {write_report(result, args.report)}")
    line = final_json(result)
    print(json.dumps(line))
    return line
