"""Where a model runs: the device and its dtype, the CPU threads a run takes, the memory each GPU has free, what
a checkpoint's weights take (from its safetensors headers, before any tensor is read), and which GPU a second
model fits on.

    python -m pytest tests/test_loading.py -q
"""

import json
import math
import os
from pathlib import Path

import torch

FLOAT_DTYPES = {"F64", "F32", "F16", "BF16"}  # safetensors dtypes that from_pretrained(dtype=...) casts
MAX_HEADER_BYTES = 100 * 2**20  # a safetensors header is JSON of names and shapes: a few MB at most


# Free memory kept beside a separate AR model's weights on its GPU: every lane's working memory during a race
# (the diffusion side's logits over a 256-token canvas are 256 × 262,144 × 4 B ≈ 0.27 GB each, a few alive
# per step; the KV caches of race-length replies) and the CUDA allocator's slack.
AR_HEADROOM_BYTES = 4 * 10**9


def pick_device(device=None) -> tuple[torch.device, torch.dtype]:
    """The device (default: cuda when available) and its dtype; a ValueError for a device this machine
    does not have or torch does not know."""
    if not device:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        device = torch.device(device)
        if device.type not in ("cpu", "cuda"):
            raise RuntimeError("dg runs on cpu or cuda[:N]")
        torch.empty(0, device=device)  # fails here, not half-way through loading, on a missing GPU
    except (RuntimeError, AssertionError) as err:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"device {str(device)!r} is not usable here: {reason}") from None
    return device, torch.bfloat16 if device.type == "cuda" else torch.float32


def share_cpu(device) -> None:
    """On CPU, one intra-op thread per run (half the cores): the app's UI thread or a race's other lanes
    gets a core of its own instead of every pool spinning against the others, and the CLI runs as the app
    does (on 2 loaded cores, two threads ran ~5× slower than one)."""
    if torch.device(device).type == "cpu":
        torch.set_num_threads(max(1, (os.cpu_count() or 2) // 2))


def safetensors_header(file: Path) -> dict:
    """Tensor name → dtype, shape and byte offsets, read from the file's header (no tensor is read)."""
    with open(file, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size <= MAX_HEADER_BYTES:
            raise ValueError(f"{file} is not a safetensors file (header of {size} bytes)")
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return header


def weights_bytes(folder: str | os.PathLike, dtype: torch.dtype) -> int:
    """Bytes the checkpoint in `folder` takes once loaded in `dtype`, from its safetensors headers (and index)
    alone: floating tensors at `dtype`'s size, the others (integer, fp8) at their stored size."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.exists():
        files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
    elif (folder / "model.safetensors").exists():
        files = ["model.safetensors"]
    else:
        raise FileNotFoundError(f"{folder} has no model.safetensors nor model.safetensors.index.json")
    total = 0
    for name in files:
        for tensor in safetensors_header(folder / name).values():
            stored = tensor["data_offsets"][1] - tensor["data_offsets"][0]
            total += math.prod(tensor["shape"]) * dtype.itemsize if tensor["dtype"] in FLOAT_DTYPES else stored
    return total


def free_memory(device: torch.device) -> dict[torch.device, int]:
    """Bytes this process can still allocate on `device`, then on every other CUDA device: the driver's free
    memory plus what torch's caching allocator holds unused. Empty off CUDA: host memory is not checked
    (weights load from the checkpoint's memory map, which the OS pages in and out)."""
    if device.type != "cuda":
        return {}
    first = device.index if device.index is not None else torch.cuda.current_device()
    order = [first, *(i for i in range(torch.cuda.device_count()) if i != first)]
    return {torch.device("cuda", i): torch.cuda.mem_get_info(i)[0] + torch.cuda.memory_reserved(i)
            - torch.cuda.memory_allocated(i) for i in order}


def place_ar_model(source: str, needed: int, free: dict[torch.device, int]) -> torch.device:
    """The first device in `free` (device → free bytes: the diffusion model's GPU first, then the others)
    with room for `needed` bytes of weights plus AR_HEADROOM_BYTES; else a one-line ValueError that says
    what fits."""
    for device, room in free.items():
        if needed + AR_HEADROOM_BYTES <= room:
            return device
    (first, room), *others = free.items()
    best, most = max(free.items(), key=lambda item: item[1])
    elsewhere = f" and no other GPU has room ({max(r for _, r in others) / 1e9:.1f} GB free at most)" if others else ""
    raise ValueError(
        f"--ar-model {source} needs {needed / 1e9:.1f} GB of weights + {AR_HEADROOM_BYTES / 1e9:.0f} GB headroom, "
        f"but {first} has {room / 1e9:.1f} GB free{elsewhere}: an AR model of up to "
        f"{max(0, most - AR_HEADROOM_BYTES) / 1e9:.1f} GB of weights fits (on {best}); the same-weights AR race "
        "(leave out --ar-model) always fits, as it loads no second model")
