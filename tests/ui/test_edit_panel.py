"""The edit panel's logic (dg.ui.edit_panel) and its draft endpoint on the real server: the picked run loads
all pinned (or says why it cannot), clicks pin, free, blank and pick a cell as the choice says, a shift-click
reaches every cell since the last click; /draft runs a draft with blanks with its text pinned, at Generate's
Pace, and a bad draft is a one-line message."""

import json
import time
import re
from pathlib import Path

import gradio as gr
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from dg.ui.kept import History
from dg.trace import Trace
from dg.ui.edit_panel import BLANK, PIN, WRITE, check_redenoise, clicked, load
from tests.ui.test_app import FAST

# outputs of /draft and /redenoise, in order (gr.State is not part of the API)
CANVAS, PANEL, TEXT, INSPECTOR, STEP, TRACE_FILE, PICKER, STATUS, COMPARE = range(9)


@pytest.fixture
def history(diffusion_trace, ar_trace):
    return History().keep("Write a story.", ar_trace).keep("Write a story.", diffusion_trace, meta={"image": None})


@pytest.fixture
def client(url, tmp_path):
    return Client(url, verbose=False, download_files=str(tmp_path))


def test_the_picked_run_loads_all_pinned_and_an_ar_run_says_why_it_cannot(history):
    editing, note = load(history, history.labels[-1], None)
    assert note == "" and all(editing.edit.pinned) and editing.source is history.runs[-1]
    editing, note = load(history, history.labels[0], None)
    assert editing is None and "only a diffusion run" in note


def test_a_picture_run_keeps_its_upload_only_when_the_file_is_the_same_picture(diffusion_trace):
    history = History().keep("Describe the picture.", diffusion_trace, meta={"image": "shapes.png"})
    assert load(history, None, "/tmp/gradio/abc/shapes.png")[0].image == "/tmp/gradio/abc/shapes.png"
    assert load(history, None, "/tmp/gradio/abc/other.png")[0].image is None


def test_clicks_pin_free_blank_and_pick_and_a_shift_click_reaches_every_cell_since_the_last(history):
    editing, _ = load(history, None, None)
    freed = clicked(editing, "3@1", PIN)
    assert not freed.edit.pinned[3] and clicked(freed, "3@2", PIN).edit.pinned[3]
    ranged = clicked(freed, "3-7@3", PIN)  # every cell takes the state the last click gave
    assert not any(ranged.edit.pinned[3:8]) and ranged.edit.pinned[8]
    blank = clicked(editing, "9-5@4", BLANK)
    assert blank.edit.ids[5:10] == (None,) * 5
    assert clicked(editing, "6@5", WRITE).selected == 6 and clicked(editing, "6@5", WRITE).edit == editing.edit
    assert clicked(None, "1@6", PIN) is None


def test_re_denoise_with_every_cell_pinned_says_to_free_or_blank_some_first(history):
    editing, _ = load(history, None, None)
    with pytest.raises(gr.Error, match="every cell is pinned.*free or blank some cells first"):
        check_redenoise(editing)
    check_redenoise(clicked(editing, "3@1", PIN))  # one free cell is enough
    check_redenoise(clicked(editing, "4@1", BLANK))
    with pytest.raises(gr.Error, match="generate a diffusion run first"):
        check_redenoise(None)


def test_a_click_past_the_canvas_is_a_one_line_message(history):
    editing, _ = load(history, None, None)
    with pytest.raises(Exception, match="past the canvas"):
        clicked(editing, "0-9999@1", BLANK)


def test_the_draft_endpoint_pins_the_draft_s_text_and_keeps_the_run(client):
    result = client.predict(prompt="Write a story.", image=None, thinking=False, seed=0, draft="the {{4}} and {{...}}",
                            api_name="/draft", **FAST)
    text = Path(result[TRACE_FILE]).read_text()
    trace = Trace.from_json(text)
    assert json.loads(text)["run"]["draft"] == "the {{4}} and {{...}}"  # the file says what produced the run
    assert trace.steps and all(step.pinned is not None for step in trace.steps)
    assert trace.steps[0].pinned.sum() > 0 and "Done" in result[STATUS]
    assert re.match(r"#\d+ draft ", result[PICKER]["value"]) and result[TEXT]


def test_the_app_and_the_cli_run_the_same_draft_with_the_same_seed_to_the_same_tokens(client, checkpoint_dir, capsys):
    """Both draw a draft's blanks from a generator of the run's seed (dg.drafts.blank_generator), not from
    whatever the global RNG drew before."""
    from dg.cli import main

    draft = "the {{4}} and {{...}}"
    result = client.predict(prompt="Write a story.", image=None, thinking=False, seed=3, draft=draft, api_name="/draft",
                            **FAST)
    app = Trace.from_json(Path(result[TRACE_FILE]).read_text())
    main(["generate", "--model", str(checkpoint_dir), "--prompt", "Write a story.", "--draft", draft, "--seed", "3",
          "--max-denoising-steps", str(FAST["max_denoising_steps"]), "--max-new-tokens", str(FAST["max_new_tokens"]),
          "--json"])
    cli = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cli["token_ids"] == app.token_ids and app.token_ids
    assert [s["noisy"] for s in cli["steps"]][0] == app.steps[0].noisy.tolist()  # the same blanks, drawn alike


@pytest.mark.parametrize("draft, message", [("{{...}} then text", "can only end a draft"), ("x {{0}}", "n >= 1"),
                                            ("{{40}}", "token budget holds 16")])
def test_a_bad_draft_is_one_line_that_says_what_is_wrong(client, draft, message):
    with pytest.raises(AppError, match=re.escape(message)):
        client.predict(prompt="Write a story.", image=None, thinking=False, seed=0, draft=draft, api_name="/draft",
                       **FAST)


def test_a_draft_run_plays_at_generate_s_pace(client):
    pace_ms = 150
    start = time.perf_counter()
    job = client.submit(prompt="Write a story.", image=None, thinking=False, seed=0, draft="the {{4}} and {{...}}",
                        pace_ms=pace_ms, api_name="/draft", **FAST)
    statuses = []
    while not job.done():
        statuses += [out[STATUS] for out in job.outputs()[len(statuses):]]
        time.sleep(0.02)
    result = job.result(timeout=60)
    steps = len(Trace.from_json(Path(result[TRACE_FILE]).read_text()).steps)
    assert steps > 2 and "Done" in result[STATUS]
    assert time.perf_counter() - start >= (steps - 1) * pace_ms / 1000  # the last step shown no sooner
    assert any(isinstance(s, str) and "slow motion, 150 ms a step" in s for s in statuses), statuses
