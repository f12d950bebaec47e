"""What the worker process adds per record: the pipe's round trip, a record's pickling, one run against in-process.

The same seeded run goes first through the in-process runner, then through the worker process
(dg.engine.worker), with the same tokens asserted. Only one copy of the model is ever held: the
in-process runs end and their model is freed before the worker loads its own (at the release's size two
copies do not fit a GPU).

    python -m dg.bench.worker [--model DIR] [--prompt "What is 487 + 356?"] [--seed 0] [--repeats 5]
"""

import argparse
import gc
import pickle
import statistics
import threading
import time

import torch

from dg.engine.runner import InProcess
from dg.engine.worker import start_worker
from dg.devices import share_cpu
from dg.loading import load
from dg.prompts import build_inputs


def timed_runs(runner, inputs: dict, seed: int, repeats: int) -> tuple[list[float], list]:
    """Wall seconds of `repeats` runs (after one that warms up) and the last run's records."""
    seconds = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        torch.manual_seed(seed)  # the in-process runner draws from this process's RNG; the worker seeds its own
        records = list(runner.stream("diffusion", inputs, runner.sampler_config, seed, threading.Event()))
        seconds.append(time.perf_counter() - t0)
    return seconds[1:], records


def pickle_cost(records: list) -> tuple[float, float]:
    """Mean bytes of a pickled record and seconds to pickle and read it back, as a record crosses the pipe."""
    t0, sizes = time.perf_counter(), []
    for record in records:
        data = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.loads(data)
        sizes.append(len(data))
    return sum(sizes) / len(sizes), (time.perf_counter() - t0) / len(records)


def steps(records: list) -> list:
    return [r.argmax.tolist() for r in records if r.kind == "step"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None)
    parser.add_argument("--prompt", default="What is 487 + 356?")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    local = InProcess.of(load(args.model))
    share_cpu(local.device)
    local_s, local_records = timed_runs(local, build_inputs(local.processor, args.prompt, thinking=True,
                                                            device=local.device), args.seed, args.repeats)
    del local
    gc.collect()  # the in-process weights go before the worker loads its copy
    worker = start_worker(args.model)
    try:
        inputs = build_inputs(worker.processor, args.prompt, thinking=True, device=worker.device)
        t0 = time.perf_counter()
        for _ in range(1000):
            worker.worker._call("ping")
        ping_s = (time.perf_counter() - t0) / 1000
        remote_s, remote_records = timed_runs(worker, inputs, args.seed, args.repeats)
    finally:
        worker.close()
    assert steps(local_records) == steps(remote_records), "the worker's run differs from the in-process one"
    size, pickle_s = pickle_cost(remote_records)
    local_m, remote_m, n = statistics.median(local_s), statistics.median(remote_s), len(remote_records)
    print(f"round trip of an empty request: {ping_s * 1e6:.0f} µs; a record: {size / 1e3:.1f} kB, "
          f"pickled and read back in {pickle_s * 1e6:.0f} µs")
    print(f"one run of {n} records, median of {args.repeats}: in-process {local_m * 1000:.1f} ms, through "
          f"the worker {remote_m * 1000:.1f} ms ({(remote_m - local_m) / n * 1e6:+.0f} µs per record)")


if __name__ == "__main__":
    main()
