"""The model in a worker process (dg.engine.worker) records what a headless run records: seeds, interleaved
runs, turns, budgets, stop, AR and Learn's prediction are exact; a killed worker is a run error, and the
next run starts a fresh one; the worker ends with the app's process; the app served with it answers
/generate."""

import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from gradio_client import Client

from dg.ar import generate_ar
from dg.config import MODES, SamplerConfig
from dg.edits import CanvasEdit
from dg.devices import share_cpu
from dg.denoise import denoise_once
from dg.sampler import generate_diffusion
from dg.trace import Trace
from dg.engine import runs as live
from dg.ui.app import serve
from dg.engine.worker import AHEAD, WorkerProcess, _Run, start_worker
from dg.engine.turns import Budget, Ticket, Turns
from tests.engine.conftest import PROMPT


@pytest.fixture(scope="module")
def hosted(checkpoint_dir):
    hosted = start_worker(checkpoint_dir)
    yield hosted
    hosted.close()


@pytest.fixture
def long_config(loaded):
    """A run that never settles early: every canvas takes its step cap."""
    return loaded.sampler_config.replace(max_denoising_steps=40, max_new_tokens=64, confidence_threshold=1e-9,
                                         backend="torch")


def headless(loaded, inputs, config, seed) -> Trace:
    torch.manual_seed(seed)
    return generate_diffusion(loaded.model, inputs, config)


def argmaxes(records) -> list:
    return [r.argmax.tolist() for r in records if r.kind == "step"]


def test_the_app_s_process_holds_no_weights_only_the_model_s_shape(hosted, loaded):
    assert {p.device.type for p in hosted.model.parameters()} == {"meta"}
    assert hosted.model.config.canvas_length == loaded.model.config.canvas_length
    assert hosted.eos_token_ids == loaded.eos_token_ids and hosted.sampler_config == loaded.sampler_config
    assert "worker process" in hosted.describe()


def test_a_seeded_run_through_the_worker_makes_the_tokens_and_steps_of_a_headless_run(hosted, loaded, config,
                                                                                      inputs):
    solo = headless(loaded, inputs, config, seed=3)
    run = live.LiveRun.of(hosted, "diffusion", inputs, config, seed=3).start()
    assert run.wait(120) and run.error is None
    assert run.trace.token_ids == solo.token_ids
    assert argmaxes(run.trace.steps) == argmaxes(solo.steps)
    assert [r.accepted.tolist() for r in run.trace.steps] == [r.accepted.tolist() for r in solo.steps]


@pytest.mark.parametrize("pause", [0.0, 0.01])
def test_two_seeded_runs_interleaved_step_by_step_each_make_their_solo_run(hosted, loaded, long_config, inputs,
                                                                           pause):
    """`pause`: the app drawing after each record, while the child makes both runs' next records ahead."""
    solo = {seed: headless(loaded, inputs, long_config, seed) for seed in (1, 2)}
    streams = {seed: hosted.stream("diffusion", inputs, long_config, seed, threading.Event()) for seed in (1, 2)}
    records = {1: [], 2: []}
    while streams:
        for seed, stream in list(streams.items()):  # one record of each in turn
            record = next(stream, None)
            time.sleep(pause)
            if record is None:
                del streams[seed]
            else:
                records[seed].append(record)
    for seed in (1, 2):
        assert argmaxes(records[seed]) == argmaxes(solo[seed].steps)
        assert records[seed][-1].finish_reason == solo[seed].end.finish_reason


def test_runs_taking_turns_through_the_worker_make_their_solo_tokens_and_stop_at_their_budget(
        hosted, loaded, config, long_config, inputs):
    solo = {seed: headless(loaded, inputs, config, seed).token_ids for seed in (1, 2)}
    turns = Turns(slots=2)
    together = {seed: live.LiveRun.of(hosted, "diffusion", inputs, config, seed) for seed in (1, 2)}
    for run in together.values():
        run.turns, run.ticket = turns, Ticket(run.seed, run.cancel)
        run.start()
    assert all(run.wait(120) for run in together.values())
    assert {seed: run.trace.token_ids for seed, run in together.items()} == solo

    run = live.LiveRun.of(hosted, "diffusion", inputs, long_config, seed=0)
    run.turns = Turns(budget=Budget(steps=5))
    assert run.start().wait(60) and run.error is None
    assert run.trace.end.finish_reason == "cancelled" and run.over_budget == "5 steps"
    assert argmaxes(run.trace.steps) == argmaxes(headless(loaded, inputs, long_config, seed=0).steps)[:5]


def test_stop_mid_run_ends_it_cancelled_and_keeps_the_steps_it_made(hosted, loaded, long_config, inputs):
    solo = headless(loaded, inputs, long_config, seed=5)
    cancel = threading.Event()
    records = []
    for record in hosted.stream("diffusion", inputs, long_config, 5, cancel):
        records.append(record)
        if len(records) == 4:  # RunStart and three steps
            cancel.set()
    assert records[-1].kind == "end" and records[-1].finish_reason == "cancelled"
    assert argmaxes(records) == argmaxes(solo.steps)[:3]

    run = live.LiveRun.of(hosted, "diffusion", inputs, long_config, seed=5).start()  # Stop through a live run
    deadline = time.time() + 60
    while run._count < 3:
        assert time.time() < deadline and not run.finished
        time.sleep(0.002)
    run.stop()
    assert run.wait(60) and run.error is None
    assert run.trace.end.finish_reason == "cancelled" and 0 < len(run.trace.steps) < len(solo.steps)
    assert argmaxes(run.trace.steps) == argmaxes(solo.steps)[:len(run.trace.steps)]


@pytest.mark.parametrize("mode", MODES)
def test_a_run_stopped_where_the_model_lives_apart_reports_the_forwards_of_one_stopped_here(
        hosted, loaded, long_config, inputs, mode):
    """Stopped mid-run, a run of each mode ends with the forward counts (NFE) of the same run stopped in this
    process right after the same records: the counts travel on the records, so NFE is one fact wherever the
    run ran (hybrid included, whose extra encoder pass at a canvas's end a rebuilt count missed)."""
    config = long_config if mode != "ar" else long_config.replace(max_new_tokens=24)
    cancel, records = threading.Event(), []
    for record in hosted.stream(mode, inputs, config, 5, cancel):
        records.append(record)
        if len(records) == 6:
            cancel.set()
    assert records[-1].kind == "end" and records[-1].finish_reason == "cancelled"
    torch.manual_seed(5)
    here_cancel = threading.Event()
    stream = loaded.stream(mode, inputs, config, None, here_cancel)
    here = [next(stream) for _ in records[:-1]]
    here_cancel.set()
    here += list(stream)
    assert [r.kind for r in here] == [r.kind for r in records]
    assert here[-1].finish_reason == "cancelled"
    assert ((here[-1].encoder_forwards, here[-1].decoder_forwards)
            == (records[-1].encoder_forwards, records[-1].decoder_forwards))


@pytest.mark.parametrize("kind, made", [("diffusion", 1), ("diffusion", AHEAD), ("ar", 1), ("ar", AHEAD),
                                        ("hybrid", 1), ("hybrid", AHEAD)])
def test_steps_made_ahead_are_dropped_when_their_request_stops_the_run(loaded, long_config, inputs, kind, made):
    """The child makes a run's next records before they are asked for (at most `AHEAD`); a stop in the
    request for the first ends the run exactly where a run without records made ahead ends: same records,
    same counts, and nothing made ahead comes after the end."""
    options = long_config if kind != "ar" else long_config.replace(max_new_tokens=24)

    def run_until_stop(ahead: int) -> list:
        cancel = threading.Event()
        run = _Run(loaded.stream(kind, inputs, options, None, cancel), cancel, seed=3)
        got = [run.next(False) for _ in range(4)]  # RunStart and three steps (or tokens; hybrid: a token, a round)
        for _ in range(ahead):
            assert run.wants_ahead()
            run.make_ahead()
        assert len(run.ahead) == ahead and run.wants_ahead() == (ahead < AHEAD)
        assert all(m[0].kind in ("step", "token", "round") for m in run.ahead)
        got.append(run.next(True))
        assert not run.ahead and not run.wants_ahead()
        return got

    plain, ahead = run_until_stop(0), run_until_stop(made)
    for got in (plain, ahead):
        assert [r.kind for r in got][-1] == "end" and got[-1].finish_reason == "cancelled"
    assert [r.kind for r in ahead] == [r.kind for r in plain]
    assert ((ahead[-1].encoder_forwards, ahead[-1].decoder_forwards)
            == (plain[-1].encoder_forwards, plain[-1].decoder_forwards))
    ids = {"step": lambda r: r.argmax.tolist(), "token": lambda r: r.token_id, "round": lambda r: r.accepted}
    assert [ids[r.kind](r) for r in ahead[1:-1]] == [ids[r.kind](r) for r in plain[1:-1]]


def test_records_made_ahead_to_the_end_of_a_run_are_its_records_and_nothing_after_them(loaded, config, inputs):
    """Made ahead as far as the child wants, then asked for: the records of a run never made ahead, then
    the end; nothing is made past the end."""
    def records(ahead: bool) -> list:
        cancel = threading.Event()
        run, got = _Run(loaded.stream("diffusion", inputs, config, None, cancel), cancel, seed=5), []
        while not run.finished:
            while ahead and run.wants_ahead():
                run.make_ahead()
            assert len(run.ahead) <= AHEAD
            got.append(run.next(False))
        assert not run.ahead and not run.wants_ahead()
        return got

    plain, ahead = records(False), records(True)
    assert [r.kind for r in ahead] == [r.kind for r in plain] and ahead[-1].kind == "end"
    assert argmaxes(ahead) == argmaxes(plain) and ahead[-1].finish_reason == plain[-1].finish_reason


def test_a_draft_with_pins_through_the_worker_makes_the_headless_run_and_holds_every_pin(hosted, loaded, config,
                                                                                         inputs):
    edit = CanvasEdit.of_trace(headless(loaded, inputs, config, seed=3))
    edit = edit.blanked(range(len(edit) // 4, len(edit) // 2))
    draft = edit.to_draft(loaded.model.config.text_config.vocab_size, torch.Generator().manual_seed(3))
    torch.manual_seed(3)
    solo = generate_diffusion(loaded.model, inputs, config, draft=draft)
    run = live.LiveRun.of(hosted, "diffusion", inputs, config, 3, draft=draft).start()  # pickled to the worker
    assert run.wait(120) and run.error is None
    assert run.trace.token_ids == solo.token_ids and argmaxes(run.trace.steps) == argmaxes(solo.steps)
    length = loaded.model.config.canvas_length
    for step in run.trace.steps:
        span = slice(step.canvas * length, (step.canvas + 1) * length)
        held, tokens = draft.pinned[0, span].numpy(), draft.init_canvas[0, span].numpy()
        assert (step.pinned == held).all() and (step.argmax[held] == tokens[held]).all()


def test_ar_through_the_worker_makes_the_tokens_of_headless_ar(hosted, loaded, inputs):
    solo = generate_ar(loaded.model, inputs, SamplerConfig(max_new_tokens=24))
    run = live.LiveRun.of(hosted, "ar", inputs, hosted.sampler_config.replace(max_new_tokens=24)).start()
    assert run.wait(120) and run.error is None
    assert run.trace.token_ids == solo.token_ids and run.trace.end.finish_reason == solo.end.finish_reason
    assert run.trace.end.encoder_forwards == solo.end.encoder_forwards


def test_hybrid_through_the_worker_makes_greedy_ar_s_tokens_with_its_rounds(hosted, loaded, inputs, config):
    solo = generate_ar(loaded.model, inputs, config)
    run = live.LiveRun.of(hosted, "hybrid", inputs, config, 3, label="hybrid").start()
    assert run.wait(120) and run.error is None
    assert run.trace.token_ids == solo.token_ids and run.trace.rounds
    # the prefill and a verify pass per round (and one more where AR's token closes a canvas); a step per draft
    assert run.trace.end.encoder_forwards >= 1 + len(run.trace.rounds)
    assert run.trace.end.decoder_forwards == len(run.trace.steps)


def test_learn_s_prediction_through_the_worker_equals_the_in_process_one(hosted, loaded):
    canvas, threads = [5, 9, 200, 3, 77], torch.get_num_threads()
    share_cpu(loaded.device)  # the app's thread count, in-process as in the worker: the same float sums
    try:
        expected = denoise_once(loaded.model, loaded.processor, PROMPT, canvas)
    finally:
        torch.set_num_threads(threads)
    assert hosted.denoise(PROMPT, canvas) == expected


def test_a_killed_worker_is_a_run_error_that_keeps_the_partial_trace_and_the_next_run_starts_a_fresh_one(
        hosted, loaded, config, long_config, inputs):
    run = live.LiveRun.of(hosted, "diffusion", inputs, long_config, seed=0).start()
    deadline = time.time() + 60
    while run._count < 3:
        assert time.time() < deadline and not run.finished
        time.sleep(0.002)
    os.kill(hosted.worker.pid, signal.SIGKILL)
    assert run.wait(30), "the run hangs on a dead worker"
    assert "model process was killed by signal 9" in run.error
    assert run.trace.end.finish_reason == "error" and run.trace.steps

    again = live.LiveRun.of(hosted, "diffusion", inputs, config, seed=3).start()  # a fresh worker, the same seed discipline
    assert again.wait(180) and again.error is None
    assert again.trace.token_ids == headless(loaded, inputs, config, seed=3).token_ids


def test_a_checkpoint_the_worker_cannot_load_is_the_error_load_raises_and_the_worker_is_gone(checkpoint_dir,
                                                                                            tmp_path):
    shutil.copy(Path(checkpoint_dir) / "config.json", tmp_path / "config.json")  # no weights
    host = WorkerProcess(tmp_path)
    with pytest.raises(ValueError, match="no file named model.safetensors"):
        host.start()
    assert not host.alive()


def test_the_app_served_with_the_worker_process_answers_generate(loaded, inputs, tmp_path):
    knobs = dict(max_denoising_steps=6, max_new_tokens=32)
    with serve(loaded, in_process=False) as url:
        client = Client(url, verbose=False, download_files=str(tmp_path))
        result = client.predict(prompt=PROMPT, image=None, thinking=False, seed=4, api_name="/generate", **knobs)
        client.close()
    path = next(o for o in result if isinstance(o, str) and o.endswith(".json"))
    trace = Trace.from_json(Path(path).read_text())
    assert trace.token_ids == headless(loaded, inputs, loaded.sampler_config.replace(**knobs), seed=4).token_ids


APP_THAT_ENDS = """
import signal
import sys
from dg.engine.worker import start_worker
hosted = start_worker(sys.argv[1])
print(hosted.worker.pid, flush=True)
if sys.argv[2] == "is killed":
    signal.pause()
"""


def running(pid: int) -> bool:
    """The process exists and is not a zombie (an orphan's zombie waits for whoever adopts it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


@pytest.mark.parametrize("end", ["exits", "is killed"])
def test_the_worker_ends_when_the_app_s_process_ends(checkpoint_dir, end):
    app = subprocess.Popen([sys.executable, "-c", APP_THAT_ENDS, str(checkpoint_dir), end], text=True,
                           stdout=subprocess.PIPE, env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"})
    worker = int(app.stdout.readline())
    if end == "is killed":
        app.kill()
    app.wait(60)
    deadline = time.time() + 30
    while running(worker):
        assert time.time() < deadline, f"the worker outlived the app that {end}"
        time.sleep(0.1)


NICER_APP = """
import os, sys, threading
from dg.engine.worker import APP_NICE, start_worker
hosted = start_worker(sys.argv[1])
host = hosted.worker
before = os.getpriority(os.PRIO_PROCESS, 0)
host.yield_cpu()
later = []
thread = threading.Thread(target=lambda: later.append(os.getpriority(os.PRIO_PROCESS, 0)))
thread.start(); thread.join()
first = os.getpriority(os.PRIO_PROCESS, host.pid)
os.kill(host.pid, 9)
host._proc.join(10)
restart = threading.Thread(target=host.start)  # a run's thread, nicer now, starts the fresh child
restart.start(); restart.join()
print(before, os.getpriority(os.PRIO_PROCESS, 0), later[0], first, os.getpriority(os.PRIO_PROCESS, host.pid), APP_NICE)
host.close()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice levels are Linux's")
def test_the_app_yields_the_cpu_to_the_model_process_and_a_restarted_one_keeps_its_priority(checkpoint_dir):
    out = subprocess.run([sys.executable, "-c", NICER_APP, str(checkpoint_dir)], capture_output=True, text=True,
                         timeout=180, env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.returncode == 0, out.stderr
    before, app, later, model, restarted, nice = map(int, out.stdout.split()[-6:])
    assert app == min(19, before + nice) and later == app  # the app's threads, and those it starts after
    assert model == before and restarted == before  # the model process keeps the priority it had

