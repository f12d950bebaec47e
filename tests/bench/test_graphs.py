"""The paths benchmark (dg.bench.graphs): eager, graphed and fused passes timed side by side on one model, the
fused path's norms swapped in for its rounds only and its graphs kept apart from the graphed path's.
On a CPU the fused kernel runs in Triton's interpreter (tests/conftest.py), so the shapes are small.

    python -m pytest tests/bench/test_graphs.py -q
"""

import pytest

from dg.bench import gpu_check, graphs
from dg.kernels.fused_norms import is_rms_norm
from dg.prompts import build_inputs
from dg.testing import tiny_model_for


def test_the_three_paths_run_side_by_side_on_one_model_and_leave_it_as_they_found_it(processor):
    model = tiny_model_for(processor, sharpen=40.0)  # its own: whatever earlier tests left on the shared one
    inputs = build_inputs(processor, "What is 12 + 30?")
    result = graphs.compare_paths(model, inputs, steps=1, tokens=2, repeats=1, paths=graphs.PATHS)
    assert result["paths"] == ["eager", "graphs", "fused"]
    for path in graphs.PATHS:
        assert all(result[f"{path}_{k}"] > 0 for k in ("first_step_ms", "step_ms", "first_token_ms", "token_ms"))
    assert result["step_graphs_vs_fused"] == pytest.approx(result["graphs_step_ms"] / result["fused_step_ms"])
    assert result["token_graphs_vs_fused"] == pytest.approx(result["graphs_token_ms"] / result["fused_token_ms"])
    assert result["same_ar_tokens"] and result["fused_same_ar_tokens"]  # float32: rounding flips no token here
    assert result["same_decoder_argmax"] and result["fused_same_decoder_argmax"]
    assert result["fused_max_logit_difference"] < 1e-3
    lines = gpu_check.describe("graphs", result)  # the GPU check's report of its graphs part
    assert lines[-1].startswith("fused: decoder step ") and "x graphs; AR token" in lines[-1], lines
    norms = [m for m in model.modules() if is_rms_norm(m)]
    assert norms and not any("forward" in m.__dict__ for m in norms)  # every norm back on transformers' forward
    assert not hasattr(model, "dg_fused_norms")
    graphed, fused = model.dg_graphed_passes, model.dg_fused_graphed_passes  # each path's captures its own
    assert graphed and fused and not {id(p) for ps in graphed.values() for p in ps} & {
        id(p) for ps in fused.values() for p in ps}


def test_the_result_so_far_is_handed_on_after_every_repeat_and_profiled_path(model, processor):
    inputs = build_inputs(processor, "What is 12 + 30?")
    seen = []  # copies: the same dict grows its profile
    result = graphs.compare_paths(model, inputs, steps=1, tokens=2, repeats=2, profiled=True,
                                  on_round=lambda so_far: seen.append(dict(so_far, profile=dict(so_far.get("profile", {})))))
    assert [s["repeats"] for s in seen] == [1, 2, 2, 2]  # two repeats, then eager's and graphs' profiles
    assert [list(s["profile"]) for s in seen] == [[], [], ["eager"], ["eager", "graphs"]]
    assert all(s["eager_step_ms"] > 0 and s["graphs_token_ms"] > 0 for s in seen)
    assert seen[-1]["profile"] == result["profile"] and result["repeats"] == 2


def test_the_paths_start_with_eager_and_graphs_and_an_unknown_one_is_refused(model, processor):
    inputs = build_inputs(processor, "What is 12 + 30?")
    for paths in (("graphs", "eager"), ("eager", "graphs", "compiled"), ("eager",)):
        with pytest.raises(ValueError, match="paths must be eager, graphs, then optionally fused"):
            graphs.compare_paths(model, inputs, steps=1, tokens=2, repeats=1, paths=paths)


def test_a_profiled_path_reads_as_launches_and_the_gpu_s_busy_share_on_cuda_and_host_ops_on_a_cpu(model, processor):
    inputs = build_inputs(processor, "What is 12 + 30?")
    cpu = graphs.profile_passes(model, inputs, "graphs")
    assert cpu["step"]["host_ops"] > 10 and cpu["token"]["launches"] is None
    assert gpu_check.profile_line("graphs", cpu).startswith("profiled, graphs: step ")
    on_gpu = {"wall_ms": 15.0, "launches": 3.0, "host_ops": 40.0, "gpu_busy_ms": 12.0, "gpu_busy_share": 0.8}
    line = gpu_check.profile_line("graphs", {"step": on_gpu, "token": on_gpu})
    assert line == ("profiled, graphs: step 15 ms, 3 launches, GPU busy 12 ms (80%); token 15 ms, 3 launches, GPU "
                    "busy 12 ms (80%) per pass")
