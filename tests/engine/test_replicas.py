"""The model in Ray Serve replicas (dg.engine.replicas), on a real local Ray with half a CPU per replica: runs
stream step by step with their headless tokens, stop within a step, stay on their replica, go to the
least-loaded one (a race's lanes and an A/B pair together); a killed replica fails only its run and Serve
replaces it; a checkpoint the replicas cannot load, or a cluster without room for them, is one line at
start-up; the worker's exactness tests, the app's sharing tests and its sixteen-users load pass through two
replicas; the status line names the replica; `python app.py` without --replicas imports no Ray; no Ray process
outlives the tests."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from dg.engine import runs as live
from dg.engine.race import start_race
from dg.engine.replicas import ReplicaSpec, ServeReplicas
from dg.engine.routing import PLACEMENT
from dg.engine.turns import TURNS
from dg.ui.app import serve_runner, start_replicas
from tests.engine.test_worker import headless, long_config  # noqa: F401  (a fixture, found by name)
from tests.engine.test_worker import (
    test_ar_through_the_worker_makes_the_tokens_of_headless_ar as test_ar_on_a_replica_makes_headless_ar_s_tokens,
    test_learn_s_prediction_through_the_worker_equals_the_in_process_one as
    test_learn_s_prediction_on_a_replica_equals_the_in_process_one,
    test_runs_taking_turns_through_the_worker_make_their_solo_tokens_and_stop_at_their_budget as
    test_runs_taking_turns_on_replicas_make_their_solo_tokens_and_stop_at_their_budget,
    test_stop_mid_run_ends_it_cancelled_and_keeps_the_steps_it_made as
    test_stop_mid_run_on_a_replica_ends_it_within_a_step_and_keeps_the_steps_it_made,
    test_a_run_stopped_where_the_model_lives_apart_reports_the_forwards_of_one_stopped_here as
    test_a_run_stopped_on_a_replica_reports_the_forwards_of_one_stopped_here,
    test_two_seeded_runs_interleaved_step_by_step_each_make_their_solo_run as
    test_two_seeded_runs_interleaved_on_replicas_each_make_their_solo_run,
)
from tests.ui.test_load import test_sixteen_users_beside_an_abusive_client_wait_at_most_one_budget_more
from tests.ui.test_sharing import (  # the app's sharing, through two replicas
    test_a_long_run_stops_at_its_budget_and_keeps_its_steps,
    test_a_short_run_finishes_beside_a_long_one_with_the_tokens_it_makes_alone,
    test_a_waiting_user_sees_their_place_in_line_until_a_place_frees,
    test_many_sessions_at_once_each_get_their_solo_tokens,
    turns,  # noqa: F401  (a fixture, found by name)
)

# the app's load, through two replicas (slow, as where it comes from)
test_sixteen_users_beside_an_abusive_client_wait_at_most_one_budget_more = pytest.mark.slow(
    test_sixteen_users_beside_an_abusive_client_wait_at_most_one_budget_more)
ROOT = Path(__file__).resolve().parents[2]
SPEC = ReplicaSpec(2, 2, cpus=0.5)  # small CPU shares: the tests' Ray fits beside whatever else runs
REPLACED_S = 90.0  # Serve restarts a killed replica within this (a fresh process loading the checkpoint)


def ray_processes() -> list[psutil.Process]:
    """This process's Ray: the local instance it started (its node's processes are its descendants)."""
    return [p for p in psutil.Process().children(recursive=True) if "ray" in " ".join(p.cmdline())]


def running(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture(scope="module")
def hosted(checkpoint_dir):
    """Two replicas of the test checkpoint on a local Ray, shut down (Ray too) after the module."""
    slots = TURNS.slots
    runner = start_replicas(SPEC, checkpoint_dir)
    yield runner
    started = ray_processes()  # before the shutdown, while they are all still our descendants
    runner.close()
    TURNS.slots = slots
    deadline = time.time() + 30
    while left := [p for p in started if running(p)]:
        assert time.time() < deadline, f"Ray outlived its shutdown: {left}"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def url(hosted):
    """The whole app on the two replicas, served in this process."""
    with serve_runner(hosted) as address:
        yield address


def replicas_by_name(hosted) -> dict[str, dict]:
    """Each serving replica's `hello` (name, id, pid), by name."""
    handle = hosted.replicas.handle
    hellos = [handle.hello.remote(route=("replica", rid)).result() for rid in PLACEMENT.load()]
    return {h["name"]: h for h in hellos}


def open_long_run(hosted, inputs, config, seed, *, steps=2):
    """A live run that goes on for a while, once it has made `steps` steps."""
    run = live.LiveRun.of(hosted, "diffusion", inputs, config, seed).start()
    deadline = time.time() + 60
    while len(run.snapshot().steps) < steps:
        assert time.time() < deadline and not run.finished
        time.sleep(0.005)
    return run


def test_the_app_holds_only_the_model_s_shape_and_names_its_replicas(hosted, loaded):
    assert {p.device.type for p in hosted.model.parameters()} == {"meta"}
    assert hosted.sampler_config == loaded.sampler_config and hosted.eos_token_ids == loaded.eos_token_ids
    assert "in 2 Ray Serve replicas" in hosted.describe()


def test_a_seeded_run_streams_each_step_from_one_replica_with_the_headless_tokens(hosted, loaded, long_config,
                                                                                  inputs):
    solo = headless(loaded, inputs, long_config, seed=3)
    records, arrived = [], []
    for record in hosted.stream("diffusion", inputs, long_config, 3, threading.Event()):
        records.append(record)
        arrived.append(time.perf_counter())
    assert records[0].kind == "start" and records[-1].kind == "end"
    assert [r.argmax.tolist() for r in records if r.kind == "step"] == [r.argmax.tolist() for r in solo.steps]
    assert records[0].config["replica"] in ("replica 1/2 · cpu", "replica 2/2 · cpu")
    assert records[-1].finish_reason == solo.end.finish_reason
    first_step = next(i for i, r in enumerate(records) if r.kind == "step")
    # step by step, as made: the first step came long before the last, not all of them at the end
    assert arrived[first_step] - arrived[0] < 0.5 * (arrived[-1] - arrived[0])


def test_runs_at_once_go_to_the_least_loaded_replica_and_a_race_or_an_a_b_pair_shares_one(hosted, inputs,
                                                                                         long_config):
    first = open_long_run(hosted, inputs, long_config, 1)
    second = open_long_run(hosted, dict(inputs), long_config, 2)  # other inputs: not first's group
    try:
        assert sorted(PLACEMENT.load().values()) == [1, 1]  # one run on each replica
        assert first.trace.start.config["replica"] != second.trace.start.config["replica"]
        pair = [live.LiveRun.of(hosted, "diffusion", inputs, long_config, seed, label=label).start()
                for seed, label in ((3, "A"), (3, "B"))]  # as A/B starts them: one inputs dict
        race = start_race(hosted, "", inputs=inputs, config=long_config, seed=4)
        for runs in (pair, list(race.lanes.values())):
            deadline = time.time() + 60
            while any(r.snapshot().start is None for r in runs):
                assert time.time() < deadline
                time.sleep(0.005)
            assert len({r.snapshot().start.config["replica"] for r in runs}) == 1
        for run in (*pair, *race.lanes.values()):
            run.stop()
    finally:
        first.stop(), second.stop()
    assert all(r.wait(60) for r in (first, second))
    deadline = time.time() + 30
    while PLACEMENT.load():  # every run that ended gave its place back
        assert time.time() < deadline, PLACEMENT.load()
        time.sleep(0.05)


def test_a_killed_replica_fails_its_run_in_one_line_the_other_goes_on_and_serve_replaces_it(
        hosted, loaded, inputs, config, long_config):
    doomed = open_long_run(hosted, inputs, long_config, 1)
    other = open_long_run(hosted, dict(inputs), long_config.replace(max_new_tokens=32), 2)
    name = doomed.trace.start.config["replica"]
    assert other.trace.start.config["replica"] != name
    killed = replicas_by_name(hosted)[name]["pid"]
    os.kill(killed, signal.SIGKILL)
    assert doomed.wait(60), "the run hangs on a dead replica"
    assert f"ReplicaLost: {name} was lost mid-run" in doomed.error and "\n" not in doomed.error
    assert doomed.trace.end.finish_reason == "error" and doomed.trace.steps
    assert other.wait(120) and other.error is None and other.trace.end.finish_reason != "error"

    again = live.LiveRun.of(hosted, "diffusion", inputs, config, seed=3).start()  # the next run is served
    assert again.wait(120) and again.error is None
    assert again.trace.token_ids == headless(loaded, inputs, config, seed=3).token_ids
    deadline = time.time() + REPLACED_S
    while killed in (pids := serving_pids(hosted, inputs, long_config)) or len(pids) < 2:  # a new one serves
        assert time.time() < deadline, "Serve did not replace the killed replica"
        time.sleep(0.5)


def serving_pids(hosted, inputs, config) -> set[int]:
    """The processes of the replicas that two runs opened at once are served by (one each, least-loaded)."""
    runs = [live.LiveRun.of(hosted, "diffusion", dict(inputs), config, seed).start() for seed in (1, 2)]
    deadline = time.time() + 60
    while not all(r.snapshot().steps or r.finished for r in runs):
        assert time.time() < deadline
        time.sleep(0.005)
    names = {r.snapshot().start.config["replica"] for r in runs if r.error is None and r.snapshot().start}
    pids = {hello["pid"] for served, hello in replicas_by_name(hosted).items() if served in names}
    for run in runs:
        run.stop()
        run.wait(60)
    return pids


def test_a_cluster_without_room_for_the_replicas_is_one_line_at_start_up_and_the_others_serve_on(
        hosted, checkpoint_dir, loaded, inputs, config):
    too_many = ServeReplicas(ReplicaSpec(64, 64), checkpoint_dir)  # on the tests' Ray, already running
    with pytest.raises(ValueError, match=r"^--replicas 64 needs 64 CPUs, the Ray cluster has \d+$"):
        too_many.start()
    again = live.LiveRun.of(hosted, "diffusion", inputs, config, seed=3).start()
    assert again.wait(120) and again.error is None


def test_replicas_that_cannot_load_the_checkpoint_fail_the_app_s_start_in_one_line(tmp_path, checkpoint_dir):
    (tmp_path / "config.json").write_bytes((Path(checkpoint_dir) / "config.json").read_bytes())  # no weights
    out = subprocess.run([sys.executable, str(ROOT / "app.py"), "--replicas", "1", "--model", str(tmp_path)],
                         capture_output=True, text=True, timeout=240,
                         env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)})
    assert out.returncode == 2
    line = [x for x in out.stderr.splitlines() if x.startswith("app.py:")]
    assert len(line) == 1 and "cannot load the model" in line[0] and "no file named model.safetensors" in line[0]


def test_a_bad_replicas_count_is_one_line_and_the_plain_app_imports_no_ray():
    with pytest.raises(ValueError, match="N or MIN-MAX"):
        ReplicaSpec.parse("two")
    with pytest.raises(ValueError, match="1 <= MIN <= MAX, got 8-2"):
        ReplicaSpec.parse("8-2")
    assert ReplicaSpec.parse("2-8").autoscaled and str(ReplicaSpec.parse(" 3 ")) == "3"
    plain = "import sys, dg.ui.app, dg.engine.runs, dg.engine.worker; print('ray' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", plain], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split() == ["False"], out.stderr


def test_the_status_line_and_the_trace_file_name_the_replica_that_served_the_run(url, tmp_path):
    from gradio_client import Client

    from tests.ui.test_sharing import STATUS, submit, trace_of

    result = submit(Client(url, verbose=False, download_files=str(tmp_path)), seed=2).result(timeout=60)
    served = trace_of(result).start.config["replica"]
    assert served in ("replica 1/2 · cpu", "replica 2/2 · cpu")
    assert result[STATUS].startswith("**Done**") and result[STATUS].endswith(f"· {served}")
