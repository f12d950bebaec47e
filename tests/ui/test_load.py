"""Load on the real server, over loopback: sixteen users beside an abusive client, and growth over many
sessions. Both print their figures (run with -s to see them).

- Sixteen sessions run short seeded runs together, first alone, then beside a client that keeps
  starting the longest runs it may, piles up requests and sends garbage. Reported: p50/p95 latency of
  the sixteen in both phases; asserted: every run makes its solo tokens, and the abusive client adds
  no more than one run's budget to anyone's wait.
- 100 runs across 50 sessions: memory (RSS), kept runs, live-run bookkeeping and the private
  folder's files stay within their bounds after a warm-up.
"""

import json
import statistics
import threading
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from dg.trace import Trace
from dg.ui import files, kept
from dg.engine import turns as turns_module
from dg.engine.turns import Budget

FAST = dict(max_denoising_steps=6, max_new_tokens=16)
LONG = dict(max_denoising_steps=128, max_new_tokens=1024, stability_threshold=8, confidence_threshold=0.0001)
# What one run may take of the model, for this test: the steps cut the abusive client's long runs (a short
# run takes 6); the seconds only guard, since a shared core can stretch six short steps past a second.
BUDGET_STEPS, BUDGET_S = 12, 3.0
USERS, RUNS_EACH = 16, 3
pytestmark = pytest.mark.slow


def tokens_of(trace: Trace) -> tuple[list[int], str]:
    return trace.token_ids, trace.end.finish_reason


def trace_of(result) -> Trace:
    path = next(o for o in result if isinstance(o, str) and o.endswith(".json"))
    return Trace.from_json(Path(path).read_text())


def run(client, seed):
    return client.predict(prompt="What is 12 + 30?", image=None, thinking=False, seed=seed, api_name="/generate",
                          **FAST)


def sixteen_users(url, tmp_path, phase) -> tuple[list[float], dict]:
    """Each user runs RUNS_EACH seeded runs one after another; all users at once. Latencies and tokens."""
    latencies, tokens = [], {}
    lock = threading.Lock()

    def user(i):
        client = Client(url, verbose=False, download_files=str(tmp_path / phase / str(i)))
        for k in range(RUNS_EACH):
            t0 = time.perf_counter()
            trace = trace_of(run(client, seed=k))
            with lock:
                latencies.append(time.perf_counter() - t0)
                tokens[(i, k)] = tokens_of(trace)
        client.close()

    threads = [threading.Thread(target=user, args=(i,)) for i in range(USERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert len(latencies) == USERS * RUNS_EACH
    return latencies, tokens


def p(values, q) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def abuse(url, tmp_path, stop: threading.Event, counts: dict) -> None:
    """The longest runs it may start, back to back; a second run while one runs; garbage in between."""
    client = Client(url, verbose=False, download_files=str(tmp_path / "abuser"))
    while not stop.is_set():
        job = client.submit(prompt="Tell a long story.", image=None, thinking=False, seed=0, api_name="/generate",
                            **LONG)
        for _ in range(3):
            try:  # refused: the session already has a run going
                run(client, seed=1)
            except AppError:
                counts["refused"] += 1
        with httpx.Client(timeout=30) as http:
            http.post(f"{url}gradio_api/call/generate", content='{"data": ["x", null, false, NaN, 1e999]}',
                      headers={"content-type": "application/json"})
        try:
            job.result(timeout=120)
            counts["long runs"] += 1
        except AppError as err:  # one of its own short runs got in first: one action per session
            counts["refused" if "already has a run going" in str(err) else "failed"] += 1


def test_sixteen_users_beside_an_abusive_client_wait_at_most_one_budget_more(url, tmp_path, monkeypatch):
    monkeypatch.setattr(turns_module.TURNS, "budget", Budget(model_s=BUDGET_S, steps=BUDGET_STEPS))
    solo = {k: tokens_of(trace_of(run(Client(url, verbose=False, download_files=str(tmp_path / "solo")), seed=k)))
            for k in range(RUNS_EACH)}
    alone, tokens_alone = sixteen_users(url, tmp_path, "alone")
    stop, counts = threading.Event(), {"refused": 0, "long runs": 0, "failed": 0}
    abuser = threading.Thread(target=abuse, args=(url, tmp_path, stop, counts))
    abuser.start()
    time.sleep(1.0)  # the abusive client holds a place before the users come
    beside, tokens_beside = sixteen_users(url, tmp_path, "beside")
    stop.set()
    abuser.join(180)
    figures = {"p50 alone": p(alone, 50), "p95 alone": p(alone, 95), "max alone": max(alone),
               "p50 beside": p(beside, 50), "p95 beside": p(beside, 95), "max beside": max(beside),
               "budget_s": BUDGET_S, **counts}
    print("\nload:", json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}))
    differ = {run: got for run, got in (tokens_alone | tokens_beside).items() if got != solo[run[1]]}
    assert not differ, f"runs (user, seed) whose tokens or finish differ from their solo run: {differ}"
    assert counts["refused"] > 0 and counts["failed"] == 0
    assert figures["p95 beside"] <= figures["p95 alone"] + BUDGET_S + 2.0  # 2 s: the noise of one shared core
    assert figures["max beside"] <= figures["max alone"] + 2 * BUDGET_S + 2.0


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def private_files() -> tuple[int, int]:
    found = [f for f in files.base().rglob("*") if f.is_file()]
    return len(found), sum(f.stat().st_size for f in found)


def test_memory_and_files_stay_flat_over_100_runs_in_50_sessions(url, monkeypatch):
    monkeypatch.setattr(files, "MAX_FOLDERS", 16)
    monkeypatch.setattr(kept.KEPT, "limit", 2 * 2**20)  # every session's kept runs: 2 MB together
    app = list(files._apps)[-1]  # this module's server
    monkeypatch.setattr(app.state_holder, "capacity", 10)  # kept.MAX_SESSIONS, scaled to this test
    # Heartbeats every 0.2 s instead of 15: a closed client's heartbeat thread sees its stop at the next one
    # (close() waits up to a second for it), and the server learns at once that the page went away.
    monkeypatch.setenv("GRADIO_HEARTBEAT_INTERVAL", "0.2")
    samples = []
    for session in range(50):
        client = Client(url, verbose=False, download_files=False)
        for k in range(2):
            run(client, seed=session * 2 + k)
        client.close()  # the page goes away
        if session % 5 == 4:
            samples.append((session + 1, rss_mb(), kept.KEPT.total, *private_files()))
    live = turns_module.TURNS.load()
    print("\ngrowth (sessions, RSS MB, kept bytes, files, file bytes):")
    for row in samples:
        print("  ", row)
    warm = samples[3]  # after 20 sessions
    assert live == {"placed": 0, "waiting": 0}
    assert all(kept_bytes <= 2 * 2**20 for _, _, kept_bytes, _, _ in samples)
    assert all(n <= 2 * 16 + 8 for _, _, _, n, _ in samples)  # scratch folders + Gradio's copies + examples
    assert samples[-1][1] - warm[1] <= 40, samples  # MB over the last 60 runs: no growth per run
