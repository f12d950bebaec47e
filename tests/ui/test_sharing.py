"""Sharing one model between users, through the real Gradio server: two sessions' runs interleave, a
long run never stalls a short one and stops at its budget, a waiting user sees their place in line,
a session has one live action at a time, and a page that goes away frees its run."""

import threading
import time
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from dg.trace import Trace
from dg.engine import turns as turns_module
from dg.engine.turns import Budget

FAST = dict(max_denoising_steps=6, max_new_tokens=16)
LONG = dict(max_denoising_steps=128, max_new_tokens=1024, stability_threshold=8, confidence_threshold=0.0001)
CANVAS, PANEL, TEXT, STATUS = range(4)
TRACE_FILE = 6


@pytest.fixture
def turns(monkeypatch):
    """The server's scheduler, with a test's places and budget put back afterwards."""
    scheduler = turns_module.TURNS
    monkeypatch.setattr(scheduler, "slots", scheduler.slots)
    monkeypatch.setattr(scheduler, "budget", scheduler.budget)
    yield scheduler
    deadline = time.time() + 30
    while scheduler.load() != {"placed": 0, "waiting": 0}:  # no run of this test outlives it
        assert time.time() < deadline, scheduler.load()
        time.sleep(0.05)


def client_for(url, tmp_path, name):
    return Client(url, verbose=False, download_files=str(tmp_path / name))


def submit(client, seed=0, **knobs):
    return client.submit(prompt="What is 12 + 30?", image=None, thinking=False, seed=seed, api_name="/generate",
                         **(FAST | knobs))


def trace_of(result) -> Trace:
    return Trace.from_json(Path(result[TRACE_FILE]).read_text())


def wait_until(condition, timeout=30.0):
    deadline = time.time() + timeout
    while not condition():
        assert time.time() < deadline
        time.sleep(0.01)


def test_a_short_run_finishes_beside_a_long_one_with_the_tokens_it_makes_alone(url, tmp_path, turns):
    alone = trace_of(submit(client_for(url, tmp_path, "solo"), seed=4).result(timeout=60))
    ann, bob = client_for(url, tmp_path, "ann"), client_for(url, tmp_path, "bob")
    long = submit(ann, **LONG)
    wait_until(lambda: len(long.outputs()) >= 3)
    t0 = time.perf_counter()
    short = trace_of(submit(bob, seed=4).result(timeout=60))
    took = time.perf_counter() - t0
    assert not long.done()  # bob's run ended while ann's still ran: they took turns
    assert short.token_ids == alone.token_ids  # interleaving leaves each seed's draws as they are alone
    assert took < 10 * alone.metrics()["wall_s"] + 2.0
    ann.predict(api_name="/stop")
    assert trace_of(long.result(timeout=60)).end.finish_reason == "cancelled"


def test_a_long_run_stops_at_its_budget_and_keeps_its_steps(url, tmp_path, turns):
    turns.budget = Budget(model_s=0.5)
    t0 = time.perf_counter()
    trace = trace_of(submit(client_for(url, tmp_path, "ann"), **LONG).result(timeout=60))
    assert trace.end.finish_reason == "cancelled" and trace.steps
    assert len(trace.steps) < 128 * 64 and time.perf_counter() - t0 < 20


def test_a_waiting_user_sees_their_place_in_line_until_a_place_frees(url, tmp_path, turns):
    turns.slots = 1
    ann, bob = client_for(url, tmp_path, "ann"), client_for(url, tmp_path, "bob")
    long = submit(ann, **LONG)
    wait_until(lambda: len(long.outputs()) >= 2)
    waiting = submit(bob)
    wait_until(lambda: any("waiting in line: **1** of 1" in str(o[STATUS]) for o in waiting.outputs()))
    assert not waiting.done()
    ann.predict(api_name="/stop")
    assert "Done" in waiting.result(timeout=60)[STATUS]


def test_a_session_runs_one_action_at_a_time(url, tmp_path, turns):
    ann = client_for(url, tmp_path, "ann")
    long = submit(ann, **LONG)
    wait_until(lambda: len(long.outputs()) >= 2)
    with pytest.raises(AppError, match="already has a run going"):
        submit(ann).result(timeout=60)
    ann.predict(api_name="/stop")
    long.result(timeout=60)
    assert "Done" in submit(ann).result(timeout=60)[STATUS]


def closed_page(url, data, frames: int) -> None:
    """A page that starts /generate, reads `frames` events of its stream, then goes away."""
    with httpx.Client(timeout=30) as http:
        event = http.post(f"{url}gradio_api/call/generate", json={"data": data}).json()["event_id"]
        with http.stream("GET", f"{url}gradio_api/call/generate/{event}") as events:
            seen = 0
            for line in events.iter_lines():
                seen += line.startswith("event:")
                if seen >= frames:
                    break


def generate_data(client, **values) -> list:
    params = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/generate"]["parameters"]
    values = dict(prompt="What is 12 + 30?", image=None, thinking=False, seed=0) | values
    return [values.get(p["parameter_name"], p.get("parameter_default")) for p in params]


def test_a_page_that_goes_away_frees_its_run_and_its_place_in_line(url, tmp_path, turns):
    ann = client_for(url, tmp_path, "ann")
    closed_page(url, generate_data(ann, **LONG), frames=4)
    wait_until(lambda: turns.load() == {"placed": 0, "waiting": 0}, timeout=5)
    turns.slots = 1
    long = submit(ann, **LONG)
    wait_until(lambda: len(long.outputs()) >= 2)
    closed_page(url, generate_data(ann, **FAST), frames=2)  # it waited in line, then left
    wait_until(lambda: turns.load() == {"placed": 1, "waiting": 0}, timeout=5)
    ann.predict(api_name="/stop")
    long.result(timeout=60)


def test_many_sessions_at_once_each_get_their_solo_tokens(url, tmp_path, turns):
    solo = trace_of(submit(client_for(url, tmp_path, "solo"), seed=9).result(timeout=60)).token_ids
    results = {}

    def user(name):
        results[name] = trace_of(submit(client_for(url, tmp_path, name), seed=9).result(timeout=120)).token_ids

    users = [threading.Thread(target=user, args=(f"user{i}",)) for i in range(6)]
    for t in users:
        t.start()
    for t in users:
        t.join(180)
    assert len(results) == 6 and all(ids == solo for ids in results.values())
