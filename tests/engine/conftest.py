"""Fixtures of the engine and UI tests: a separate causal LM to race against, and the app served on a free port
(the engine's runs and files as a client meets them)."""

import pytest
import torch

from dg.engine.runner import InProcess


@pytest.fixture(scope="session")
def loaded(loaded):
    """The shared test checkpoint as the engine runs it: the in-process runner (dg.engine.runner)."""
    return InProcess.of(loaded)


@pytest.fixture(scope="module")
def ar_model_dir(tmp_path_factory, processor):
    """A tiny random causal LM (Llama architecture) with the tiny tokenizer and its chat template."""
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("tiny-ar")
    tok = processor.tokenizer
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                         max_position_embeddings=512, pad_token_id=tok.pad_token_id,
                                         eos_token_id=tok.convert_tokens_to_ids("<turn|>"),
                                         bos_token_id=tok.bos_token_id))
    model.save_pretrained(path, safe_serialization=True)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def url(loaded):
    """The whole app on the random test checkpoint, served in this process."""
    from dg.ui.app import serve

    with serve(loaded) as address:
        yield address
