"""The sampling step alone: the torch path vs the fused Triton path on one canvas of logits, in GB/s;
and what building one step's record costs at that shape.

GB/s counts the floor traffic of the step (read the logits, write the scaled logits once), measured
against this device's copy bandwidth.

    python -m dg.bench                      # runs it after the model benchmark (--skip-step to skip)
    python -m dg.bench.step --record        # ms of one step's record at (1, 256, 262144), per backend
"""

import argparse
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


def bench_step_record(device, shape=STEP_SHAPE, repeats: int = 5, backend: str = "torch") -> dict:
    """ms of building one step's record (`dg.sampler.step_record`: top-k, entropy sums, the copy to the host)
    on one sampling step's output at `shape`; the median of `repeats` after one warm-up."""
    from dg import sampler
    from dg.paths import Run
    from dg.kernels.sampling import sample_step

    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(0)
    logits = torch.randn(shape, generator=generator, device=device) * 3  # (B, C, V) float32, as the decoder head
    canvas = torch.zeros(shape[:2], dtype=torch.long, device=device)
    temperature = torch.tensor(0.8, device=device)
    step = sample_step(logits, temperature, canvas, 0.1, backend=backend)
    denoised = sampler.Denoised(0, 1, temperature, canvas, step, 0.1, None, (0, 0))
    record = lambda: sampler.step_record(Run(None, None), denoised)  # noqa: E731
    record()
    ms = 1e3 * statistics.median(timed(record, device)[1] for _ in range(repeats))
    return {"shape": list(shape), "device": str(device), "backend": backend, "repeats": repeats, "record_ms": ms}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m dg.bench.step", description="ms of one step's record")
    parser.add_argument("--record", action="store_true", required=True, help="time dg.sampler's per-step record")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--shape", type=int, nargs=3, default=STEP_SHAPE, metavar=("B", "C", "V"))
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    backends = ("torch", "triton") if torch.device(args.device).type == "cuda" else ("torch",)
    rows = [bench_step_record(args.device, tuple(args.shape), args.repeats, b) for b in backends]
    print(format_table(rows, ["device", "backend", "shape", "repeats", "record_ms"]))


if __name__ == "__main__":
    main()
