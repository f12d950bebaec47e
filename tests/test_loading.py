"""Loading checkpoints: local folders, cached hub ids, and loud failures."""

import json
import shutil

import pytest
import torch
from PIL import Image

from dg.loading import check_inputs, load, pick_device, resolve
from dg.prompts import build_inputs


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
