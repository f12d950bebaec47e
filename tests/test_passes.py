"""Model plumbing: EOS and pad ids, the after-EOS mask, and the distribution every record summarises."""

import torch

from dg.passes import TOPK, after_eos, entropy, eos_pad, eos_token_ids, pad_token_id, top_k
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
