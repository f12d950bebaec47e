"""The device check's machinery: refused without CUDA, and the same code on a tiny config on the CPU."""

import pytest
import torch

from dg import paths, sampler
from dg.bench.device import device_check, format_device_check, materialise, peak_bandwidth_gb_s, phase_timers
from dg.testing import tiny_config


def test_device_check_refuses_to_run_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit, match="needs a CUDA GPU"):
        device_check()


def test_device_check_machinery_runs_on_a_tiny_config(one_thread, positive_finite):
    result = device_check(tiny_config(vocab_size=512, canvas_length=16), device="cpu", dtype=torch.float32,
                          prompt_length=12, steps=3, canvases=2, ar_tokens=5)
    summary = result["summary"]
    assert all(positive_finite(summary[k]) for k in ("prefill_ms", "ms_per_step", "diffusion_tps", "ar_tps"))
    run = result["diffusion"][0]
    assert run["steps"] == 6 and run["canvases"] == 2 and run["tokens"] > 0  # never stops early, no EOS
    assert run["synchronised_steps"] == 6 and positive_finite(run["encoder_ms_per_canvas"])
    split = run["split_ms_per_step"]
    assert all(positive_finite(split[k]) for k in ("decoder_forward", "sampling", "recording", "total"))
    phases = ("decoder_forward", "sampling", "recording", "other")
    assert abs(sum(split[p] for p in phases) - split["total"]) < 1e-9
    assert "device check" in format_device_check(result) and "decoder_forward_ms" in format_device_check(result)


def test_phase_timers_time_the_sampler_s_own_calls_and_put_them_back():
    calls = ((paths, "decode"), (sampler, "sample_step"), (sampler, "step_record"), (paths, "encode"))
    before = {(module, name): getattr(module, name) for module, name in calls}
    with phase_timers("cpu") as totals:
        assert all(getattr(module, name) is not fn for (module, name), fn in before.items())
    assert all(getattr(module, name) is fn for (module, name), fn in before.items())
    assert totals == {phase: [0.0, 0] for phase in ("decoder_forward", "sampling", "recording", "encoder")}


@pytest.mark.parametrize("name,gb_s", [
    ("NVIDIA H200", 4800.0), ("NVIDIA H100 80GB HBM3", 3350.0), ("NVIDIA H100 PCIe", 2000.0),
    ("NVIDIA H100 NVL", 3900.0), ("NVIDIA A100-SXM4-80GB", 2039.0), ("NVIDIA A100 80GB PCIe", 1935.0),
    ("NVIDIA A100-PCIE-40GB", 1555.0), ("NVIDIA L40S", 864.0), ("NVIDIA L4", 300.0),
    ("NVIDIA GH200 480GB", None), ("NVIDIA GeForce RTX 3090", None),
])
def test_peak_bandwidth_is_the_datasheet_figure_of_the_named_device(name, gb_s):
    assert peak_bandwidth_gb_s(name) == gb_s


def test_meta_materialised_model_has_the_buffers_of_a_normally_built_one():
    from transformers import DiffusionGemmaForBlockDiffusion

    config = tiny_config()
    reference = DiffusionGemmaForBlockDiffusion(config)
    model = materialise(config, "cpu", torch.float32)
    buffers = dict(model.named_buffers())
    for name, value in reference.named_buffers():
        assert torch.equal(buffers[name], value), name
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()


def _unique_bytes(model) -> int:
    tensors = {id(t): t for t in (*model.parameters(), *model.buffers())}  # parameters() already drops shared ones
    return sum(t.numel() * t.element_size() for t in tensors.values())


def test_a_release_shaped_model_allocates_each_shared_weight_once():
    from transformers import DiffusionGemmaForBlockDiffusion

    from dg.bench.device import allocate_once, release_config

    with torch.device("meta"):
        model = DiffusionGemmaForBlockDiffusion._from_config(release_config(), dtype=torch.bfloat16)
    unique = _unique_bytes(model)
    every_name = sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))
    assert every_name > 1.9 * sum(p.numel() for p in model.parameters())  # the encoder and decoder share most weights
    assert allocate_once(model, "meta") == unique  # 47.3 GiB of bf16, not twice that
    assert _unique_bytes(model) == unique
    assert model.lm_head.weight is model.model.decoder.embed_tokens.weight
    assert model.model.encoder.language_model.layers[0].self_attn.q_proj.weight \
        is model.model.decoder.layers[0].self_attn.q_proj.weight


def test_materialised_weights_share_storage_exactly_where_the_built_model_shares_them():
    from transformers import DiffusionGemmaForBlockDiffusion

    config = tiny_config()
    reference = DiffusionGemmaForBlockDiffusion(config)
    groups = {}
    for name, p in reference.named_parameters(remove_duplicate=False):
        groups.setdefault(id(p), []).append(name)
    model = materialise(config, "cpu", torch.float32)
    params = dict(model.named_parameters(remove_duplicate=False))
    pointers = {names[0]: {params[n].data_ptr() for n in names} for names in groups.values()}
    assert all(len(ptrs) == 1 for ptrs in pointers.values())  # shared in the built model: one storage here
    assert len({next(iter(ptrs)) for ptrs in pointers.values()}) == len(groups)  # and nothing else shares


def test_the_summary_takes_the_faster_ar_and_diffusion_of_every_mode_timed():
    from dg.bench.device import summarise

    eager = {"backend": "triton", "fast_paths": "dynamic cache", "ms_per_step": 30.0, "tps": 900.0, "tpf": 9.0}
    compiled = {**eager, "fast_paths": "static cache, compiled", "ms_per_step": 20.0, "tps": 1300.0}
    result = {"device": "gpu", "prefill_ms": 5.0, "diffusion": [eager],
              "ar": {"fast_paths": "dynamic cache", "ms_per_token": 25.0, "tps": 40.0},
              "compiled": {"diffusion": [compiled], "ar": {"fast_paths": "static cache, compiled", "ms_per_token": 5.0,
                                                           "tps": 200.0}}}
    summary = summarise(result)
    assert summary["diffusion_fast_paths"] == summary["ar_fast_paths"] == "static cache, compiled"
    assert summary["ar_tps"] == 200.0 and summary["diffusion_tps"] == 1300.0
    assert summary["decoder_step_vs_ar_token_cost"] == 4.0
