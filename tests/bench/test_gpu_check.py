"""The prepared GPU check: its smoke mode end to end on the CPU, its refusal without CUDA, its part runner."""

import datetime
import json
import math
import os
import subprocess
import sys
import zipfile
from importlib import metadata

import pytest
import torch

from dg.bench import gpu_check
from dg.bench.gpu_check import CheckPlan, designed_logits, main, run_part
from dg.kernels.reference import sample_step_torch

ROOT = gpu_check.ROOT
PARTS = {"kernel_tests", "sampling_step", "sampler", "graphs", "hybrid", "embedded", "replicas"}
PROBE_WHEEL = "dgprobe-1.0-py3-none-any.whl"


def write_probe_wheel(folder):
    """A one-module pure-Python wheel, to see a carried wheel installed and recorded."""
    files = {"dgprobe/__init__.py": "VALUE = 1\n",
             "dgprobe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: dgprobe\nVersion: 1.0\n",
             "dgprobe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: dg\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files["dgprobe-1.0.dist-info/RECORD"] = "".join(f"{name},,\n" for name in files) + "dgprobe-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / PROBE_WHEEL, "w") as wheel:
        for name, text in files.items():
            wheel.writestr(name, text)


@pytest.fixture(scope="module")
def smoke_report(tmp_path_factory):
    """`bash scripts/gpu-check.sh OUT --smoke --wheels DIR`, as a user runs it: (completed process, the JSON report)."""
    out, wheels = tmp_path_factory.mktemp("gpu-check"), tmp_path_factory.mktemp("wheels")
    write_probe_wheel(wheels)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(["bash", "scripts/gpu-check.sh", str(out), "--smoke", "--wheels", str(wheels)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["gpu-check.json"]  # one file, nothing else
    return done, json.loads((out / "gpu-check.json").read_text())


def test_smoke_report_says_what_ran_where_and_with_which_versions(smoke_report, positive_finite):
    done, report = smoke_report
    assert set(report) == {"ok", "mode", "started", "wall_s", "device", "versions", "plan", "parts"}
    assert report["ok"] is True and report["mode"] == "smoke"
    assert datetime.datetime.fromisoformat(report["started"]).tzinfo is not None
    plan = CheckPlan.for_smoke()
    assert positive_finite(report["wall_s"]) and report["wall_s"] < sum(plan.limits_s.values())
    assert report["device"] == {"name": report["device"]["name"], "peak_bandwidth_gb_s": None,
                                "peak_bandwidth_source": "unknown"}
    assert report["device"]["name"].startswith("cpu")
    versions = report["versions"]
    assert versions["torch"] == torch.__version__ and versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert versions["transformers"] == metadata.version("transformers")
    assert versions["triton"] == metadata.version("triton")
    assert versions["commit"]
    assert versions["carried_wheels"] == [PROBE_WHEEL] and versions["packages"]["dgprobe"] == "1.0"  # installed
    assert versions["packages"]["torch"] == metadata.version("torch") and "dgprobe" not in sys.modules
    assert report["plan"]["step_shape"] == list(plan.step_shape) and report["plan"]["limits_s"] == plan.limits_s
    assert set(report["parts"]) == PARTS
    for name, part in report["parts"].items():
        assert set(part) == {"status", "wall_s", "limit_s", "error", "result"}, name  # no log_tail when ok
        assert part["status"] == "ok" and part["error"] is None, name
        assert positive_finite(part["wall_s"]) and part["wall_s"] < part["limit_s"] == plan.limits_s[name], name
        assert f"{name}: ok in" in done.stdout and f"of its {part['limit_s']:g} s limit" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("ok in")


def test_smoke_kernel_tests_ran_a_subset_in_the_interpreter(smoke_report):
    result = smoke_report[1]["parts"]["kernel_tests"]["result"]
    assert result["compiled"] is False and result["selection"] == gpu_check.SMOKE_KERNEL_TESTS
    assert result["total"] >= 3 and result["passed"] == result["total"] - result["skipped"] > 0
    assert result["failed"] == result["errors"] == 0 and result["failing"] == []


def test_smoke_sampling_step_times_both_paths_and_they_agree(smoke_report, positive_finite):
    result = smoke_report[1]["parts"]["sampling_step"]["result"]
    batch, canvas, vocab = result["shape"]
    assert (batch, canvas, vocab) == CheckPlan.for_smoke().step_shape
    assert math.isclose(result["temperature"], 0.8, rel_tol=1e-6) and result["entropy_bound"] == 0.1
    assert result["peak_bandwidth_gb_s"] is None and positive_finite(result["copy_gb_s"])
    assert set(result["dtypes"]) == {"bfloat16", "float32"}
    one_hot = len(range(0, canvas, 3))  # the designed logits: every third position one-hot, plus position 1
    for dtype, itemsize in (("bfloat16", 2), ("float32", 4)):
        d = result["dtypes"][dtype]
        assert d["bytes"] == 2 * batch * canvas * vocab * itemsize
        for path in ("torch", "triton"):
            assert all(positive_finite(d[path][k]) for k in ("ms", "gb_s", "fraction_of_copy", "record_ms")), (dtype, path)
            assert d[path]["fraction_of_peak"] is None  # no datasheet figure for a CPU
            assert math.isclose(d[path]["gb_s"], d["bytes"] / d[path]["ms"] / 1e6)
        assert math.isclose(d["speedup"], d["torch"]["ms"] / d["triton"]["ms"])
        agreement = d["agreement"]
        assert all(agreement[k] is True for k in ("same_argmax", "same_accepted_positions", "accepted_as_designed",
                                                   "same_accepted_tokens", "agree")), (dtype, agreement)
        assert agreement["accepted"] == one_hot + 1 and agreement["compared_tokens"] == one_hot
        assert 0 <= agreement["max_entropy_diff"] < 0.1


def test_smoke_sampler_reports_tokens_per_second_and_the_step_split(smoke_report, positive_finite):
    result = smoke_report[1]["parts"]["sampler"]["result"]
    plan = CheckPlan.for_smoke()
    assert result["steps_per_canvas"] == plan.steps_per_canvas and result["canvases"] == plan.canvases
    assert result["canvas_length"] == plan.step_shape[1] and result["prompt_length"] == plan.prompt_length
    assert [r["backend"] for r in result["diffusion"]] == ["torch"]  # Triton needs CUDA in the sampler part
    run = result["diffusion"][0]
    assert run["steps"] == run["synchronised_steps"] == plan.steps_per_canvas * plan.canvases
    assert all(positive_finite(run[k]) for k in ("tps", "ms_per_step", "wall_s", "encoder_ms_per_canvas"))
    split = run["split_ms_per_step"]
    assert list(split) == ["decoder_forward", "sampling", "recording", "other", "total"]
    assert all(positive_finite(split[k]) for k in ("decoder_forward", "sampling", "recording", "total"))
    assert split["other"] > -1e-6  # what falls between the phases: never negative
    assert math.isclose(sum(split[k] for k in ("decoder_forward", "sampling", "recording", "other")), split["total"])
    assert positive_finite(result["ar"]["tps"]) and positive_finite(result["prefill_ms"])


def test_without_cuda_the_check_exits_2_with_one_line_and_writes_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "needs a CUDA GPU" in err and "--smoke" in err
    assert not (tmp_path / "out").exists()


def test_a_part_that_crashes_is_an_error_with_its_last_line(tmp_path):
    missing = tmp_path / "never-written.json"
    record = run_part([sys.executable, "-c", "raise ValueError('kernel exploded')"], dict(os.environ), 30,
                      lambda: gpu_check.read_child(missing))
    assert record["status"] == "error" and record["result"] is None
    assert "ValueError: kernel exploded" in record["error"] and "Traceback" in record["log_tail"]


def test_a_part_that_hangs_is_stopped_at_its_limit_with_its_children(tmp_path):
    # The child waits on a grandchild that holds the output pipe: only killing the group ends it.
    hang = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import time; time.sleep(60)'])"
    record = run_part([sys.executable, "-c", hang], dict(os.environ), 2,
                      lambda: gpu_check.read_child(tmp_path / "never-written.json"))
    assert record["status"] == "timeout" and record["result"] is None and record["error"] == "stopped at its 2 s limit"
    assert 2 <= record["wall_s"] < 20


def test_a_part_cut_at_its_limit_keeps_what_it_wrote_as_it_went(tmp_path):
    written = tmp_path / "graphs.json"
    keeps = ("import json, pathlib, time; pathlib.Path(%r).write_text(json.dumps("
             "{'result': {'eager_step_ms': 110.0}, 'failure': None})); time.sleep(60)" % str(written))
    record = run_part([sys.executable, "-c", keeps], dict(os.environ), 3, lambda: gpu_check.read_child(written))
    assert record["status"] == "timeout" and record["result"] == {"eager_step_ms": 110.0}
    assert record["error"] == "stopped at its 3 s limit; what it measured before is kept"


def test_a_part_that_crashes_after_keeping_its_figures_keeps_them_and_names_its_error(tmp_path):
    written = tmp_path / "graphs.json"
    crashes = ("import json, pathlib; pathlib.Path(%r).write_text(json.dumps({'result': {'eager_step_ms': 110.0}, "
               "'failure': None})); raise MemoryError('CUDA out of memory')" % str(written))
    record = run_part([sys.executable, "-c", crashes], dict(os.environ), 30, lambda: gpu_check.read_child(written))
    assert record["status"] == "failed" and record["result"] == {"eager_step_ms": 110.0}
    assert record["error"] == "exit code 1: MemoryError: CUDA out of memory"


def test_a_part_whose_checks_fail_keeps_its_result_and_says_why():
    record = run_part([sys.executable, "-c", "print('measured')"], dict(os.environ), 30,
                      lambda: ({"ms": 1.0}, "the fused and torch steps disagree"))
    assert record["status"] == "failed" and record["result"] == {"ms": 1.0}
    assert record["error"] == "the fused and torch steps disagree" and "measured" in record["log_tail"]


def test_the_full_plan_fits_its_budget_and_an_oversized_one_is_refused():
    plan = CheckPlan()
    assert plan.step_shape == (1, 256, 262_144) and plan.steps_per_canvas == 12 and plan.kernel_tests is None
    assert sum(plan.limits_s.values()) + gpu_check.START_OVERHEAD_S <= gpu_check.TOTAL_BUDGET_S == 360
    with pytest.raises(ValueError, match="budget"):
        CheckPlan(limits_s={"kernel_tests": 150, "sampling_step": 50, "sampler": 90, "graphs": 100, "hybrid": 40,
                            "embedded": 30, "replicas": 40})
    with pytest.raises(ValueError, match="steps_per_canvas must be >= 2, got 1"):
        CheckPlan(steps_per_canvas=1)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_designed_logits_accept_exactly_the_designed_positions_at_the_release_vocabulary(dtype):
    logits, one_hot, expected = designed_logits((1, 10, 262_144), torch.device("cpu"))
    torch.manual_seed(0)
    step = sample_step_torch(logits.to(dtype), torch.tensor(0.8), torch.zeros(1, 10, dtype=torch.long), 0.1)
    assert torch.equal(step.accepted, expected) and expected.sum() == one_hot.sum() + 1
    assert torch.equal(step.sampled[one_hot], step.argmax[one_hot])  # one-hot: the sample is the argmax
    assert (step.entropy[one_hot] == 0).all() and (step.entropy[~expected] > 4).all()


def test_smoke_graphs_part_times_eager_and_graphed_passes_side_by_side_and_they_agree(smoke_report, positive_finite):
    record = smoke_report[1]["parts"]["graphs"]
    result, plan = record["result"], CheckPlan.for_smoke()
    assert record["status"] == "ok" and result["device"] == "cpu" and "roofline" not in result  # no known GPU
    assert (result["prompt_tokens"], result["steps"], result["tokens"]) == (plan.prompt_length, plan.steps_per_canvas,
                                                                            plan.graph_tokens)
    assert result["same_ar_tokens"] and result["same_decoder_argmax"]  # float32: the stand-in is the eager pass
    times = [result[f"{path}_{k}"] for path in ("eager", "graphs") for k in ("step_ms", "token_ms", "first_step_ms")]
    assert all(positive_finite(x) for x in times)
    assert result["step_eager_vs_graphs"] == pytest.approx(result["eager_step_ms"] / result["graphs_step_ms"])
    assert result["paths"] == ["eager", "graphs"]  # no fused path in a smoke check: its kernel would be interpreted
    for path in ("eager", "graphs"):  # two passes of each kind under the profiler: on a CPU, the ops the host called
        for kind in ("step", "token"):
            profiled = result["profile"][path][kind]
            assert positive_finite(profiled["wall_ms"]) and profiled["host_ops"] > 10
            assert profiled["launches"] is None and profiled["gpu_busy_share"] is None  # no GPU to count on
    lines = gpu_check.describe("graphs", result)
    assert lines[0].startswith("decoder step: eager ") and "graphs" in lines[0] and lines[1].startswith("AR token")
    assert [line.split(":")[0] for line in lines[-2:]] == ["profiled, eager", "profiled, graphs"]
    assert "host ops" in lines[-1] and lines[-1].endswith("per pass")


def test_smoke_hybrid_part_times_hybrid_beside_ar_and_diffusion_and_says_what_it_measures(smoke_report,
                                                                                          positive_finite):
    result = smoke_report[1]["parts"]["hybrid"]["result"]
    plan = CheckPlan.for_smoke()
    hybrid, summary = result["hybrid"], result["summary"]
    assert hybrid["tokens"] == result["ar"]["tokens"] == plan.hybrid_tokens
    assert 1 <= hybrid["rounds"] <= hybrid["tokens"]
    assert hybrid["tokens_per_round"] == pytest.approx(hybrid["tokens"] / hybrid["rounds"])
    assert summary["hybrid_vs_ar"] == pytest.approx(hybrid["tps"] / result["ar"]["tps"])
    assert summary["hybrid_vs_diffusion"] == pytest.approx(hybrid["tps"] / result["diffusion"][0]["tps"])
    assert all(positive_finite(x) for x in (hybrid["ms_per_round"], hybrid["warm_up_s"], summary["hybrid_tps"]))
    assert "a round's cost" in summary["measures"]  # random drafts: said in the part's own output
    assert "compiled" not in result  # one part, one way of running


def test_smoke_embedded_part_times_start_up_and_races_every_lane_against_eager_and_generate(smoke_report,
                                                                                            positive_finite):
    record = smoke_report[1]["parts"]["embedded"]
    result = record["result"]
    assert record["status"] == "ok" and result["path"] == "graphs"  # a CPU: the graphed path's stand-in
    assert all(positive_finite(result[k]) for k in ("load_s", "first_step_s"))
    assert result["start_up_s"] == pytest.approx(result["load_s"] + result["first_step_s"])
    assert set(result["lanes"]) == {"diffusion", "ar", "hybrid"}
    for mode, lane in result["lanes"].items():
        assert lane["same_tokens_as_eager"] and 0 < lane["tokens"] <= 64 and lane["finish"] == lane["eager"]["finish"]
        assert positive_finite(lane["tok_s"]) and positive_finite(lane["eager"]["tok_s"]), mode
    assert result["lanes"]["hybrid"]["tokens"] == result["lanes"]["ar"]["tokens"]  # hybrid's tokens are AR's
    assert result["diffusion_vs_ar"] == pytest.approx(result["lanes"]["diffusion"]["tok_s"] /
                                                      result["lanes"]["ar"]["tok_s"])
    assert result["generate_parity"]["same_tokens"] and result["generate_parity"]["tokens"] > 0
    lines = gpu_check.describe("embedded", result)
    assert lines[0].startswith("start-up on graphs: load ") and "dg = generate(): True" in lines[-1]


def test_a_part_this_python_cannot_import_is_named_in_one_line(monkeypatch):
    import importlib.util

    from dg.bench import stack

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else real(name, *a))
    line = stack.missing_needs("kernel_tests")
    assert line.startswith("needs pytest,") and "gpu-wheels.sh" in line and "\n" not in line
    assert stack.missing_needs("sampler") is None
    monkeypatch.setattr(stack.metadata, "version", lambda name: "5.17.0")
    assert "transformers >= 5.23 (this one is 5.17.0)" in stack.missing_needs("graphs")
    assert set(stack.PART_NEEDS) == set(gpu_check.PART_LIMITS_S)  # every part says what it imports
