"""Live runs: the background thread records exactly what a headless run records, and the UI's polls
see a trace that only grows, ends with the finished run, and survives a stop or an error."""

import asyncio
import threading
import time

import pytest
import torch

from dg.sampler import generate_diffusion
from dg.trace import RunEnd, RunStart, TokenRecord
from dg.engine import runs as live
from dg.engine.turns import Turns
from tests.engine.conftest import PROMPT


def test_a_live_run_records_the_same_tokens_and_steps_as_a_headless_run_with_the_same_seed(loaded, config, inputs):
    torch.manual_seed(3)
    headless = generate_diffusion(loaded.model, inputs, config)
    run = live.LiveRun.of(loaded, "diffusion", inputs, config, seed=3).start()
    assert run.wait(60)
    assert run.trace.token_ids == headless.token_ids
    assert [r.argmax.tolist() for r in run.trace.steps] == [r.argmax.tolist() for r in headless.steps]
    assert run.error is None and run.finished and not run.queued


def test_frames_only_grow_and_the_last_one_is_the_finished_trace(loaded, config, inputs):
    run = live.LiveRun.of(loaded, "diffusion", inputs, config, seed=0).start()
    frames = list(run.frames(fps=200))
    sizes = [len(f.steps) for f in frames]
    assert sizes == sorted(sizes)
    assert frames[-1].done and len(frames[-1].steps) == len(run.trace.steps)
    assert not any(f.done for f in frames[:-1])


def test_awatch_polls_several_runs_from_an_event_loop(loaded, config, inputs):
    runs = [live.LiveRun.of(loaded, "diffusion", inputs, config, seed=s).start() for s in (0, 1)]

    async def collect():
        return [frames async for frames in live.awatch(runs, fps=100)]

    polled = asyncio.run(collect())
    assert all(len(frames) == 2 for frames in polled)
    assert all(t.done for t in polled[-1])


def test_seeded_runs_take_turns_so_concurrent_runs_with_one_seed_agree(loaded, config, inputs):
    runs = [live.LiveRun.of(loaded, "diffusion", inputs, config, seed=7).start() for _ in range(3)]
    assert all(r.wait(60) for r in runs)
    assert runs[0].trace.token_ids == runs[1].trace.token_ids == runs[2].trace.token_ids


def test_stop_ends_the_run_between_steps_and_keeps_what_it_produced(loaded, inputs):
    slow = loaded.sampler_config.replace(max_denoising_steps=128, max_new_tokens=256, backend="torch")
    run = live.LiveRun.of(loaded, "diffusion", inputs, slow, seed=0).start()
    while len(run.snapshot().steps) < 2:
        assert not run.finished
        threading.Event().wait(0.005)
    run.stop()
    assert run.wait(30)
    trace = run.snapshot()
    assert trace.end.finish_reason == "cancelled"
    assert 2 <= len(trace.steps) < 128 * 16


def test_an_error_inside_the_run_is_reported_and_the_partial_trace_kept():
    def body(emit, cancel):
        emit(RunStart("ar", 3, 1, 10, 4, {}, [1], 0))
        emit(TokenRecord(0, 5, 0.1, torch.zeros(0).numpy(), torch.zeros(0).numpy(), 0.01))
        raise RuntimeError("out of memory")

    run = live.LiveRun(body).start()
    frames = list(run.frames(fps=100))
    assert "out of memory" in run.error
    assert frames[-1].end.finish_reason == "error"
    assert [r.token_id for r in frames[-1].tokens] == [5]


def test_a_run_in_line_shows_its_first_record_a_frame_after_its_turn_not_a_heartbeat_after():
    """The UI's first poll usually finds a run still in line (its thread has not taken the model yet);
    once its turn comes, its first record must reach the screen a frame interval later, not HEARTBEAT_S."""
    turns, hold = Turns(), 0.1

    def ahead(emit, cancel):
        time.sleep(hold)  # holds the model, so the next run waits in line

    def body(emit, cancel):
        emit(RunStart("ar", 3, 1, 10, 4, {}, [1], 0))
        emit(TokenRecord(0, 5, 0.1, torch.zeros(0).numpy(), torch.zeros(0).numpy(), 0.01))
        cancel.wait(5)

    first = live.LiveRun(ahead, turns=turns).start()
    time.sleep(0.02)
    run = live.LiveRun(body, turns=turns)
    t0 = time.perf_counter()
    run.start()
    shown = next(time.perf_counter() - t0 for frame in run.frames(fps=50.0) if frame.tokens)
    run.stop()
    assert first.wait(5) and run.wait(5)
    assert shown < hold + live.HEARTBEAT_S / 2


def test_the_ar_run_on_the_same_weights_counts_forwards(loaded, inputs):
    run = live.LiveRun.of(loaded, "ar", inputs, loaded.sampler_config.replace(max_new_tokens=5)).start()
    assert run.wait(30)
    assert len(run.trace.tokens) >= 1 and isinstance(run.trace.end, RunEnd)
    assert run.trace.metrics()["nfe"] == len(run.trace.tokens)


def test_sessions_stop_only_the_runs_of_the_session_that_asked(loaded, inputs):
    slow = loaded.sampler_config.replace(max_denoising_steps=128, max_new_tokens=256, backend="torch")
    mine, theirs = (live.LiveRun.of(loaded, "diffusion", inputs, slow, seed=0) for _ in range(2))
    sessions = live.Sessions()
    sessions.add("me", mine)
    sessions.add("you", theirs)
    mine.start()
    assert sessions.stop("me") == 1
    assert mine.cancel.is_set() and not theirs.cancel.is_set()
    assert mine.wait(30)
    assert sessions.stop("me") == 0


@pytest.mark.parametrize("change, message", [
    (dict(prompt="   "), "prompt is empty"),
    (dict(prompt="x" * 30_000), "limit is"),
    (dict(seed=-1), "seed must be"),
    (dict(seed=1.5), "seed must be"),
    (dict(knobs={"entropy_bound": -1.0}), "entropy_bound must be in"),
    (dict(knobs={"max_denoising_steps": 2.5}), "max_denoising_steps must be a whole number"),
    (dict(knobs={"t_min": 0.9, "t_max": 0.8}), "t_max must be > t_min"),
    (dict(knobs={"max_new_tokens": 100_000}), "max_new_tokens must be in"),
    (dict(knobs={"max_new_tokens": 4096}), "positions"),
    (dict(seed=2**63), "seed must be"),
    (dict(seed=float("nan")), "seed must be"),
])
def test_prepare_run_refuses_bad_input_with_a_message_that_names_it(loaded, change, message):
    values = dict(prompt=PROMPT, image=None, thinking=False, seed=0, knobs={}) | change
    with pytest.raises(ValueError, match=message):
        live.prepare_run(loaded, **values)


def test_prepare_run_refuses_a_file_that_is_not_an_image_by_its_name(loaded, tmp_path):
    bad = tmp_path / "notes.png"
    bad.write_text("not a picture")
    with pytest.raises(ValueError, match="not an image: 'notes.png'"):
        live.prepare_run(loaded, PROMPT, str(bad), False, 0, {})


@pytest.mark.parametrize("seed", [2**53 + 1, 2**63 - 1])
def test_prepare_run_keeps_a_large_seed_exact(loaded, seed):
    assert live.prepare_run(loaded, PROMPT, None, False, seed, {})[2] == seed


def test_a_b_config_is_held_to_the_ranges_and_the_context_check(loaded):
    inputs, config, _ = live.prepare_run(loaded, PROMPT, None, False, 0, {})
    for value, message in ((1e6, "max_new_tokens must be in"), (float("inf"), "finite"), (4096, "positions")):
        with pytest.raises(ValueError, match=message):
            live.with_knob(loaded, inputs, config, "max_new_tokens", value)
    assert live.with_knob(loaded, inputs, config, "max_new_tokens", 32).max_new_tokens == 32


def test_runs_reuse_worker_threads_instead_of_leaving_one_per_run_behind():
    def workers() -> int:
        return sum(t.name.startswith("dg-live") for t in threading.enumerate())

    ran_on = []
    live.LiveRun(lambda emit, cancel: None).start().wait(10)
    before = workers()
    for _ in range(40):
        assert live.LiveRun(lambda emit, cancel: ran_on.append(threading.current_thread())).start().wait(10)
    # a fresh thread per run (ended with it) left ~0.1 MB of torch's per-thread state behind each time
    assert all(t.is_alive() for t in ran_on) and workers() <= before + 2


def test_a_run_s_result_is_its_trace_or_one_line_saying_why_not():
    def ends(emit, cancel):
        emit(RunStart("ar", 3, 1, 10, 4, {}, [1], 0))
        emit(RunEnd("eos", 1, 0, 0.01))

    def raises(emit, cancel):
        raise RuntimeError("out of memory")

    def hangs(emit, cancel):
        cancel.wait(30)

    assert live.LiveRun(ends).start().result(10).end.finish_reason == "eos"
    with pytest.raises(ValueError, match="^RuntimeError: out of memory$"):
        live.LiveRun(raises).start().result(10)
    slow = live.LiveRun(hangs).start()
    with pytest.raises(ValueError, match=r"^the search run did not finish in 0.2 s$"):
        slow.result(0.2, "the search run")
    assert slow.cancel.is_set() and slow.wait(10)  # stopped, not left running
