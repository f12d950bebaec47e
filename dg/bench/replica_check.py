"""The GPU check's `replicas` part: one Ray Serve replica of the embedded model per visible GPU, a run on each.

Starts `python app.py --replicas N`'s runner (dg.engine.replicas) with N = the visible GPUs, on a local Ray,
opens one seeded run per replica at once (the least-loaded routing puts each on its own replica), and checks
that every replica served one, on its own GPU, to a normal end, with the same tokens on every GPU (one seed,
one prompt). Reports the start-up seconds, each run's seconds and replica, and tokens per second.

    python -m dg.bench.gpu_check --out runs/gpu-check      # this part among the others (dg.bench.gpu_check)
    python -m dg.bench.replica_check                       # this part alone, on the GPUs of this machine
"""

import json
import threading
import time

import torch

from dg.loading import EMBEDDED_MODEL
from dg.prompts import build_inputs
from dg.trace import Trace

PROMPT = "What is 2487 + 3356?"
SEED = 0
NORMAL_ENDS = ("eos", "max_new_tokens", "pad_canvas")


def replicas_part(plan, device) -> tuple[dict, str | None]:
    """(result, failure or None) of one replica per visible GPU; on the CPU (a smoke check) one line saying the
    part does not apply: tests/engine/test_replicas.py runs the same runner on CPU replicas."""
    if torch.device(device).type != "cuda":
        return {"applicable": False, "reason": "one replica per visible GPU: none in a smoke check"}, None
    from dg.engine.replicas import ReplicaSpec, start_replicas

    gpus = torch.cuda.device_count()
    t0 = time.perf_counter()
    runner = start_replicas(ReplicaSpec(gpus, gpus), EMBEDDED_MODEL)
    start_s = time.perf_counter() - t0
    try:
        runs = run_on_each(runner, gpus)
    finally:
        runner.close()
    names = sorted(r["replica"] for r in runs)
    failures = [f"{len(set(names))} replicas served the {gpus} runs" if len(set(names)) != gpus else None,
                "not every replica on its own GPU" if len({n.rsplit('· ', 1)[-1] for n in names}) != gpus else None,
                "a run ended abnormally" if any(r["finish"] not in NORMAL_ENDS for r in runs) else None,
                "the GPUs gave different tokens" if len({tuple(r["tokens"]) for r in runs}) != 1 else None]
    tokens = sum(len(r["tokens"]) for r in runs)
    result = {"applicable": True, "gpus": gpus, "start_s": start_s, "description": runner.describe(),
              "runs": [{k: v for k, v in r.items() if k != "tokens"} for r in runs],
              "tokens_per_s": tokens / max(r["seconds"] for r in runs)}
    failure = "; ".join(f for f in failures if f)
    return result, failure or None


def run_on_each(runner, count: int) -> list[dict]:
    """`count` runs opened one after another and held open (each on the least-loaded replica), then finished
    together: their replica, finish, tokens and seconds."""
    inputs = build_inputs(runner.processor, PROMPT)
    opened = []
    for _ in range(count):
        stream = runner.stream("diffusion", dict(inputs), runner.sampler_config, SEED, threading.Event())
        opened.append((time.perf_counter(), next(stream), stream))  # its RunStart: the run is open on its replica
    out = []

    def finish(t0, start, stream):
        trace = Trace()
        for record in (start, *stream):
            trace.add(record)
        out.append({"replica": start.config["replica"], "finish": trace.end.finish_reason,
                    "tokens": trace.token_ids, "seconds": time.perf_counter() - t0})

    threads = [threading.Thread(target=finish, args=args) for args in opened]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


if __name__ == "__main__":
    print(json.dumps(replicas_part(None, "cuda" if torch.cuda.is_available() else "cpu"), default=str))
