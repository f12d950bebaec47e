"""AR mode on the same weights: cached decoding equals a plain no-cache loop, token for token, on a growing or a
static cache, eager or compiled; the path chosen where the model lives, and every run on it."""

import threading

import pytest
import torch

from dg.ar import generate_ar, next_token_logits, warm_ar_path
from dg.config import SamplerConfig
from dg.passes import STATIC_CACHE_BLOCK, static_capacity, use_fast_paths
from dg.paths import choose_path, mode_path, open_passes
from dg.prompts import build_inputs
from dg.testing import tiny_model_for


def tokens(n: int) -> SamplerConfig:
    """An AR run's settings: `n` new tokens (the only knob AR reads)."""
    return SamplerConfig(max_new_tokens=n)


def no_cache_greedy(model, inputs, n):
    """Re-encode the whole sequence for every token: the slow, obviously-correct baseline."""
    ids = inputs["input_ids"]
    extra = {k: v for k, v in inputs.items() if k not in ("input_ids", "attention_mask")}
    out = []
    with torch.no_grad():
        for _ in range(n):
            mm = extra.get("mm_token_type_ids")
            if mm is not None:
                extra["mm_token_type_ids"] = torch.nn.functional.pad(mm, (0, ids.shape[1] - mm.shape[1]))
            hidden = model.model.encoder(input_ids=ids, **extra).last_hidden_state
            token = torch.argmax(next_token_logits(model, hidden[:, -1]), dim=-1)
            out.append(int(token))
            ids = torch.cat([ids, token.view(1, 1)], dim=1)
    return out


def test_cached_ar_decoding_equals_a_no_cache_loop(processor):
    model = tiny_model_for(processor, sharpen=5.0)
    inputs = build_inputs(processor, "Write a sentence about a dog.")
    trace = generate_ar(model, inputs, tokens(12), eos_token_ids=())
    assert trace.token_ids == no_cache_greedy(model, inputs, 12)
    assert trace.end.encoder_forwards == 12, "one forward per token"


def test_cached_ar_decoding_equals_a_no_cache_loop_with_an_image(processor, picture):
    model = tiny_model_for(processor, sharpen=5.0)
    inputs = build_inputs(processor, "Describe the picture.", images=[picture])
    trace = generate_ar(model, inputs, tokens(6), eos_token_ids=())
    assert trace.token_ids == no_cache_greedy(model, inputs, 6)


def test_ar_stops_at_eos_and_sampling_is_reproducible(processor):
    model = tiny_model_for(processor, sharpen=5.0)
    inputs = build_inputs(processor, "Compute 5 + 6.")
    greedy = generate_ar(model, inputs, tokens(8), eos_token_ids=())
    eos = greedy.token_ids[3]
    stopped = generate_ar(model, inputs, tokens(8), eos_token_ids=[eos])
    assert stopped.token_ids == greedy.token_ids[: greedy.token_ids.index(eos) + 1]
    assert stopped.end.finish_reason == "eos"
    torch.manual_seed(4)
    a = generate_ar(model, inputs, tokens(8), eos_token_ids=(), greedy=False, temperature=1.5)
    torch.manual_seed(4)
    b = generate_ar(model, inputs, tokens(8), eos_token_ids=(), greedy=False, temperature=1.5)
    assert a.token_ids == b.token_ids and len(a.tokens) == 8


@pytest.fixture(scope="module")
def embedded():
    """The shipped tiny model, loaded as the app loads it (its own copy: these tests change its fast paths)."""
    from dg.loading import load

    loaded = load()
    yield loaded
    use_fast_paths(loaded.model, "dynamic")


def test_a_static_cache_gives_the_tokens_of_the_growing_one(embedded, one_thread):
    inputs = build_inputs(embedded.processor, "What is 12 + 30?")
    dynamic = generate_ar(embedded.model, inputs, tokens(16), eos_token_ids=())
    use_fast_paths(embedded.model, "static", inputs["input_ids"].shape[1] + 16)
    try:
        static = generate_ar(embedded.model, inputs, tokens(16), eos_token_ids=())
    finally:
        use_fast_paths(embedded.model, "dynamic")
    assert static.token_ids == dynamic.token_ids and len(static.tokens) == 16


def test_the_compiled_path_refuses_a_run_that_crops_its_cache(embedded):
    with pytest.raises(ValueError, match="cannot crop its static cache back"):
        with open_passes(embedded.model, "compiled", 64, rollback=True):
            pass


@pytest.mark.slow  # torch.compile of the encoder takes ~45 s on two CPU cores (once: the warm-up's)
def test_the_compiled_ar_path_warmed_at_load_gives_the_eager_tokens_in_every_run(embedded):
    from dg.engine.runner import InProcess
    from dg.trace import TokenRecord

    inputs = build_inputs(embedded.processor, "Write a sentence about a dog.")
    eos = embedded.eos_token_ids
    eager = generate_ar(embedded.model, inputs, tokens(12), eos_token_ids=eos, path="eager")
    warm_ar_path(embedded.model, "compiled")  # what load() does on the compiled path
    assert ("encoder", "inductor") in embedded.model.dg_compiled  # compiled before any run
    compiled = generate_ar(embedded.model, inputs, tokens(12), eos_token_ids=eos, path="compiled")
    pooled = sum(len(pool) for pool in embedded.model.dg_static_caches.values())
    again = generate_ar(embedded.model, inputs, tokens(12), eos_token_ids=eos, path="compiled")
    runner = InProcess.of(embedded)
    runner.path = "compiled"  # as load(path="compiled") sets it: the engine's AR runs take it
    settings = embedded.sampler_config.replace(max_new_tokens=12)
    records = runner.stream("ar", inputs, settings, None, threading.Event())
    through_engine = [r.token_id for r in records if isinstance(r, TokenRecord)]
    assert compiled.token_ids == again.token_ids == through_engine == eager.token_ids
    # one run after another: each takes the cache the last gave back (reset), so no new one is made
    assert sum(len(pool) for pool in embedded.model.dg_static_caches.values()) == pooled


def test_compiled_runs_at_once_hold_their_own_static_caches_and_give_them_back(embedded):
    import itertools

    from dg.ar import stream_ar
    from dg.trace import TokenRecord

    prompts = [build_inputs(embedded.processor, text) for text in ("What is 12 + 30?", "Write a story.")]
    expected = [generate_ar(embedded.model, inputs, tokens(8), eos_token_ids=()).token_ids for inputs in prompts]
    # the "eager" backend captures the compiled path's whole graph in seconds; the runs interleave token by token
    use_fast_paths(embedded.model, "static", 64, compile="eager")
    try:
        runs = [stream_ar(embedded.model, inputs, tokens(8), eos_token_ids=(), path="compiled") for inputs in prompts]
        made = [[], []]
        for records in itertools.zip_longest(*runs):
            for i, record in enumerate(records):
                if isinstance(record, TokenRecord):
                    made[i].append(record.token_id)
    finally:
        use_fast_paths(embedded.model, "dynamic")
    assert made == expected
    assert max(len(pool) for pool in embedded.model.dg_static_caches.values()) >= 2  # two caches, both back


def test_the_path_is_graphed_on_cuda_and_eager_elsewhere_unless_overridden():
    assert choose_path("auto", "cuda") == "graphs" and choose_path("auto", torch.device("cuda:1")) == "graphs"
    assert choose_path("auto", "cpu") == "eager"
    assert choose_path("compiled", "cpu") == "compiled" and choose_path("eager", "cuda") == "eager"
    with pytest.raises(ValueError, match="got 'fast'"):
        choose_path("fast", "cpu")
    # compiling is AR's alone: diffusion and hybrid run eager beside a compiled AR
    assert mode_path("compiled", "ar") == "compiled"
    assert mode_path("compiled", "diffusion") == mode_path("compiled", "hybrid") == "eager"
    assert mode_path("eager", "ar") == "eager"


def test_a_compiled_run_s_cache_is_rounded_up_so_nearby_lengths_share_a_graph():
    assert static_capacity(1) == static_capacity(STATIC_CACHE_BLOCK) == STATIC_CACHE_BLOCK
    assert static_capacity(STATIC_CACHE_BLOCK + 1) == 2 * STATIC_CACHE_BLOCK
    assert static_capacity(3 * STATIC_CACHE_BLOCK) == 4 * STATIC_CACHE_BLOCK


def test_the_embedded_model_loads_on_the_eager_path_on_a_cpu_and_says_so(embedded):
    assert embedded.path == "eager" and "path eager" in embedded.describe()
    warm_ar_path(embedded.model, "eager")  # nothing to compile


def test_the_whole_graph_of_the_ar_step_is_captured_and_gives_the_same_tokens(embedded):
    # torch.compile's "eager" backend captures the same full graph (fullgraph=True) without generating code
    inputs = build_inputs(embedded.processor, "What is 12 + 30?")
    eager = generate_ar(embedded.model, inputs, tokens(8), eos_token_ids=())
    use_fast_paths(embedded.model, "static", 64, compile="eager")
    try:
        captured = generate_ar(embedded.model, inputs, tokens(8), eos_token_ids=(), path="compiled")
    finally:
        use_fast_paths(embedded.model, "dynamic")
    assert captured.token_ids == eager.token_ids
