"""Fair turns on one model: runs interleave step by step with the tokens each makes alone, a long run
never stalls a short one, runs beyond the places wait in a fair line that knows each one's place,
a budget stops a run, a run stopped in line never runs, and runs on different replicas take turns apart."""

import threading
import time

import pytest
import torch

from dg.sampler import generate_diffusion
from dg.engine import runs as live
from dg.engine.turns import Budget, Ticket, Turns


@pytest.fixture(scope="module")
def slow(loaded):
    """Thousands of steps: a run that lasts until it is stopped."""
    return loaded.sampler_config.replace(max_denoising_steps=128, max_new_tokens=1024, backend="torch",
                                         stability_threshold=8, confidence_threshold=1e-9)


def span(run) -> tuple[float, float]:
    """When the run's first and last steps were made, on the perf_counter clock."""
    steps = run.trace.steps
    return run.started_at + steps[0].t, run.started_at + steps[-1].t


def wait_for_steps(run, n, timeout=30.0):
    deadline = time.time() + timeout
    while len(run.snapshot().steps) < n:
        assert time.time() < deadline and not run.finished
        time.sleep(0.005)


def test_seeded_runs_interleave_step_by_step_and_each_makes_its_solo_tokens(loaded, config, inputs):
    solo = {}
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        solo[seed] = generate_diffusion(loaded.model, inputs, config).token_ids
    turns = Turns(slots=3)
    together = {s: live.LiveRun.of(loaded, "diffusion", inputs, config, s) for s in (1, 2, 3)}
    for run in together.values():
        run.turns = turns
        run.ticket = Ticket(run.seed, run.cancel)
    for run in together.values():
        run.start()
    assert all(run.wait(120) for run in together.values())
    assert {s: r.trace.token_ids for s, r in together.items()} == solo
    (a0, a1), (b0, b1) = span(together[1]), span(together[2])
    assert a0 < b1 and b0 < a1  # their steps overlap in time: neither waited for the other to end


def test_a_long_run_slows_a_short_one_but_never_stalls_it(loaded, config, inputs, slow):
    turns = Turns(slots=2)
    long = live.LiveRun.of(loaded, "diffusion", inputs, slow, 0, turns=turns).start()
    wait_for_steps(long, 3)
    t0 = time.perf_counter()
    short = live.LiveRun.of(loaded, "diffusion", inputs, config, 0, turns=turns).start()
    assert short.wait(60)
    took = time.perf_counter() - t0
    assert not long.finished  # the short run ended while the long one still ran
    long.stop()
    assert long.wait(30)
    t1 = time.perf_counter()
    alone = live.LiveRun.of(loaded, "diffusion", inputs, config, 0, turns=turns).start()
    assert alone.wait(60)
    print(f"short run beside a long one: {took:.3f} s; alone: {time.perf_counter() - t1:.3f} s")
    assert took < 3 * (time.perf_counter() - t1) + 0.5  # about twice as long (every other step), not stalled


def test_runs_beyond_the_places_wait_in_line_and_know_their_place(loaded, config, inputs, slow):
    turns = Turns(slots=1)

    def run(cfg, session):
        r = live.LiveRun.of(loaded, "diffusion", inputs, cfg, 0, turns=turns)
        r.ticket.session = session
        return r.start()

    first = run(slow, "ann")
    wait_for_steps(first, 1)
    second, third = run(config, "bob"), run(config, "cat")
    deadline = time.time() + 10
    while turns.load()["waiting"] < 2:
        assert time.time() < deadline
        time.sleep(0.005)
    assert (turns.position(second.ticket), turns.position(third.ticket)) == (1, 2)
    assert "waiting in line: **2** of 2" in live.waiting_message(third)
    assert second.queued and not second.trace.steps
    first.stop()
    assert second.wait(60) and third.wait(60)
    assert second.started_at < third.started_at and second.trace.done and third.trace.done


def test_the_next_place_goes_to_the_session_with_the_fewest_runs_placed():
    turns = Turns(slots=2)
    tickets = {name: Ticket(None, threading.Event()) for name in ("ann-1", "ann-2", "ann-3", "bob-1")}
    for name, ticket in tickets.items():
        ticket.session = name.split("-")[0]
    placed = []
    threads = [threading.Thread(target=lambda n=n: turns.place(tickets[n]) and placed.append(n)) for n in tickets]
    for t in threads[:3]:  # ann's three arrive first and take both places
        t.start()
        time.sleep(0.05)
    threads[3].start()
    time.sleep(0.1)
    assert placed == ["ann-1", "ann-2"] and turns.position(tickets["bob-1"]) == 1
    turns.leave(tickets["ann-1"])
    threads[3].join(5)
    assert placed[-1] == "bob-1"  # though ann-3 arrived before bob-1
    turns.leave(tickets["ann-2"])
    threads[2].join(5)
    assert placed[-1] == "ann-3"


@pytest.mark.parametrize("budget, used", [(Budget(steps=5), "5 steps"), (Budget(model_s=0.2), "s of model time")])
def test_a_run_past_its_budget_stops_between_steps_and_keeps_them(loaded, inputs, slow, budget, used):
    turns = Turns(budget=budget)
    run = live.LiveRun.of(loaded, "diffusion", inputs, slow, 0, turns=turns).start()
    assert run.wait(60)
    assert run.trace.end.finish_reason == "cancelled" and used in run.over_budget and run.trace.steps
    assert run.ticket.steps <= budget.steps and run.ticket.model_s < budget.model_s + 1.0


def test_a_run_stopped_while_in_line_never_runs(loaded, config, inputs, slow):
    turns = Turns(slots=1)
    holder = live.LiveRun.of(loaded, "diffusion", inputs, slow, 0, turns=turns).start()
    wait_for_steps(holder, 1)
    waiting = live.LiveRun.of(loaded, "diffusion", inputs, config, 0, turns=turns).start()
    time.sleep(0.1)
    waiting.stop()
    assert waiting.wait(5) and waiting.trace.start is None and waiting.started_at is None
    assert turns.load() == {"placed": 1, "waiting": 0}
    holder.stop()
    assert holder.wait(30) and turns.load() == {"placed": 0, "waiting": 0}


def test_a_race_s_two_sides_take_places_together_even_past_the_slots(loaded, config, inputs, slow):
    turns = Turns(slots=1)
    holder = live.LiveRun.of(loaded, "diffusion", inputs, slow, 0, turns=turns).start()
    wait_for_steps(holder, 1)
    gate = threading.Barrier(2)
    sides = [live.LiveRun.of(loaded, "diffusion", inputs, config, 0, start_gate=gate),
             live.LiveRun.of(loaded, "ar", inputs, config.replace(max_new_tokens=8), start_gate=gate)]
    for side in sides:
        side.turns = turns
        side.start()
    time.sleep(0.2)
    assert all(side.queued for side in sides)
    holder.stop()
    assert all(side.wait(60) for side in sides)
    assert abs(sides[0].started_at - sides[1].started_at) < 0.5 and all(s.trace.done for s in sides)


def test_turns_are_per_model_a_run_on_one_replica_never_waits_for_a_run_on_another():
    turns = Turns(slots=3)
    one, other, third = (Ticket(None, threading.Event()) for _ in range(3))
    for ticket in (one, other, third):
        assert turns.place(ticket)
    turns.take(one)
    one.model = other.model = "replica 1/2 · cpu"
    turns.step_done(one)  # its first record named its replica: it moves to that replica's turns
    third.model = "replica 2/2 · cpu"
    took = threading.Event()
    threading.Thread(target=lambda: (turns.take(third), took.set()), daemon=True).start()
    assert took.wait(5)  # `one` holds replica 1 and `third` took replica 2 at once
    waiting = threading.Event()
    threading.Thread(target=lambda: (turns.take(other), waiting.set()), daemon=True).start()
    time.sleep(0.1)
    assert not waiting.is_set()  # `other` shares replica 1 with `one`: it waits for one's next record
    turns.leave(one)  # one's run ended: replica 1 goes to `other`
    assert waiting.wait(5)
    for ticket in (other, third):
        turns.leave(ticket)
    assert turns.load() == {"placed": 0, "waiting": 0}
