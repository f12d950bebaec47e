"""Loading checkpoints: local folders, cached hub ids, and loud failures; a separate AR model placed where it fits."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from PIL import Image

from dg.bench.device import RELEASE_TEXT_CONFIG
from dg.devices import AR_HEADROOM_BYTES, free_memory, pick_device, place_ar_model, weights_bytes
from dg.loading import checkpoint_folder, load, load_ar_model, resolve
from dg.prompts import build_inputs, check_inputs
from dg.testing import tiny_model_for

ROOT = Path(__file__).resolve().parents[1]


def test_a_saved_checkpoint_loads_with_its_processor_and_sampler_defaults(checkpoint_dir):
    loaded = load(checkpoint_dir, device="cpu")
    assert loaded.model.config.canvas_length == 16
    assert loaded.sampler_config.max_denoising_steps == 48
    assert loaded.sampler_config.entropy_bound == pytest.approx(0.1)
    assert loaded.eos_token_ids and "params" in loaded.describe()


def test_a_missing_checkpoint_says_where_it_looked(tmp_path):
    with pytest.raises(FileNotFoundError, match="not found"):
        resolve(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="Hugging Face cache"):
        resolve("nobody/no-such-model")
    with pytest.raises(FileNotFoundError, match="no config.json"):
        resolve(tmp_path)


def test_a_tokenizer_larger_than_the_model_vocab_fails_loudly(checkpoint_dir, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    config["text_config"]["vocab_size"] = 64
    (broken / "config.json").write_text(json.dumps(config))
    with pytest.raises(Exception, match="vocab|size"):
        load(broken, device="cpu")


def broken_copy(checkpoint_dir, tmp_path, name, breaks):
    folder = tmp_path / name
    shutil.copytree(checkpoint_dir, folder)
    breaks(folder)
    return folder


@pytest.mark.parametrize("name, breaks, message", [
    ("no weights", lambda f: (f / "model.safetensors").unlink(), "model.safetensors"),
    ("broken config", lambda f: (f / "config.json").write_text("{not json"), "not a valid JSON"),
    ("empty config", lambda f: (f / "config.json").write_text("{}"), "cannot load"),
    ("truncated weights", lambda f: (f / "model.safetensors").write_bytes(b"\0" * 100), "cannot load"),
])
def test_a_broken_checkpoint_is_one_value_error_naming_the_folder(checkpoint_dir, tmp_path, name, breaks, message):
    folder = broken_copy(checkpoint_dir, tmp_path, name.replace(" ", "-"), breaks)
    with pytest.raises(ValueError, match=message) as err:
        load(folder, device="cpu")
    assert str(folder) in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("device", ["bogus", "meta", "cuda:99" if torch.cuda.is_available() else "cuda"])
def test_a_device_this_machine_lacks_is_refused_before_loading(device):
    with pytest.raises(ValueError, match=f"device '{device}' is not usable here"):
        pick_device(device)


def test_inputs_beyond_the_context_or_too_thin_for_the_vision_tower_are_refused(picture):
    embedded = load(device="cpu")  # its vision tower has 128 position embeddings a side
    model, config = embedded.model, embedded.sampler_config
    limit = model.config.text_config.max_position_embeddings
    inputs = build_inputs(embedded.processor, "Hi")
    check_inputs(model, inputs, config)
    with pytest.raises(ValueError, match=f"exceeds the model's {limit} positions"):
        check_inputs(model, inputs, config.replace(max_new_tokens=limit))
    check_inputs(model, build_inputs(embedded.processor, "Hi", images=picture), config)
    check_inputs(model, build_inputs(embedded.processor, "Hi", images=Image.new("RGB", (1000, 48))), config)
    side = model.config.vision_config.position_embedding_size
    for size in ((4000, 1), (3000, 20), (1, 4000), (2000, 10)):  # over 128 patches a side at 2×2 pooling
        thin = build_inputs(embedded.processor, "Hi", images=Image.new("RGB", size, "white"))
        with pytest.raises(ValueError, match=f"at most {side}; crop it closer to square"):
            check_inputs(model, thin, config)


def saved_bytes(model) -> int:
    """Bytes of a model's distinct saved tensors (a tied weight counts once)."""
    return sum({t.data_ptr(): t.numel() * t.element_size() for t in model.state_dict().values()}.values())


def cache_snapshot(cache, repo_id: str, folder) -> None:
    """Lay `folder` out as a Hugging Face cache holds a downloaded hub id: refs/main → snapshots/<commit>."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("0" * 40)
    shutil.copytree(folder, repo / "snapshots" / ("0" * 40))


def test_the_weights_estimate_from_safetensors_headers_is_what_a_load_takes(checkpoint_dir, tmp_path, monkeypatch):
    import huggingface_hub.constants

    model = load(checkpoint_dir, device="cpu").model  # float32, the checkpoint's own dtype
    assert weights_bytes(checkpoint_dir, torch.float32) == saved_bytes(model)
    in_bf16 = load(checkpoint_dir, device="cpu", dtype=torch.bfloat16).model
    assert weights_bytes(checkpoint_dir, torch.bfloat16) == saved_bytes(in_bf16)
    sharded = tmp_path / "sharded"
    model.save_pretrained(sharded, max_shard_size="100KB")
    assert (sharded / "model.safetensors.index.json").exists() and len(list(sharded.glob("*.safetensors"))) > 1
    assert weights_bytes(sharded, torch.float32) == saved_bytes(model)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    cache_snapshot(tmp_path / "hub", "someone/sharded", sharded)
    assert weights_bytes(checkpoint_folder(resolve("someone/sharded")), torch.float32) == saved_bytes(model)


def test_a_checkpoint_without_safetensors_weights_has_no_estimate(checkpoint_dir, tmp_path):
    none = broken_copy(checkpoint_dir, tmp_path, "none", lambda f: (f / "model.safetensors").unlink())
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        weights_bytes(none, torch.float32)
    garbage = broken_copy(checkpoint_dir, tmp_path, "garbage",
                          lambda f: (f / "model.safetensors").write_bytes(b"\xff" * 99))
    with pytest.raises(ValueError, match="not a safetensors file"):
        weights_bytes(str(garbage), torch.float32)


def test_free_memory_lists_the_requested_gpu_first_with_what_torch_holds_unused(monkeypatch):
    driver_free, reserved, allocated = [10, 20, 30], [5, 0, 7], [1, 0, 7]  # fake figures for three GPUs
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 3)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda i: (driver_free[i], 100))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i: reserved[i])
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda i: allocated[i])
    free = free_memory(torch.device("cuda"))
    assert list(free.items()) == [(torch.device("cuda", 1), 20), (torch.device("cuda", 0), 14),
                                  (torch.device("cuda", 2), 30)]
    assert list(free_memory(torch.device("cuda", 2))) == [torch.device("cuda", i) for i in (2, 0, 1)]
    assert free_memory(torch.device("cpu")) == {}


# Peak RSS of each load() in a fresh process, measured after the imports. Not ru_maxrss: a child started by
# subprocess inherits its parent's peak in it (Linux keeps the larger of the two across exec), so pytest's
# own size would hide the load. The kernel's VmHWM is reset to the current RSS before each load (clear_refs).
PEAK_RSS_OF_LOADS = """
import gc, json, sys
import torch
import transformers.models.diffusion_gemma.modeling_diffusion_gemma  # imports are not the load
from dg.loading import load

def status(key):
    line = next(l for l in open("/proc/self/status") if l.startswith(key + ":"))
    return int(line.split()[1]) * 1024

torch.set_num_threads(1)
peaks = {}
for dtype in sys.argv[2:]:
    gc.collect()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    start = status("VmHWM")
    model = load(sys.argv[1], device="cpu", dtype=getattr(torch, dtype)).model
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    peaks[dtype] = {"growth": status("VmHWM") - start, "weights": weights}
    del model
print(json.dumps(peaks))
"""
LOAD_SLACK = 64 * 2**20  # transformers' own bookkeeping during a load (measured: ~16 MB)
HELD_COPIES = {
    "bfloat16": 0,  # dg's CUDA dtype and the file's own: the weights are views of the memory map
    "float32": 1,  # dg's CPU dtype: the float32 weights are the model itself, in host RAM (once)
}


@pytest.fixture(scope="module")
def release_vocab_checkpoint(tmp_path_factory, processor):
    """A random checkpoint with the release's vocabulary and bf16 file, hidden size 256: the tied 262,144 × 256
    embedding is 95 % of its 71 M parameters (141 MB in bf16), so a stray copy of the weights stands out."""
    path = tmp_path_factory.mktemp("release-vocab")
    model = tiny_model_for(processor, vocab_size=RELEASE_TEXT_CONFIG["vocab_size"], hidden_size=256)
    model.to(torch.bfloat16).save_pretrained(path)
    model.generation_config.save_pretrained(path)
    processor.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def load_peaks(release_vocab_checkpoint):
    """dtype → peak RSS growth of its load and the loaded weights' bytes, from one fresh process."""
    proc = subprocess.run([sys.executable, "-c", PEAK_RSS_OF_LOADS, str(release_vocab_checkpoint), *HELD_COPIES],
                          capture_output=True, text=True, timeout=120, cwd=ROOT,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("dtype", HELD_COPIES)
def test_loading_holds_at_most_one_copy_of_the_weights_in_host_memory(release_vocab_checkpoint, load_peaks, dtype):
    """Weights go from the safetensors memory map straight to the device (device_map). The peak RSS of a load
    stays within: the copies of the loaded weights the device itself holds in host RAM (HELD_COPIES) + the
    file (its mapped pages count in RSS once read) + LOAD_SLACK. A loader that built the model in host RAM and
    then copied it (to the device, or over a random init) would hold one more copy, and exceed the bound by far."""
    growth, weights = load_peaks[dtype]["growth"], load_peaks[dtype]["weights"]
    file_bytes = (release_vocab_checkpoint / "model.safetensors").stat().st_size
    bound = HELD_COPIES[dtype] * weights + file_bytes + LOAD_SLACK
    assert growth <= bound, (f"peak RSS grew {growth / 1e6:.0f} MB loading {weights / 1e6:.0f} MB of {dtype} "
                             f"weights; bound {bound / 1e6:.0f} MB")


GB = 10**9
CUDA0, CUDA1 = torch.device("cuda", 0), torch.device("cuda", 1)


def test_an_ar_model_that_fits_nowhere_is_refused_in_one_line_that_says_what_fits():
    with pytest.raises(ValueError) as err:  # an 80 GB H100 beside the 52 GB diffusion model
        place_ar_model("google/gemma-4-26B-A4B-it", 50 * GB, {CUDA0: 26 * GB})
    message = str(err.value)
    assert "\n" not in message and message.startswith("--ar-model google/gemma-4-26B-A4B-it needs 50.0 GB")
    fits = 26 - AR_HEADROOM_BYTES / GB
    assert "cuda:0 has 26.0 GB free" in message and f"up to {fits:.1f} GB of weights fits (on cuda:0)" in message
    assert "the same-weights AR race (leave out --ar-model) always fits" in message
    with pytest.raises(ValueError, match="no other GPU has room \\(30.0 GB free at most\\).* fits \\(on cuda:1\\)"):
        place_ar_model("big", 50 * GB, {CUDA0: 26 * GB, CUDA1: 30 * GB})


def test_an_ar_model_goes_beside_the_diffusion_model_when_it_fits_else_to_another_gpu_with_room():
    headroom = AR_HEADROOM_BYTES
    assert place_ar_model("m", 50 * GB, {CUDA0: 50 * GB + headroom, CUDA1: 140 * GB}) == CUDA0
    assert place_ar_model("m", 50 * GB, {CUDA0: 50 * GB + headroom - 1, CUDA1: 140 * GB}) == CUDA1
    assert place_ar_model("m", 50 * GB, {CUDA1: 26 * GB, CUDA0: 60 * GB}) == CUDA0


def test_loading_an_ar_model_checks_the_room_its_weights_need_before_reading_them(ar_model_dir, monkeypatch):
    import dg.devices

    needed = weights_bytes(checkpoint_folder(str(ar_model_dir)), torch.float32)
    cpu = torch.device("cpu")  # the CPU stands in for a GPU: the same check with fake free memory
    monkeypatch.setattr(dg.devices, "free_memory", lambda device: {cpu: needed + AR_HEADROOM_BYTES - 1})
    with pytest.raises(ValueError, match=f"needs {needed / GB:.1f} GB of weights"):
        load_ar_model(str(ar_model_dir))
    monkeypatch.setattr(dg.devices, "free_memory", lambda device: {cpu: needed + AR_HEADROOM_BYTES})
    assert load_ar_model(str(ar_model_dir)).model.device == cpu
