"""Shared fixtures: a small trained tokenizer/processor and tiny random-weights DiffusionGemmas."""

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(2)


@pytest.fixture(scope="session")
def processor():
    """A real Gemma4Processor around a small BPE trained on the skills corpus (a few seconds)."""
    from dg.tiny.skills import corpus
    from dg.tiny.tokenizer import TokenizerConfig, build_processor

    return build_processor(corpus(0, 300), TokenizerConfig(vocab_size=400, corpus_size=300))


@pytest.fixture(scope="session")
def checkpoint_dir(tmp_path_factory, processor):
    """A saved random tiny checkpoint (weights, generation config, processor) loadable with dg.loading."""
    from dg.testing import tiny_random_checkpoint

    path = tmp_path_factory.mktemp("tiny-random")
    tiny_random_checkpoint(path, processor, canvas_length=16)
    return path


@pytest.fixture(scope="session")
def loaded(checkpoint_dir):
    """The saved random checkpoint loaded the way the app and CLI load one."""
    from dg.loading import load

    return load(checkpoint_dir)


@pytest.fixture(scope="session")
def config(loaded):
    """Short runs: few steps, two canvases at most, the torch path (bit-exact with generate())."""
    return loaded.sampler_config.replace(max_denoising_steps=6, max_new_tokens=32, backend="torch")


def make_model(processor, sharpen: float = 1.0, seed: int = 0, **kwargs):
    """Random tiny model; `sharpen` scales the tied embedding so logits get peaky and canvases settle."""
    from dg.testing import tiny_random_model

    tok = processor.tokenizer
    special = {"image_token_id": tok.convert_tokens_to_ids("<|image|>"),
               "boi_token_id": tok.convert_tokens_to_ids("<|image>"),
               "eoi_token_id": tok.convert_tokens_to_ids("<image|>")}
    kwargs.setdefault("canvas_length", 16)
    model = tiny_random_model(seed, eos_token_ids=[1, tok.convert_tokens_to_ids("<turn|>")],
                              vocab_size=len(tok), special_ids=special, **kwargs)
    with torch.no_grad():
        model.lm_head.weight.mul_(sharpen)
    return model
