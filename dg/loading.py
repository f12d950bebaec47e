"""Load a DiffusionGemma checkpoint with its processor and generation config.

`load()` takes the embedded tiny model by default, a local folder, or a hub id that is already in the
local Hugging Face cache (nothing is downloaded). Weights come from safetensors only and no remote
code is run. bf16 on CUDA when available, float32 on CPU. Weights go from the checkpoint's memory map
straight to the device (transformers' `device_map`, with accelerate), so no copy is staged in host RAM:
on CUDA host memory stays near zero beyond that map; on CPU the weights are the model's only copy.

    python -c "from dg.loading import load; print(load().describe())"
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from dg.ar import warm_ar_path
from dg.config import SamplerConfig
from dg import devices
from dg.devices import pick_device
from dg.passes import eos_token_ids, pad_token_id
from dg.paths import choose_path
from dg.prompts import build_inputs

EMBEDDED_MODEL = Path(__file__).resolve().parent.parent / "assets" / "diffusiongemma-tiny"
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]*[A-Za-z0-9]")
LOCAL_ONLY = {"local_files_only": True, "trust_remote_code": False}  # every from_pretrained: nothing fetched or run


@dataclass
class Loaded:
    model: object  # DiffusionGemmaForBlockDiffusion
    processor: object  # Gemma4Processor
    sampler_config: SamplerConfig
    source: str
    device: torch.device
    dtype: torch.dtype
    path: str = "eager"  # how every run on the model passes through it (dg.paths.choose_path)

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    @property
    def name(self) -> str:
        """The checkpoint by its name: a hub id as it is, a local folder by its own name (never a path on disk)."""
        return Path(self.source).name if Path(self.source).is_dir() else str(self.source)

    @property
    def embedded(self) -> bool:
        """Is this the embedded tiny model (its five skills are all it knows)?"""
        return Path(self.source).resolve() == EMBEDDED_MODEL.resolve()

    @property
    def eos_token_ids(self) -> list[int]:
        return eos_token_ids(self.model)

    @property
    def pad_token_id(self) -> int | None:
        return pad_token_id(self.model)

    def describe(self) -> str:
        n = sum(p.numel() for p in self.model.parameters())
        cfg = self.model.config
        return (f"{self.source}: {n / 1e6:.1f} M params, vocab {cfg.text_config.vocab_size}, "
                f"canvas {cfg.canvas_length}, {self.dtype} on {self.device}, path {self.path}")


def one_line(err: BaseException) -> str:
    """An error's message on one line (at most 300 characters), or its type when it has none."""
    return " ".join(str(err).split())[:300] or type(err).__name__


def resolve(model: str | os.PathLike | None) -> str:
    """Return a local folder or a cached hub id; raise with every place that was looked at."""
    if model is None:
        model = EMBEDDED_MODEL
    path = Path(model).expanduser()
    if path.is_dir():
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path} is a folder but has no config.json: not a checkpoint")
        return str(path)
    name = str(model)
    if HUB_ID.fullmatch(name) and not path.exists():
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.constants import HF_HUB_CACHE

        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return name
        raise FileNotFoundError(
            f"model {name!r} not found: no local folder {path.resolve()} and not in the Hugging Face "
            f"cache {HF_HUB_CACHE} (dg never downloads; fetch it first with `hf download {name}`)")
    raise FileNotFoundError(f"model {name!r} not found: no folder at {path.resolve()}")


def checkpoint_folder(source: str) -> Path:
    """The local folder of a resolved source: the folder itself, or a cached hub id's snapshot."""
    if Path(source).is_dir():
        return Path(source)
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(source, local_files_only=True))


def check_vocab(model, processor, *, exact: bool = False) -> None:
    """Fail loudly when tokenizer and model come from different checkpoints: a silent mismatch decodes
    garbage. Always: no token id beyond the embedding, and the same image placeholder id. `exact`
    (checkpoints whose tokenizer was built with them, like the embedded one): equal sizes too."""
    n_tokens = len(processor.tokenizer)
    vocab = model.config.text_config.vocab_size
    if n_tokens > vocab or (exact and n_tokens != vocab):
        raise ValueError(f"tokenizer has {n_tokens} tokens but the model's vocab_size is {vocab}: "
                         "they come from different checkpoints")
    image_token_id = getattr(processor.tokenizer, "image_token_id", None)
    if image_token_id is not None and model.config.image_token_id != image_token_id:
        raise ValueError(f"model image_token_id {model.config.image_token_id} != tokenizer's {image_token_id}")


@dataclass
class ARModel:
    """A causal LM and its tokenizer, for racing through transformers' `generate()`."""

    model: object
    tokenizer: object
    source: str

    def inputs(self, prompt: str, thinking: bool = False) -> dict:
        """The chat turn the diffusion model gets (dg.prompts.build_inputs), through this model's own template."""
        return build_inputs(self.tokenizer, prompt, thinking=thinking, device=self.model.device)

    @property
    def eos_token_ids(self) -> list[int]:
        return eos_token_ids(self.model) or [self.tokenizer.eos_token_id]


def load_ar_model(source: str, device=None) -> ARModel:
    """A local folder or cached hub id (never downloaded), safetensors only, no remote code. Its weights go
    straight to the device (device_map); on CUDA to the first GPU with room for them (`place_ar_model`,
    sized from the checkpoint's safetensors headers before any tensor is read), or a one-line refusal."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = resolve(source)
    device, dtype = pick_device(device)
    free = devices.free_memory(device)  # looked up at call time: tests stand in for the GPUs
    if free:
        try:
            needed = devices.weights_bytes(checkpoint_folder(path), dtype)
        except (OSError, ValueError, KeyError) as err:  # no weights, or a file that is not safetensors
            raise ValueError(f"cannot load the AR model {source}: {one_line(err)}") from err
        device = devices.place_ar_model(str(source), needed, free)
    try:
        model = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, device_map=device, use_safetensors=True,
                                                     **LOCAL_ONLY).eval()
        tokenizer = AutoTokenizer.from_pretrained(path, **LOCAL_ONLY)
    except Exception as err:  # a broken config, missing or truncated weights: one line
        raise ValueError(f"cannot load the AR model {source}: {one_line(err)}") from err
    return ARModel(model, tokenizer, str(source))


def check_fused(device) -> None:
    """The fused path runs Triton kernels: a one-line ValueError on a device they cannot run on."""
    if torch.device(device).type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(f"--path fused runs dg's Triton kernels: it needs CUDA (or TRITON_INTERPRET=1 on a CPU, "
                         f"for tests), not {device}; use --path graphs or eager")
    try:
        import triton  # noqa: F401
    except ImportError:
        raise ValueError("--path fused runs dg's Triton kernels: pip install triton") from None


def load(model: str | os.PathLike | None = None, device=None, dtype: torch.dtype | None = None,
         path: str = "auto", warm: bool = True) -> Loaded:
    """The checkpoint on `device` (CUDA when available), its processor and sampler defaults; `path` (dg.paths:
    "auto" | "eager" | "compiled" | "graphs" | "fused") is how every run passes through it: a compiled AR step is
    warmed here unless `warm` is False (a process making one run, which pays it then, and only if it is AR),
    graphed passes are captured in the first run that makes each shape, the fused path's norms are swapped in
    here (dg.kernels.fused_norms)."""
    from transformers import AutoProcessor, DiffusionGemmaForBlockDiffusion
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()

    source = resolve(model)
    device, default_dtype = pick_device(device)
    path = choose_path(path, device)
    if path == "fused":
        check_fused(device)  # before the weights load: a CPU without Triton's interpreter cannot run it
    dtype = dtype or default_dtype
    try:
        # device_map: each tensor goes from the safetensors mmap straight to `device`; a 26B checkpoint never
        # stages its ~52 GB of bf16 weights in host RAM first (needs accelerate)
        net = DiffusionGemmaForBlockDiffusion.from_pretrained(
            source, dtype=dtype, device_map=device, use_safetensors=True, **LOCAL_ONLY)
        net.eval()
        processor = AutoProcessor.from_pretrained(source, **LOCAL_ONLY)
        check_vocab(net, processor)
        sampler_config = SamplerConfig.from_generation_config(net.generation_config)
    except Exception as err:  # a broken config, missing or truncated weights, a foreign tokenizer: one line
        raise ValueError(f"cannot load the checkpoint {source}: {one_line(err)}") from err
    if path in ("graphs", "fused") and net.config._attn_implementation != "sdpa":
        net.set_attn_implementation("sdpa")  # the graphed passes' masks are sdpa's boolean ones
    if path == "fused":
        from dg.kernels.fused_norms import fuse_norms

        fuse_norms(net)
    if warm:
        warm_ar_path(net, path)
    return Loaded(net, processor, sampler_config, source, device, dtype, path)


def load_skeleton(source: str, config, generation_config, sampler_config: SamplerConfig, dtype: torch.dtype) -> Loaded:
    """A checkpoint as a process that does not hold its weights sees it: its processor, and its model on the
    meta device (config and generation config, no weights), with inputs built on the CPU. A processor that
    cannot load raises one line."""
    from transformers import AutoProcessor, DiffusionGemmaForBlockDiffusion

    try:
        processor = AutoProcessor.from_pretrained(source, **LOCAL_ONLY)
        with torch.device("meta"):  # shapes only
            skeleton = DiffusionGemmaForBlockDiffusion(config).eval()
        skeleton.generation_config = generation_config
    except Exception as err:
        raise ValueError(f"cannot load the checkpoint {source}: {one_line(err)}") from err
    return Loaded(skeleton, processor, sampler_config, source, torch.device("cpu"), dtype)
