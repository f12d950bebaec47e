"""Learn's what-diffusion-can-do glue: a search run is the run a seed gives headless; measured figures
are placed only where they were measured."""

import torch

from dg import roofline
from dg.engine.runner import InProcess
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.examples import load_rows
from dg.ui import learn_diffusion
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
    report, _ = learn_diffusion._measured(roofline.RELEASE, "H100 SXM", "fp8", sweep)
    assert [m.mode for m in report] == ["ar", "step", "step"]
    cpu, note = learn_diffusion._measured(tiny, learn_diffusion.CPU, "fp32", sweep)
    assert {m.mode for m in cpu} == {"ar", "step"} and sweep["command"] in note
    for elsewhere in ((roofline.RELEASE, "H200", "fp8"), (roofline.RELEASE, "H100 SXM", "bf16"),
                      (tiny, "H100 SXM", "fp32")):
        assert learn_diffusion._measured(*elsewhere, sweep)[0] == []


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
