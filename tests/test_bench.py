"""`python -m dg.bench` on the tiny random checkpoint: one prompt, one repeat, small shapes.

    python -m pytest tests/test_bench.py -q
"""

import json
import math

import pytest
import torch

from dg import bench
from dg.bench_device import device_check, format_device_check
from dg.bench_report import write_report
from dg.loading import load
from dg.testing import tiny_config

HEADLINE = ("dg_vs_reference_time_ratio", "diffusion_vs_ar_speedup", "tpf")


@pytest.fixture
def one_thread():
    """The tiny model is fastest on one thread, and CI's two cores are shared with other jobs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _positive_finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def test_model_bench_reports_positive_finite_ratios_and_dg_equals_generate(checkpoint_dir, one_thread):
    loaded = load(checkpoint_dir)
    loaded.sampler_config = loaded.sampler_config.replace(max_denoising_steps=6)
    result = bench.bench_models(loaded, bench.bench_prompts()[:1], repeats=1, max_new_tokens=32)
    summary = result["summary"]
    for key in (*HEADLINE, "decoder_step_vs_ar_token_cost", "decoder_step_ms", "ar_token_ms"):
        assert _positive_finite(summary[key]), (key, summary[key])
    assert summary["dg_matches_generate"] is True  # same seed, torch backend: token for token
    assert {row["mode"] for row in result["rows"]} == {"dg diffusion", "generate()", "dg AR"}
    for row in result["rows"]:
        assert _positive_finite(row["wall_s"]) and _positive_finite(row["effective_tok_s"])
    # speedup ≈ TPF / (step cost / AR token cost) holds exactly with one repeat
    assert summary["diffusion_vs_ar_speedup"] == pytest.approx(
        summary["tpf"] / summary["decoder_step_vs_ar_token_cost"], rel=1e-6)


def test_sampling_step_bench_reports_gb_s_against_the_measured_bandwidth():
    step = bench.bench_sampling_step("cpu", shape=(1, 16, 1000), repeats=1, bandwidth_mb=16)
    assert set(step["paths"]) == {"torch float32"} and "no CUDA" in step["note"]
    assert _positive_finite(step["bandwidth_gb_s"])
    for values in step["paths"].values():
        assert all(_positive_finite(values[k]) for k in ("ms", "gb_s", "fraction_of_bandwidth"))


def test_device_check_refuses_to_run_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        device_check()


def test_device_check_machinery_runs_on_a_tiny_config(one_thread):
    result = device_check(tiny_config(vocab_size=512, canvas_length=16), device="cpu", dtype=torch.float32,
                          prompt_length=12, steps=3, canvases=2, ar_tokens=5)
    summary = result["summary"]
    assert all(_positive_finite(summary[k]) for k in ("prefill_ms", "ms_per_step", "diffusion_tps", "ar_tps"))
    run = result["diffusion"][0]
    assert run["steps"] == 6 and run["canvases"] == 2 and run["tokens"] > 0  # never stops early, no EOS
    assert "device check" in format_device_check(result)


def test_meta_materialised_model_has_the_buffers_of_a_normally_built_one():
    from transformers import DiffusionGemmaForBlockDiffusion

    from dg.bench_device import materialise

    config = tiny_config()
    reference = DiffusionGemmaForBlockDiffusion(config)
    model = materialise(config, "cpu", torch.float32)
    buffers = dict(model.named_buffers())
    for name, value in reference.named_buffers():
        assert torch.equal(buffers[name], value), name
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def test_cli_prints_a_final_json_line_and_writes_the_report(checkpoint_dir, tmp_path, capsys, one_thread):
    report = tmp_path / "bench.html"
    line = bench.main(["--model", str(checkpoint_dir), "--repeats", "1", "--prompts", "1", "--skip-step",
                       "--max-new-tokens", "16", "--threads", "1", "--report", str(report)])
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed == line and all(_positive_finite(printed[k]) for k in HEADLINE)
    assert report.exists() and "plotly" in report.read_text()


def test_report_is_written_for_a_device_check_result(tmp_path):
    result = {"device_check": {
        "device": "GPU", "prefill_ms": 10.0, "ar": {"tps": 5.0, "ms_per_token": 200.0},
        "diffusion": [{"backend": "torch", "tps": 50.0, "ms_per_step": 20.0}]}}
    assert "Device check on GPU" in write_report(result, tmp_path / "r.html").read_text()
