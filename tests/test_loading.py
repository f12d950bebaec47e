"""Loading checkpoints: local folders, cached hub ids, and loud failures."""

import json
import shutil

import pytest

from dg.loading import load, resolve


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
