"""Model plumbing: EOS and pad ids, the after-EOS mask, the distribution every record summarises, the host copy."""

import numpy as np
import torch

from dg.passes import TOPK, after_eos, entropy, eos_pad, eos_token_ids, pad_token_id, to_host, top_k
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
