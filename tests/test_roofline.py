"""The roofline's bounds against hand-computed cases: bytes and FLOPs of an AR token and a canvas step."""

import pytest
import torch

from dg import roofline
from dg.roofline import DEVICES, RELEASE, Device, ModelShape, ar_token, canvas_step, crossover_users, fraction

SMALL = ModelShape("hand", dense=1000, self_conditioning=100, expert=10, layers=2, experts=4, top_k=2, canvas=8,
                   experts_per_canvas=3.0)
ONE = Device("one", bandwidth_gb_s=1.0, tflop_s={"bf16": 1.0, "fp8": 2.0}, memory_gb=None, source="test")


def test_an_ar_token_reads_the_dense_weights_and_its_top_k_experts_once():
    bound = ar_token(SMALL, ONE, "bf16")
    # 2 bytes × (1000 dense + 2 layers × 2 experts × 10); 2 FLOPs per parameter it multiplies through
    assert bound.bytes == 2 * 1040 and bound.flops == 2 * 1040
    assert bound.memory_s == pytest.approx(2080 / 1e9) and bound.compute_s == pytest.approx(2080 / 1e12)
    assert bound.binds == "memory" and bound.seconds == bound.memory_s


def test_two_ar_users_touch_the_distinct_experts_of_uniform_routing():
    bound = ar_token(SMALL, ONE, "bf16", users=2)
    # 4 × (1 − (1 − 2/4)²) = 3 distinct experts per layer; FLOPs double
    assert bound.bytes == 2 * (1000 + 2 * 3 * 10) and bound.flops == 2 * 2 * 1040


def test_a_canvas_step_reads_the_experts_its_canvas_touches_and_multiplies_every_position():
    bound = canvas_step(SMALL, ONE, "fp8")
    # 1 byte × (1100 dense with self-conditioning + 2 layers × 3 experts × 10); 2 × 8 positions × 1140
    assert bound.bytes == 1160 and bound.flops == 2 * 8 * 1140
    assert bound.intensity == pytest.approx(18240 / 1160)
    assert canvas_step(SMALL, ONE, "fp8", canvas=16).flops == 2 * 16 * 1140


def test_the_release_ar_token_and_canvas_step_in_fp8():
    assert RELEASE.total == 25_250_986_752 and RELEASE.active == 3_822_530_560  # report: 25.2 B / 3.8 B
    ar = ar_token(RELEASE, DEVICES["H100 SXM"], "fp8")
    assert ar.bytes == 3_822_530_560 and ar.flops == 2 * 3_822_530_560
    step = canvas_step(RELEASE, DEVICES["H100 SXM"], "fp8")
    # 2,413,001,472 dense + 30 layers × 84 experts × 5,947,392
    assert step.bytes == 2_413_001_472 + 30 * 84 * 5_947_392 == 17_400_429_312
    assert step.flops == 2 * 256 * (2_413_001_472 + 30 * 8 * 5_947_392)
    assert step.memory_s == pytest.approx(17_400_429_312 / 3.35e12) and step.binds == "memory"


def test_the_reports_h100_figures_as_fractions_of_their_bounds():
    h100 = DEVICES["H100 SXM"]
    ar = ar_token(RELEASE, h100, "fp8")
    assert fraction(1 / roofline.REPORT["ar_tok_s"], ar) == pytest.approx(3_822_530_560 / 3.35e12 * 204)
    step = canvas_step(RELEASE, h100, "fp8")
    assert fraction(roofline.REPORT["step_ms"] / 1e3, step) == pytest.approx(17_400_429_312 / 3.35e12 / 13.56e-3)
    with pytest.raises(ValueError, match="measured time"):
        fraction(0.0, step)


def test_the_crossover_is_where_ars_bound_first_reaches_diffusions():
    h100 = DEVICES["H100 SXM"]
    users = crossover_users(RELEASE, h100, "fp8", tpf=19.74)
    assert users is not None and users > 1
    before = roofline.tok_s_bounds(RELEASE, h100, "fp8", 19.74, users - 1)
    at = roofline.tok_s_bounds(RELEASE, h100, "fp8", 19.74, users)
    assert before["ar"] < before["diffusion"] and at["ar"] >= at["diffusion"]


def test_bad_settings_are_one_line_errors():
    with pytest.raises(ValueError, match="dtype must be one of"):
        ar_token(SMALL, ONE, "int3")
    with pytest.raises(ValueError, match="users must be"):
        canvas_step(SMALL, ONE, "bf16", users=0)
    with pytest.raises(ValueError, match="experts per canvas"):
        canvas_step(SMALL, ONE, "bf16", experts_per_canvas=9)
    with pytest.raises(ValueError, match="needs a bandwidth"):
        ar_token(SMALL, roofline.measured_cpu(0.0, 1.0), "fp32")


def test_the_release_preset_is_what_shape_of_counts_on_the_release_config():
    from transformers import DiffusionGemmaForBlockDiffusion

    from dg.bench.device import release_config

    with torch.device("meta"):
        model = DiffusionGemmaForBlockDiffusion._from_config(release_config())
    assert roofline.shape_of(model, "26B-A4B", experts_per_canvas=84.0) == RELEASE


def test_uniform_routing_would_touch_nearly_every_expert_of_a_release_canvas():
    assert RELEASE.uniform_experts_per_canvas() == pytest.approx(128 * (1 - (120 / 128) ** 256))
    assert RELEASE.uniform_experts_per_canvas() > 127.9 > RELEASE.experts_per_canvas


def test_the_gpu_presets_bandwidth_is_the_device_checks_datasheet_figure():
    from dg.bench.device import peak_bandwidth_gb_s

    for name in ("H100 SXM", "H200"):
        device_name = {"H100 SXM": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}[name]
        assert DEVICES[name].bandwidth_gb_s == peak_bandwidth_gb_s(device_name)
