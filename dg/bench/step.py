"""The sampling step alone: the torch path vs the fused Triton path on one canvas of logits, in GB/s.

GB/s counts the floor traffic of the step (read the logits, write the scaled logits once), measured
against this device's copy bandwidth.

    python -m dg.bench                 # runs it after the model benchmark (--skip-step to skip)
"""

import statistics

import torch

from dg.bench.common import format_table, timed

STEP_SHAPE = (1, 256, 262_144)  # (B, C, V) of the release: one canvas over the real vocabulary


def memory_bandwidth(device, megabytes: int = 1024) -> float:
    """Measured copy bandwidth in GB/s (bytes read + written), the yardstick for the step's GB/s."""
    n = megabytes * 2**20 // 4
    src = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    dst = torch.empty_like(src)
    dst.copy_(src)
    times = [timed(lambda: dst.copy_(src), device)[1] for _ in range(3)]
    return 2 * src.numel() * 4 / min(times) / 1e9


def bench_sampling_step(device, shape=STEP_SHAPE, repeats: int | None = None, bandwidth_mb: int | None = None) -> dict:
    """torch path vs Triton path on one canvas of logits; GB/s counts the floor traffic of the step:
    reading the logits and writing the scaled logits once (2 x B x C x V x itemsize bytes).

    On CUDA both bf16 and float32 logits (the decoder head emits float32 after the softcap); on CPU
    float32 and the torch path only.
    """
    device = torch.device(device)
    on_cuda = device.type == "cuda"
    repeats = repeats or (10 if on_cuda else 2)
    result = {"shape": list(shape), "device": str(device),
              "bandwidth_gb_s": memory_bandwidth(device, bandwidth_mb or (1024 if on_cuda else 256)), "paths": {}}
    for dtype in (torch.bfloat16, torch.float32) if on_cuda else (torch.float32,):
        for name, fn, nbytes in _step_paths(device, shape, dtype):
            fn()  # warm-up (compiles the kernels)
            seconds = statistics.median(timed(fn, device)[1] for _ in range(repeats))
            result["paths"][name] = {"ms": 1e3 * seconds, "gb_s": nbytes / seconds / 1e9,
                                     "fraction_of_bandwidth": nbytes / seconds / 1e9 / result["bandwidth_gb_s"]}
    if not on_cuda:
        result["note"] = "no CUDA device: torch path only (Triton runs on CPU only in its interpreter)"
    return result


def _step_paths(device, shape, dtype):
    from dg.kernels.reference import sample_step_torch

    generator = torch.Generator(device=device).manual_seed(0)
    logits = (torch.randn(shape, generator=generator, device=device) * 3).to(dtype)
    canvas = torch.zeros(shape[:2], dtype=torch.long, device=device)
    nbytes = 2 * logits.numel() * logits.element_size()
    label = str(dtype).removeprefix("torch.")
    yield f"torch {label}", lambda: sample_step_torch(logits, 0.6, canvas, 0.1), nbytes
    if device.type == "cuda":
        from dg.kernels.fused_sampling import sample_step_triton

        yield f"triton {label}", lambda: sample_step_triton(logits, 0.6, canvas, 0.1, seed=0), nbytes


def format_step(step: dict) -> str:
    rows = [{"path": name, **values} for name, values in step["paths"].items()]
    head = (f"\nsampling step alone: (B, C, V) = {tuple(step['shape'])} on {step['device']}, "
            f"measured copy bandwidth {step['bandwidth_gb_s']:.1f} GB/s")
    note = f"\n({step['note']})" if "note" in step else ""
    return head + "\n" + format_table(rows, ["path", "ms", "gb_s", "fraction_of_bandwidth"]) + note
