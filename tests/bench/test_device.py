"""The device check's machinery: refused without CUDA, and the same code on a tiny config on the CPU."""

import pytest
import torch

from dg.bench.device import device_check, format_device_check, materialise
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
    assert "device check" in format_device_check(result)


def test_meta_materialised_model_has_the_buffers_of_a_normally_built_one():
    from transformers import DiffusionGemmaForBlockDiffusion

    config = tiny_config()
    reference = DiffusionGemmaForBlockDiffusion(config)
    model = materialise(config, "cpu", torch.float32)
    buffers = dict(model.named_buffers())
    for name, value in reference.named_buffers():
        assert torch.equal(buffers[name], value), name
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
