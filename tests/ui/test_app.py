"""The real Gradio server, driven through gradio_client: Generate streams frames and returns the final
canvas and its trace, Race returns both sides, A/B and Learn answer, and bad input gets a message."""

import json
import re
import threading
import time
from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from PIL import Image

from dg.trace import Trace
from dg.ui.generate_tab import LIVE_REPLAY, REPLAY
from dg.ui.common import LIVE_INFO

ROOT = Path(__file__).resolve().parents[2]
FAST = dict(max_denoising_steps=6, max_new_tokens=16)  # one 16-token canvas, at most 6 steps
SLOW = dict(max_denoising_steps=128, max_new_tokens=256)
# outputs of /generate, in order (gr.State is not part of the API)
CANVAS, PANEL, TEXT, STATUS, STEP, INSPECTOR, TRACE_FILE, PICKER = range(8)
# outputs of /race
D_MARK, D_CANVAS, D_STATS, D_TEXT, A_MARK, A_CANVAS, A_STATS, A_TEXT, H_MARK, H_CANVAS, H_STATS, H_TEXT, RACE_STATUS, \
    RACE_CHART, VERDICT, RACE_PICKER = range(16)


@pytest.fixture
def client(url, tmp_path):
    return Client(url, verbose=False, download_files=str(tmp_path))


def generate(client, prompt="What is 12 + 30?", image=None, thinking=False, seed=0, **knobs):
    return client.predict(prompt=prompt, image=image, thinking=thinking, seed=seed, api_name="/generate",
                          **(FAST | knobs))


def test_generate_streams_frames_then_returns_the_final_canvas_and_its_trace(client):
    job = client.submit(prompt="What is 12 + 30?", image=None, thinking=True, seed=0, api_name="/generate", **FAST)
    final = job.result(timeout=120)
    assert len(job.outputs()) >= 2  # at least one live frame before the final update
    first, *frames, _ = job.outputs()  # the picker and the replay name the live run from its first frame on
    assert first[PICKER]["value"] is None and first[PICKER]["info"] == LIVE_INFO, first[PICKER]
    assert not first[PICKER]["interactive"]
    assert first[STEP]["label"] == LIVE_REPLAY and not first[STEP]["interactive"], first[STEP]
    assert all(len(o[PICKER]) == len(o[STEP]) == 1 for o in frames)  # and keep it until the run is kept
    assert isinstance(final[CANVAS], list)  # one fragment per cell: a live frame sends the cells that changed
    cells = re.findall(r'data-pos="(\d+)"', "".join(final[CANVAS]))
    assert [int(p) for p in cells] == list(range(16))
    trace = Trace.from_json(Path(final[TRACE_FILE]).read_text())
    assert trace.done and trace.steps and len(trace.canvases) == 1
    assert "Done" in final[STATUS] and f"{len(trace.steps)} steps" in final[PICKER]["value"]
    assert final[STEP]["value"] == len(trace.steps) and final[STEP]["minimum"] == 1  # run steps count from 1
    assert final[STEP]["interactive"] and final[STEP]["label"] == REPLAY and final[PICKER]["interactive"]
    figures = client.predict(final[PICKER]["value"], api_name="/plots")  # chained after /generate in the page
    assert len(figures) == 4 and all(f["type"] == "plotly" for f in figures)


def test_the_same_seed_gives_the_same_canvas_and_another_seed_another(client):
    first, again, other = (generate(client, seed=s) for s in (5, 5, 6))
    ids = [Trace.from_json(Path(r[TRACE_FILE]).read_text()).token_ids for r in (first, again, other)]
    assert ids[0] == ids[1] and first[CANVAS] == again[CANVAS]
    assert ids[0] != ids[2]


def test_the_replay_endpoint_draws_any_step_of_the_session_s_run(client):
    final = generate(client)
    trace = Trace.from_json(Path(final[TRACE_FILE]).read_text())
    canvas, panel, _ = client.predict(final[PICKER]["value"], 1, "noisy", 3, api_name="/replay")  # run step 1
    assert "canvas 1 · step 1 · showing noisy" in "".join(canvas)
    assert "step <b>1/" in panel
    last, _, inspector = client.predict(final[PICKER]["value"], len(trace.steps), "argmax", 3, api_name="/replay")
    assert f"step {trace.steps[-1].step} · showing argmax" in "".join(last) and "position <b>3</b>" in inspector


def huge_png(path: Path) -> str:
    Image.new("RGB", (4200, 4100), "white").save(path)
    return handle_file(str(path))


@pytest.mark.parametrize("case, message", [
    ("empty prompt", "prompt is empty"),
    ("very long prompt", "limit is"),
    ("not an image", re.escape("that file is not an image (notes.png): cannot identify image file")),
    ("huge image", "larger than"),
    ("entropy bound below its slider", "less than minimum value 0.01"),
    ("t_min above t_max", "t_max must be > t_min"),
    ("negative seed", "seed must be a whole number in"),
])
def test_bad_input_gets_a_clear_message_and_the_server_keeps_serving(client, tmp_path, case, message):
    kwargs = {"empty prompt": dict(prompt="  "), "very long prompt": dict(prompt="x" * 25_000),
              "entropy bound below its slider": dict(entropy_bound=-0.5),
              "t_min above t_max": dict(t_min=0.9, t_max=0.8), "negative seed": dict(seed=-3)}.get(case, {})
    if case == "not an image":
        (tmp_path / "notes.png").write_text("not a picture")
        kwargs = dict(image=handle_file(str(tmp_path / "notes.png")))
    if case == "huge image":
        kwargs = dict(image=huge_png(tmp_path / "huge.png"))
    with pytest.raises(AppError, match=message):
        generate(client, **kwargs)
    assert "Done" in generate(client)[STATUS]


def test_an_image_prompt_runs_with_the_picture_example(client):
    picture = handle_file(str(ROOT / "assets" / "examples" / "picture-1.png"))
    final = generate(client, prompt="How many shapes are in the picture?", image=picture)
    assert "Done" in final[STATUS]


def test_stop_ends_the_run_half_way_and_keeps_its_partial_replay(client):
    job = client.submit(prompt="Tell a long story.", image=None, thinking=False, seed=0, api_name="/generate", **SLOW)
    deadline = time.time() + 60
    while len(job.outputs()) < 3 and not job.done():  # a few live frames first
        assert time.time() < deadline
        time.sleep(0.02)
    assert "Stopping" in client.predict(api_name="/stop")
    final = job.result(timeout=60)
    trace = Trace.from_json(Path(final[TRACE_FILE]).read_text())
    assert trace.end.finish_reason == "cancelled" and trace.steps
    assert "(stopped)" in final[PICKER]["value"] and "cancelled" in final[STATUS]
    assert len(trace.steps) < 128 * 16
    assert client.predict(api_name="/stop") == {"__type__": "update"}  # nothing running: the status stays


def test_race_returns_three_lanes_with_their_forward_passes_and_a_chart(client):
    out = client.predict(prompt="What is 12 + 30?", thinking=False, seed=0, api_name="/race", **FAST)
    for stats in (out[D_STATS], out[A_STATS], out[H_STATS]):
        passes = int(re.search(r"\| forward passes \| (\d+) \|", stats).group(1))
        assert passes > 0
    assert "data-pos" in "".join(out[D_CANVAS]) and "AR ·" in "".join(out[A_CANVAS])
    assert "verify round" in "".join(out[H_CANVAS])
    assert out[RACE_STATUS] == "finished" and out[RACE_CHART]["type"] == "plotly"
    assert "wins" in out[VERDICT] and "Speed (effective tok/s)" in out[VERDICT]
    # a free question: each lane says it finished with no reference to check, and the verdict names no mark
    assert [out[m] for m in (D_MARK, A_MARK, H_MARK)] == ["finished · no reference answer to check"] * 3


def test_ab_runs_the_same_prompt_and_seed_with_one_knob_changed(client):
    a, b, summary, picker = client.predict(
        prompt="What is 12 + 30?", image=None, thinking=False, seed=0, b_knob="entropy_bound", b_value=2.0,
        api_name="/ab", **FAST)
    assert "A: entropy_bound = 0.1" in a and "B: entropy_bound = 2.0" in b
    assert summary.count("| A: entropy_bound") == 1 and summary.count("| B: entropy_bound") == 1
    labels = [choice[0] for choice in picker["choices"]]
    assert any(" A " in label for label in labels) and labels[-1].startswith("#") and " B " in labels[-1]


def test_learn_noises_an_answer_asks_for_one_prediction_and_exports_the_run(client):
    noisy = client.predict("Alice the bear loves honey.", 1.0, 0, api_name="/noise")
    assert "replaced" in noisy
    prediction = client.predict("Write a sentence about a bear.", "Alice the bear loves honey.", 0.5, 0,
                                api_name="/denoise")
    assert "recovers" in prediction
    generate(client)
    message, trace_json, gif, page = client.predict(None, api_name="/export")  # None: the newest run
    assert message.startswith("Exported")
    assert Trace.from_json(Path(trace_json).read_text()).done
    assert Path(gif).read_bytes()[:6] in (b"GIF87a", b"GIF89a")
    assert "<html" in Path(page).read_text().lower()


def test_two_users_generate_at_once_and_each_gets_their_own_seeded_run(url, tmp_path):
    results = {}

    def user(name):
        client = Client(url, verbose=False, download_files=str(tmp_path / name))
        results[name] = [generate(client, seed=11) for _ in range(2)]

    threads = [threading.Thread(target=user, args=(n,)) for n in ("ann", "bob")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    ids = {json.dumps(Trace.from_json(Path(r[TRACE_FILE]).read_text()).token_ids) for rs in results.values()
           for r in rs}
    assert len(results) == 2 and len(ids) == 1
    assert all(rs[-1][PICKER]["value"].startswith("#2 ") for rs in results.values())  # histories are per session
