"""Model plumbing: EOS and pad ids, the after-EOS mask, the distribution every record summarises, the host copy,
the static cache and compiled passes."""

import numpy as np
import pytest
import torch

from dg.passes import (TOPK, after_eos, entropy, eos_pad, eos_token_ids, pad_token_id, to_host, top_k,
                       use_fast_paths)
from dg.testing import tiny_random_model


def test_everything_after_the_first_eos_becomes_pad_and_the_eos_itself_stays():
    canvas = torch.tensor([[5, 6, 1, 7, 1, 8]])
    assert after_eos(canvas, [1]).tolist() == [[False, False, False, True, True, True]]
    committed, hit = eos_pad(canvas, [1, 9], pad=0)
    assert hit and committed.tolist() == [[5, 6, 1, 0, 0, 0]]
    assert eos_pad(canvas, [9], pad=0) == (canvas, False) and eos_pad(canvas, [], pad=0)[1] is False


def test_eos_and_pad_ids_come_from_the_generation_config_else_the_model_config():
    model = tiny_random_model(eos_token_ids=(1, 6))
    assert eos_token_ids(model) == [1, 6] and pad_token_id(model) == 0
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = None
    assert eos_token_ids(model) == [model.config.text_config.eos_token_id]
    assert pad_token_id(model) == model.config.text_config.pad_token_id


def test_top_k_and_entropy_describe_the_same_softmax():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0)) * 2
    probs, ids = top_k(logits)
    assert probs.shape == ids.shape == (3, TOPK) and (probs[:, :-1] >= probs[:, 1:]).all()
    full = torch.softmax(logits, dim=-1)
    torch.testing.assert_close(probs, full.gather(-1, ids))
    torch.testing.assert_close(entropy(logits), -(full * full.log()).sum(-1))


def test_top_k_from_a_step_s_softmax_or_log_normalizer_is_the_softmax_s_top_k():
    logits = torch.randn(4, 300, generator=torch.Generator().manual_seed(1)) * 3
    probs, ids = top_k(logits)
    from_softmax = top_k(logits, probs=torch.softmax(logits, dim=-1, dtype=torch.float32))
    assert torch.equal(from_softmax[0], probs) and torch.equal(from_softmax[1], ids)  # bit for bit
    from_normalizer = top_k(logits, log_normalizer=torch.logsumexp(logits, dim=-1))
    assert torch.equal(from_normalizer[1], ids)
    torch.testing.assert_close(from_normalizer[0], probs, rtol=1e-6, atol=1e-7)


def test_to_host_brings_tensors_of_any_dtype_and_shape_through_one_buffer():
    tensors = [torch.arange(7), torch.tensor([True, False, True]), torch.rand(3, 5), torch.tensor(0.625),
               torch.arange(6, dtype=torch.int32).view(2, 3), torch.zeros(0)]
    arrays = to_host(*tensors)
    for tensor, array in zip(tensors, arrays):
        assert array.dtype == tensor.numpy().dtype and array.shape == tuple(tensor.shape)
        assert np.array_equal(array, tensor.numpy())
        assert not np.shares_memory(array, tensor.numpy())  # a copy, also on the CPU

    def root(array):
        while isinstance(array.base, np.ndarray):
            array = array.base
        return array

    assert len({id(root(a)) for a in arrays}) == 1  # one host buffer: one copy from the device
    assert all(a.ctypes.data % a.dtype.itemsize == 0 for a in arrays)  # every array aligned


@pytest.fixture(scope="module")
def embedded():
    """The shipped tiny model (its own copy: these tests change its fast paths) and one short diffusion run."""
    from dg.loading import load
    from dg.prompts import build_inputs

    loaded = load()
    inputs = build_inputs(loaded.processor, "What is 12 + 30?")
    config = loaded.sampler_config.replace(backend="torch", max_new_tokens=2 * loaded.model.config.canvas_length)
    length = inputs["input_ids"].shape[1] + config.max_new_tokens
    yield loaded.model, inputs, config, length
    use_fast_paths(loaded.model, "dynamic")


def _diffusion(model, inputs, config):
    from dg.sampler import generate_diffusion

    torch.manual_seed(0)
    return generate_diffusion(model, inputs, config)


def test_diffusion_on_a_static_cache_takes_the_steps_and_tokens_of_the_growing_one(embedded, one_thread):
    model, inputs, config, length = embedded
    dynamic = _diffusion(model, inputs, config)
    use_fast_paths(model, "static", length)
    try:
        static = _diffusion(model, inputs, config)
    finally:
        use_fast_paths(model, "dynamic")
    assert static.token_ids == dynamic.token_ids and len(static.steps) == len(dynamic.steps)
    assert all((a.argmax == b.argmax).all() and (a.accepted == b.accepted).all()
               for a, b in zip(static.steps, dynamic.steps))
    # attention over the preallocated cache sums in another order: the same decisions, last bits aside
    assert max(float(np.abs(a.entropy - b.entropy).max()) for a, b in zip(static.steps, dynamic.steps)) < 1e-3


def test_a_static_cache_refuses_to_overflow_and_fast_paths_refuse_bad_settings(embedded):
    model, inputs, config, length = embedded
    use_fast_paths(model, "static", 8)
    try:
        with pytest.raises(ValueError, match="static KV cache holds 8 tokens"):
            _diffusion(model, inputs, config)
    finally:
        use_fast_paths(model, "dynamic")
    with pytest.raises(ValueError, match="cache must be one of"):
        use_fast_paths(model, "paged")
    with pytest.raises(ValueError, match="needs max_length"):
        use_fast_paths(model, "static")
    with pytest.raises(ValueError, match="compile=True needs cache='static'"):
        use_fast_paths(model, compile=True)


@pytest.mark.slow  # torch.compile of the encoder and the decoder forward takes ~60 s on two CPU cores
def test_compiled_encoder_and_decoder_passes_take_the_steps_and_tokens_of_eager_ones(embedded):
    model, inputs, config, length = embedded
    use_fast_paths(model, "static", length)
    try:
        eager = _diffusion(model, inputs, config)
        use_fast_paths(model, "static", length, compile=True)
        compiled, again = _diffusion(model, inputs, config), _diffusion(model, inputs, config)
    finally:
        use_fast_paths(model, "dynamic")
    assert compiled.token_ids == again.token_ids == eager.token_ids
    assert [s.n_accepted for s in compiled.steps] == [s.n_accepted for s in eager.steps]
