"""Many viewers at once on Ray Serve replicas: the same load against 1, 2, … replicas, and with one killed.

`--users` viewers each start `--runs` seeded runs of the embedded model's example prompts one after another,
all at once, through the engine as the app drives it (dg.engine.runs live runs, the line and turns of
dg.engine.turns, here in this process: the front end's share of the cores), served by replicas of
dg.engine.replicas on a local Ray. Per replica count: aggregate runs/s and tokens/s, p50 / p95 / max latency
(start to last record, waiting in line included), runs failed, and whether every run's tokens equal its solo
run (the same prompt and seed run headless here first, before any replica holds the model). A load lasts a
few seconds, so it runs `--repeats` times per count, the counts taking turns (1, 2, 1, 2, …: a busy spell of
the machine falls on both), each on fresh replicas; a count's figures are the median repeat's (by runs/s),
and every repeat's runs/s is in the JSON. `--kill`: the
same load on the largest count with one replica killed (SIGKILL) once a quarter of the runs have ended:
which runs failed, whether each failed in one line on the killed replica, and whether the rest completed.
`--app`: the same load through the real Gradio server instead (dg.ui.app on the replicas, one gradio_client
per viewer calling /generate, the run's trace read from the file it returns): the front end then also
draws every frame. The last line is the JSON of it all.

    python -m dg.bench.serve --users 16 --runs 3 --replicas 1,2 --kill [--repeats 3] [--app]
"""

import argparse
import gc
import json
import os
import re
import signal
import statistics
import threading
import time
from collections import Counter
from dataclasses import dataclass

import torch

from dg.bench.common import format_table
from dg.config import KNOBS
from dg.engine import runs as live
from dg.engine.turns import TURNS
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.examples import SKILL_GROUP, load_rows

KILL_AFTER = 0.25  # the share of the load's runs that end before a replica is killed
P95 = 0.95


@dataclass
class Done:
    """One run of the load as a viewer saw it."""

    user: int
    prompt: int  # index into the load's prompts
    seed: int
    seconds: float  # started to finished, waiting in line included
    tokens: list[int]
    replica: str | None  # the replica its RunStart names
    error: str | None
    ended: float = 0.0  # perf_counter() when it finished


def example_rows(count: int) -> list:
    """The first `count` shipped skill examples without a picture (dg.tiny.examples)."""
    return [row for row in load_rows()[SKILL_GROUP] if row.image is None][:count]


def prompts(processor, rows: list) -> list[dict]:
    return [build_inputs(processor, row.prompt, thinking=row.thinking) for row in rows]


def solo_tokens(model, load_inputs: list[dict], config, seeds: set[tuple[int, int]]) -> dict:
    """(prompt, seed) → the tokens of that run headless: torch.manual_seed(seed), then the sampler."""
    out = {}
    for p, seed in sorted(seeds):
        torch.manual_seed(seed)
        out[(p, seed)] = generate_diffusion(model, load_inputs[p], config).token_ids
    return out


def viewer(runner, load_inputs, config, user: int, runs: int, out: list, lock: threading.Lock,
           ready: threading.Barrier) -> None:
    ready.wait()
    for i in range(runs):
        p, seed = (user + i) % len(load_inputs), user * runs + i
        t0 = time.perf_counter()
        # inputs of its own, as each Generate builds them: runs given one inputs dict share a replica (A/B)
        run = live.LiveRun.of(runner, "diffusion", dict(load_inputs[p]), config, seed).start()
        run.wait()
        trace = run.snapshot()
        replica = trace.start.config.get("replica") if trace.start else None
        with lock:
            out.append(Done(user, p, seed, time.perf_counter() - t0, list(trace.token_ids), replica, run.error,
                            time.perf_counter()))


def app_viewer(url: str, rows: list, config, user: int, runs: int, out: list, lock: threading.Lock,
               ready: threading.Barrier) -> None:
    """`viewer` as a page of the app: /generate through gradio_client, the knobs set to `config`'s; the clock
    starts once every viewer's client has connected."""
    import tempfile
    from pathlib import Path

    from gradio_client import Client

    from dg.trace import Trace

    knobs = {k.name: getattr(config, k.name) for k in KNOBS}
    with tempfile.TemporaryDirectory() as folder:
        client = Client(url, verbose=False, download_files=folder)
        ready.wait()
        for i in range(runs):
            p, seed = (user + i) % len(rows), user * runs + i
            t0 = time.perf_counter()
            try:
                result = client.predict(prompt=rows[p].prompt, image=None, thinking=rows[p].thinking, seed=seed,
                                        api_name="/generate", **knobs)
                trace = Trace.from_json(Path(next(o for o in result if str(o).endswith(".json"))).read_text())
                error = None if trace.end.finish_reason != "error" else result[3]
                done = Done(user, p, seed, time.perf_counter() - t0, trace.token_ids,
                            trace.start.config.get("replica"), error)
            except Exception as err:  # the app refused or failed the run: one line, as a viewer sees it
                done = Done(user, p, seed, time.perf_counter() - t0, [], None, " ".join(str(err).split()))
            done.ended = time.perf_counter()
            with lock:
                out.append(done)
        client.close()


def kill_a_replica(runner, done: list, total: int) -> dict:
    """Once KILL_AFTER of the load's runs ended, SIGKILL the replica serving the most open runs."""
    from dg.engine.routing import PLACEMENT

    while len(done) < KILL_AFTER * total:
        time.sleep(0.01)
    open_runs = PLACEMENT.load()
    target = max(open_runs, key=open_runs.get)
    hello = runner.replicas.handle.hello.remote(route=("replica", target)).result()
    os.kill(hello["pid"], signal.SIGKILL)
    return {"name": hello["name"], "open_runs": open_runs[target], "after_runs": len(done)}


def one_load(spec, model, rows, load_inputs, config, users: int, runs: int, kill: bool,
             app: bool) -> tuple[list[Done], float, dict]:
    """The load on fresh replicas of `spec` (`app`: through the Gradio server); (runs, wall seconds, the kill's
    facts or {})."""
    from contextlib import nullcontext

    from dg.ui.app import serve_runner, start_replicas

    slots = TURNS.slots
    runner = start_replicas(spec, model)  # the line gets the places python app.py --replicas gives it
    try:
        live.LiveRun.of(runner, "diffusion", dict(load_inputs[0]), config, 0).start().wait()  # a first run, untimed
        with serve_runner(runner) if app else nullcontext() as url:
            done, lock, ready = [], threading.Lock(), threading.Barrier(users + 1)
            target, to, what = (app_viewer, url, rows) if app else (viewer, runner, load_inputs)
            threads = [threading.Thread(target=target, args=(to, what, config, u, runs, done, lock, ready))
                       for u in range(users)]
            for t in threads:
                t.start()
            ready.wait()  # every viewer at the start line
            t0 = time.perf_counter()
            killed = kill_a_replica(runner, done, users * runs) if kill else {}
            for t in threads:
                t.join()
            return done, max(d.ended for d in done) - t0, killed  # to the last run's end, not the clients' close
    finally:
        TURNS.slots = slots
        runner.close()


def summarize(done: list[Done], wall: float, solo: dict) -> dict:
    ok = [d for d in done if d.error is None]
    seconds = sorted(d.seconds for d in ok) or [float("nan")]
    return {"runs": len(done), "failed": len(done) - len(ok), "wall_s": round(wall, 3),
            "runs_per_s": round(len(ok) / wall, 3), "tokens_per_s": round(sum(len(d.tokens) for d in ok) / wall, 1),
            "p50_s": round(statistics.median(seconds), 3),
            "p95_s": round(seconds[min(len(seconds) - 1, int(P95 * len(seconds)))], 3), "max_s": round(seconds[-1], 3),
            "equal_to_solo": all(d.tokens == solo[(d.prompt, d.seed)] for d in ok),
            "runs_by_replica": dict(sorted(Counter(str(d.replica) for d in done).items()))}


def _named(error: str) -> str | None:
    """The replica a ReplicaLost line names ('… replica 1/2 · cpu was lost mid-run …')."""
    found = re.search(r"(replica \S+ · \S+) was lost", error)
    return found[1] if found else None


def median_load(loads: list[dict]) -> dict:
    """The repeat with the median runs/s (the lower middle one of an even count)."""
    return sorted(loads, key=lambda r: r["runs_per_s"])[(len(loads) - 1) // 2]


def kill_facts(done: list[Done], killed: dict) -> dict:
    failed = [d for d in done if d.error is not None]
    return {**killed, "failed": len(failed), "completed": len(done) - len(failed),
            # a run the replica died under before its first step has no RunStart: its error names the replica
            "failed_only_on_killed": all((d.replica or _named(d.error)) == killed["name"] for d in failed),
            "each_failure_one_line": all("\n" not in d.error and killed["name"] in d.error for d in failed),
            "errors": sorted({d.error for d in failed})[:3]}


def main(argv=None) -> None:
    from dg.engine.replicas import ReplicaSpec

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="default: the embedded tiny model")
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--runs", type=int, default=3, help="runs per user, one after another")
    parser.add_argument("--replicas", default="1,2", help="replica counts to compare, e.g. 1,2")
    parser.add_argument("--kill", action="store_true", help="then the load on the largest count with a replica killed")
    parser.add_argument("--repeats", type=int, default=3, help="loads per replica count, the counts in turn")
    parser.add_argument("--cpus", type=float, default=1.0, help="Ray CPUs each replica reserves")
    parser.add_argument("--app", action="store_true", help="through the real Gradio server, a client per viewer")
    args = parser.parse_args(argv)
    counts = [int(n) for n in args.replicas.split(",")]
    if min(args.users, args.runs, args.repeats, *counts) < 1 or (args.kill and max(counts) < 2):
        parser.error(f"--users, --runs, --repeats and --replicas must be >= 1 (and --kill needs 2 replicas), got "
                     f"{args.users}, {args.runs}, {args.repeats}, {args.replicas}")

    torch.set_num_threads(1)  # as a replica runs: the same float sums, so the same tokens
    local = load(args.model)
    rows = example_rows(args.users)
    load_inputs, config = prompts(local.processor, rows), local.sampler_config
    seeds = {((u + i) % len(load_inputs), u * args.runs + i) for u in range(args.users) for i in range(args.runs)}
    solo = solo_tokens(local.model, load_inputs, config, seeds)
    model = local.source
    del local
    gc.collect()  # one copy of the model at a time: the replicas load their own

    result = {"users": args.users, "runs_per_user": args.runs, "through": "app" if args.app else "engine",
              "repeats": args.repeats, "cpu_count": os.cpu_count(), "by_replicas": {}}
    repeats = {n: [] for n in counts}
    for _ in range(args.repeats):
        for n in counts:
            done, wall, _ = one_load(ReplicaSpec(n, n, cpus=args.cpus), model, rows, load_inputs, config,
                                     args.users, args.runs, kill=False, app=args.app)
            repeats[n].append(summarize(done, wall, solo))
    for n, loads in repeats.items():
        result["by_replicas"][n] = {**median_load(loads), "runs_per_s_each": [r["runs_per_s"] for r in loads],
                                    "failed_all": sum(r["failed"] for r in loads),
                                    "equal_to_solo_all": all(r["equal_to_solo"] for r in loads)}
    if len(counts) > 1:
        low, high = result["by_replicas"][min(counts)], result["by_replicas"][max(counts)]
        result["runs_per_s_ratio"] = round(high["runs_per_s"] / low["runs_per_s"], 3)
        result["p95_lower"] = high["p95_s"] < low["p95_s"]
    if args.kill:
        n = max(counts)
        done, wall, killed = one_load(ReplicaSpec(n, n, cpus=args.cpus), model, rows, load_inputs, config,
                                      args.users, args.runs, kill=True, app=args.app)
        result["kill"] = {"replicas": n, **summarize(done, wall, solo), **kill_facts(done, killed)}
    rows = [{"replicas": n, **{k: v for k, v in r.items() if k != "runs_by_replica"}}
            for n, r in result["by_replicas"].items()]
    print(format_table(rows, ["replicas", "runs", "failed_all", "runs_per_s", "runs_per_s_each", "tokens_per_s",
                              "p50_s", "p95_s", "max_s", "equal_to_solo_all"]))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
