"""The graphed path (dg.graphs) on a CPU, where its buffers go through the same calls eagerly: every pass equals
the eager pass on transformers' StaticCache bit for bit, matches the growing cache past the sliding window, a
crop is exact, runs at once keep apart, the pool gives passes back reset, and a pass past capacity is refused.
A CUDA machine also runs the capture-and-replay check."""

import pytest
import torch

from dg.graphs import GraphedPasses, captures, graphed_passes, pass_masks
from dg.loading import load
from dg.passes import new_cache, split_inputs, static_capacity
from dg.paths import EagerPasses, open_passes
from dg.prompts import build_inputs
from dg.testing import tiny_model_for


@pytest.fixture(scope="module")
def embedded():
    return load()


def prompt(processor, text="Compute 12 + 30.", **kwargs):
    return split_inputs(build_inputs(processor, text, thinking=True, **kwargs))


def random_canvases(model, count, seed=0):
    g = torch.Generator().manual_seed(seed)
    length, vocab = model.config.canvas_length, model.config.text_config.vocab_size
    return [torch.randint(0, vocab, (1, length), generator=g) for _ in range(count)]


def self_conditioning(model, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(1, model.config.canvas_length, model.config.text_config.vocab_size, generator=g)


def every_pass(passes, ids, extra, canvases, sc):
    """The prefill, then per canvas a decoder pass without and with self-conditioning and its commit, then an
    AR token and a decoder pass after it: each pass's output."""
    with torch.no_grad():
        out = [passes.prefill(ids, extra)]
        for canvas in canvases:
            out += [passes.decode(canvas, None), passes.decode(canvas, sc), passes.encode(canvas)]
        out += [passes.encode(canvases[0][:, :1]), passes.decode(canvases[-1], sc)]
    return out


def test_every_graphed_pass_equals_the_eager_pass_on_a_static_cache_bit_for_bit(embedded, one_thread):
    model = embedded.model
    ids, extra = prompt(embedded.processor)
    canvases, sc = random_canvases(model, 2), self_conditioning(model)
    eager = every_pass(EagerPasses(model, new_cache(model, static_capacity(256), "static")), ids, extra, canvases, sc)
    with graphed_passes(model, 256) as passes:
        assert not passes.capture  # the CPU stand-in
        graphed = every_pass(passes, ids, extra, canvases, sc)
        assert passes.cached == ids.shape[1] + 2 * model.config.canvas_length + 1
    assert [tuple(t.shape) for t in graphed] == [tuple(t.shape) for t in eager]
    for i, (a, b) in enumerate(zip(eager, graphed)):
        assert torch.equal(a, b), f"pass {i} differs by {(a - b).abs().max():.3g}"


def test_a_prefill_with_an_image_then_the_graphed_passes_equal_the_eager_ones(embedded, one_thread, picture):
    model = embedded.model
    ids, extra = prompt(embedded.processor, "What colour is the circle?", images=[picture])
    assert "pixel_values" in extra
    canvases, sc = random_canvases(model, 1, seed=4), self_conditioning(model, seed=5)
    eager = every_pass(EagerPasses(model, new_cache(model, static_capacity(256), "static")), ids, extra, canvases, sc)
    with graphed_passes(model, 256) as passes:
        graphed = every_pass(passes, ids, extra, canvases, sc)
    assert all(torch.equal(a, b) for a, b in zip(eager, graphed))


def test_past_the_sliding_window_the_passes_match_the_growing_cache_generate_uses(model, processor, one_thread):
    # the random model's window is 64 tokens: a 40-token prompt and four canvases of 16 run well past it
    window = model.config.text_config.sliding_window
    ids, extra = prompt(processor)
    canvases, sc = random_canvases(model, 4), self_conditioning(model)
    eager = every_pass(EagerPasses(model, new_cache(model, implementation="dynamic")), ids, extra, canvases, sc)
    with graphed_passes(model, 256) as passes:
        graphed = every_pass(passes, ids, extra, canvases, sc)
        assert passes.cached > window + 2 * model.config.canvas_length
    for a, b in zip(eager, graphed):
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-4)  # a wrong window moves logits by units
        assert torch.equal(a.argmax(-1), b.argmax(-1))


def test_a_run_that_crops_a_rejected_draft_equals_a_fresh_run_bit_for_bit(model, processor, one_thread):
    ids, extra = prompt(processor)
    c0, c1, draft = random_canvases(model, 3, seed=2)
    sc = self_conditioning(model)
    with torch.no_grad(), graphed_passes(model, 256) as passes:
        passes.prefill(ids, extra)
        passes.encode(c0)
        start = passes.cached
        passes.encode(draft)  # crosses the 64-token window: the keys it pushes out must come back
        passes.crop(start)
        cropped = [passes.encode(c1), passes.decode(c0, sc), passes.encode(c0[:, :1]), passes.decode(c1, None)]
    with torch.no_grad(), graphed_passes(model, 256) as passes:
        passes.prefill(ids, extra)
        passes.encode(c0)
        fresh = [passes.encode(c1), passes.decode(c0, sc), passes.encode(c0[:, :1]), passes.decode(c1, None)]
    assert start < model.config.text_config.sliding_window < start + model.config.canvas_length
    assert all(torch.equal(a, b) for a, b in zip(cropped, fresh))


def test_crop_keeps_only_positions_already_cached(model, processor):
    ids, extra = prompt(processor)
    with torch.no_grad(), graphed_passes(model, 128) as passes:
        passes.prefill(ids, extra)
        n = ids.shape[1]
        with pytest.raises(ValueError, match=f"crop keeps 0 to {n} cached positions, got {n + 1}"):
            passes.crop(n + 1)
        passes.crop(3)
        assert passes.cached == 3


def test_two_runs_at_once_hold_their_own_caches_and_do_not_disturb_each_other(model, processor, one_thread):
    prompts = [prompt(processor), prompt(processor, "Write a sentence about a cat.")]
    canvases = random_canvases(model, 2, seed=7)
    sc = self_conditioning(model)

    def alone(ids, extra, canvas):
        with torch.no_grad(), graphed_passes(model, 128) as passes:
            return [passes.prefill(ids, extra), passes.encode(canvas), passes.decode(canvas, sc)]

    expected = [alone(*p, c) for p, c in zip(prompts, canvases)]
    with torch.no_grad(), graphed_passes(model, 128) as a, graphed_passes(model, 128) as b:
        assert a is not b and a.cache is not b.cache
        runs = list(zip((a, b), prompts, canvases))
        outputs = [[p.prefill(*x)] for p, x, _ in runs]
        assert a.cache.layers[0].keys.data_ptr() != b.cache.layers[0].keys.data_ptr()
        for out, (p, _, canvas) in zip(outputs, runs):
            out.append(p.encode(canvas))
        for out, (p, _, canvas) in zip(outputs, runs):
            out.append(p.decode(canvas, sc))
    for got, want in zip(outputs, expected):
        assert all(torch.equal(x, y) for x, y in zip(got, want))


def test_the_pool_gives_a_run_s_passes_back_reset_and_lends_them_again(processor, one_thread):
    model = tiny_model_for(processor, sharpen=40.0)  # a model of its own: the pool lives on it
    ids, extra = prompt(processor)
    (canvas,) = random_canvases(model, 1)
    with torch.no_grad(), graphed_passes(model, 100) as first:
        hidden = [first.prefill(ids, extra), first.encode(canvas)]
        graphs = dict(first._graphs)
    pool = model.dg_graphed_passes[static_capacity(100)]
    assert pool == [first] and first.cached == 0
    assert all(not layer.keys.any() and not layer.values.any() for layer in first.cache.layers)
    assert int(first.cache.offset) == 0
    with torch.no_grad(), graphed_passes(model, 300) as again:  # same capacity: the same passes, graphs kept
        assert again is first and again._graphs == graphs and pool == []
        assert all(torch.equal(a, b) for a, b in zip(hidden, [again.prefill(ids, extra), again.encode(canvas)]))
    with graphed_passes(model, 600) as bigger:
        assert bigger is not first and bigger.capacity == static_capacity(600)


def test_a_pass_past_the_static_cache_s_capacity_raises_a_clear_value_error(model, one_thread):
    capacity, length = static_capacity(64), model.config.canvas_length
    ids = torch.randint(0, model.config.text_config.vocab_size, (1, capacity - length + 1))
    with torch.no_grad(), graphed_passes(model, 64) as passes:
        with pytest.raises(ValueError, match=f"holds {capacity} tokens; this prefill of {capacity + 1}"):
            passes.prefill(torch.zeros((1, capacity + 1), dtype=torch.long), {})
        passes.prefill(ids, {})
        canvas = ids[:, :length]
        with pytest.raises(ValueError, match=f"holds {capacity} tokens; this encoder pass of {length}"):
            passes.encode(canvas)
        with pytest.raises(ValueError, match=f"holds {capacity} tokens; this decoder pass of {length}"):
            passes.decode(canvas, None)
        assert passes.cached == ids.shape[1]  # a refused pass leaves the run as it was
        passes.encode(canvas[:, :1])


def test_the_graphed_path_takes_token_ids_only_after_the_prefill(model):
    with graphed_passes(model, 64) as passes, pytest.raises(ValueError, match="token ids only.*token_type_ids"):
        passes.prefill(torch.zeros((1, 4), dtype=torch.long), {"token_type_ids": torch.zeros((1, 4))})


def test_the_graphed_path_refuses_attention_that_does_not_read_its_boolean_masks(processor):
    model = tiny_model_for(processor)
    model.set_attn_implementation("eager")
    with pytest.raises(ValueError, match="runs sdpa attention, got 'eager'"):
        GraphedPasses(model, 64)


def test_a_run_opens_the_graphed_path_through_open_passes_and_crops_there(model, processor):
    with open_passes(model, "graphs", 100, rollback=True) as passes:
        assert isinstance(passes, GraphedPasses) and passes.capacity == static_capacity(100)
        assert passes.device == model.device and passes.cached == 0


def test_the_masks_hold_the_window_of_the_growing_cache():
    kinds = ["sliding_attention", "full_attention"]
    encoder = pass_masks(kinds, 4, 2, 8, 3, decoder=False, device="cpu")
    assert encoder["full_attention"][0, 0].int().tolist() == [[1, 1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1, 0, 0]]
    assert encoder["sliding_attention"][0, 0].int().tolist() == [[0, 0, 1, 1, 1, 0, 0, 0], [0, 0, 0, 1, 1, 1, 0, 0]]
    # a decoder pass over a 2-token canvas at 4: every cached key (full), the last W − 1 = 2 (sliding), and the
    # canvas's own keys at slots 4 and 5 of the 8 + 2 the decoder attends over
    decoder = pass_masks(kinds, 4, 2, 8, 3, decoder=True, device="cpu")
    assert decoder["full_attention"][0, 0, 0].int().tolist() == [1, 1, 1, 1, 1, 1, 0, 0, 0, 0]
    assert decoder["sliding_attention"][0, 0, 1].int().tolist() == [0, 0, 1, 1, 1, 1, 0, 0, 0, 0]


def test_passes_are_captured_on_cuda_and_called_eagerly_elsewhere():
    assert captures("cuda") and captures("cuda:0") and not captures("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_a_replayed_graph_equals_the_eager_call_on_the_same_buffers_on_cuda(processor):
    model = tiny_model_for(processor, sharpen=40.0).cuda()
    ids, extra = prompt(processor)
    ids, extra = ids.cuda(), {k: v.cuda() for k, v in extra.items()}
    canvases = [c.cuda() for c in random_canvases(model, 2)]
    sc = self_conditioning(model).cuda()
    eager = every_pass(GraphedPasses(model, 256, capture=False), ids, extra, canvases, sc)
    graphed = every_pass(GraphedPasses(model, 256, capture=True), ids, extra, canvases, sc)
    assert all(torch.equal(a, b) for a, b in zip(eager, graphed))
