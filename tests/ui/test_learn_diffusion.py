"""Learn's what-diffusion-can-do glue: a search run is the run a seed gives headless; measured figures
are placed only where they were measured."""

import json

import torch

from dg import roofline
from dg.engine.runner import InProcess
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.examples import load_rows
from dg.ui import learn_diffusion
from dg.view import roofline as roofline_view
from dg.view.sweep_plots import load_sweep


def test_a_search_run_gives_the_tokens_of_a_headless_run_after_the_same_seed():
    loaded = load()
    row = next(r for r in load_rows()["tiny"] if r.thinking)
    trace = learn_diffusion._run(InProcess.of(loaded), row, 3)
    torch.manual_seed(3)
    headless = generate_diffusion(loaded.model, build_inputs(loaded.processor, row.prompt, thinking=True),
                                  loaded.sampler_config)
    assert trace.done and trace.token_ids == headless.token_ids


def test_measured_figures_belong_to_their_model_device_and_precision():
    sweep, tiny = load_sweep(), roofline.shape_of(load().model, "embedded tiny")
    report, _ = learn_diffusion._measured(roofline.RELEASE, "H100 SXM", "fp8", sweep, {})
    assert [m.mode for m in report] == ["ar", "step", "step"]
    cpu, note = learn_diffusion._measured(tiny, learn_diffusion.CPU, "fp32", sweep, {})
    assert {m.mode for m in cpu} == {"ar", "step"} and sweep["command"] in note
    for elsewhere in ((roofline.RELEASE, "H200", "fp8"), (roofline.RELEASE, "H100 SXM", "bf16"),
                      (tiny, "H100 SXM", "fp32")):
        assert learn_diffusion._measured(*elsewhere, sweep, {})[0] == []


def gpu_check_file(folder, device: str, mode: str = "gpu", status: str = "ok"):
    """A file shaped as `bash scripts/gpu-check.sh` writes it (its figures are the test's, not a measurement)."""
    graphs = {"paths": ["eager", "graphs", "fused"], "prompt_tokens": 512, "steps": 12, "tokens": 64,
              **{f"{path}_{kind}_ms": ms for path, (step, token) in
                 {"eager": (100.0, 110.0), "graphs": (40.0, 15.0), "fused": (30.0, 10.0)}.items()
                 for kind, ms in (("step", step), ("token", token))}}
    check = {"mode": mode, "started": "2026-12-01T10:00:00+00:00", "device": {"name": device},
             "versions": {"commit": "abc1234"}, "parts": {"graphs": {"status": status, "result": graphs}}}
    path = folder / f"gpu-check-{device.split()[-1].lower()}-{mode}-{status}.json"
    path.write_text(json.dumps(check))


def test_dg_s_own_gpu_check_is_placed_on_the_release_s_bf16_roofline_of_the_device_it_ran_on(tmp_path):
    gpu_check_file(tmp_path, "NVIDIA H200")
    gpu_check_file(tmp_path, "NVIDIA H100 80GB HBM3", mode="smoke")  # not on a GPU: left out
    gpu_check_file(tmp_path, "NVIDIA RTX 6000 Ada Generation", status="timeout")  # its graphs part did not pass
    checks = roofline_view.gpu_checks(tmp_path)
    assert list(checks) == ["H200"]
    sweep = load_sweep()
    measured, note = learn_diffusion._measured(roofline.RELEASE, "H200", "bf16", sweep, checks)
    assert [(m.mode, round(m.seconds * 1e3)) for m in measured] == [("ar", 110), ("step", 100), ("ar", 15),
                                                                   ("step", 40), ("ar", 10), ("step", 30)]
    assert measured[2].label == "dg graphs: 15 ms per token"
    assert "NVIDIA H200, 2026-12-01 (commit abc1234)" in note and "prompt 512" in note
    setting = roofline_view.Setting(roofline.RELEASE, roofline.DEVICES["H200"], "bf16", roofline.REPORT["tpf"])
    table = roofline_view.bounds_table(setting, measured)
    assert "dg fused: 10 ms per token" in table and "of the bound" in table
    assert learn_diffusion._measured(roofline.RELEASE, "H200", "fp8", sweep, checks)[0] == []  # fp8: not measured
    _, elsewhere = learn_diffusion._measured(roofline.RELEASE, "H100 SXM", "bf16", sweep, checks)
    assert "on an H200 in bf16 (dg's GPU check)" in elsewhere



def test_a_run_without_revisions_says_so_and_the_search_shows_one_it_found():
    loaded = InProcess.of(load())
    rows = [r for r in load_rows()["tiny"] if r.image is None]
    for row in rows:  # the first example whose run at seed 0 holds no revision (found, not picked)
        line, html = learn_diffusion.find_and_show(loaded, rows, row, 0)
        if "No accepted token was changed" in line:
            break
    else:
        raise AssertionError("every example's seed-0 run holds a revision: the search is never needed")
    assert "Searching the shipped examples: run" in line and "changed here" in html
