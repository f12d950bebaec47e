"""Shared fixtures: a small trained tokenizer/processor, tiny random-weights DiffusionGemmas, and real
traces from them built once per session."""

import functools
import os

import pytest

if "PYTEST_XDIST_WORKER" in os.environ:
    # one of several test processes sharing the cores: one thread each (two on a shared core run ~5x slower)
    os.environ["OMP_NUM_THREADS"] = "1"

import torch  # noqa: E402

if not torch.cuda.is_available():
    # before anything imports triton (Gemma4Processor does): its kernels then run in the interpreter on CPU
    os.environ.setdefault("TRITON_INTERPRET", "1")

from PIL import Image, ImageDraw  # noqa: E402

from dg.ar import generate_ar  # noqa: E402
from dg.config import SamplerConfig  # noqa: E402
from dg.prompts import build_inputs  # noqa: E402
from dg.sampler import generate_diffusion  # noqa: E402
from dg.testing import tiny_model_for  # noqa: E402
from dg.tiny.tokenizer import small_processor  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))  # CI: both cores; beside a training run: one

PROMPT = "Compute 12 + 30."  # the prompt of the shared traces
TRACE_STEPS = 4
TRACE_SEED = 0


@pytest.fixture(scope="session")
def processor():
    """A real Gemma4Processor around a small BPE trained on the skills corpus (a few seconds)."""
    return small_processor()


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


@pytest.fixture
def one_thread():
    """The tiny model is fastest on one thread, and CI's two cores are shared with other jobs."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def picture():
    """A red circle on white: an image prompt the tiny vision tower accepts."""
    img = Image.new("RGB", (224, 224), "white")
    ImageDraw.Draw(img).ellipse((40, 40, 120, 120), fill="red")
    return img


def _trace_config(model, max_new_tokens=32):
    return SamplerConfig.from_generation_config(model.generation_config, max_denoising_steps=TRACE_STEPS,
                                                max_new_tokens=max_new_tokens, backend="torch")


@functools.cache
def _model(processor):
    return tiny_model_for(processor, sharpen=40.0)


@functools.cache
def _diffusion(processor):
    model = _model(processor)
    torch.manual_seed(TRACE_SEED)
    return generate_diffusion(model, build_inputs(processor, PROMPT, thinking=True), _trace_config(model))


@functools.cache
def _eos(processor):
    """Same run, but a token the first canvas commits is declared an EOS, so that canvas ends early."""
    model = tiny_model_for(processor, sharpen=40.0)
    pad = model.generation_config.pad_token_id
    committed = [int(t) for t in _diffusion(processor).canvases[0].committed]
    eos = next(t for t in committed[3:] if t != pad)
    model.generation_config.eos_token_id = [*model.generation_config.eos_token_id, eos]
    torch.manual_seed(TRACE_SEED)
    return generate_diffusion(model, build_inputs(processor, PROMPT, thinking=True), _trace_config(model, 16))


@functools.cache
def _ar(processor):
    return generate_ar(_model(processor), build_inputs(processor, PROMPT, thinking=True), SamplerConfig(max_new_tokens=12),
                       eos_token_ids=[1])


@pytest.fixture
def model(processor):
    """The tiny random model with peaky logits (its canvases settle), shared by the trace fixtures."""
    shared = _model(processor)
    # a test that fused its norms in place would slow every later test ~100× (Triton's interpreter)
    assert not hasattr(shared, "dg_fused_norms"), "a test changed the shared model: fuse a copy"
    return shared


@pytest.fixture
def diffusion_trace(processor):
    """Two canvases of four steps each, thinking on."""
    return _diffusion(processor)


@pytest.fixture
def eos_trace(processor):
    return _eos(processor)


@pytest.fixture
def ar_trace(processor):
    return _ar(processor)


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
