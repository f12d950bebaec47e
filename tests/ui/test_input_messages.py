"""Every bad value a user can type gets one line naming the value and the range it must be in, through the real
server: nothing is rounded or clamped without a word, no server path is shown, and what the page showed stays."""

import re

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from dg.trace import Trace
from dg.ui import generate_tab
from dg.ui.app import build_app
from dg.ui.common import budget_limit, open_upload

FAST = dict(max_denoising_steps=6, max_new_tokens=16)
CANVAS, PANEL, TEXT, STATUS, STEP, INSPECTOR, TRACE_FILE, PICKER = range(8)


@pytest.fixture
def client(url, tmp_path):
    return Client(url, verbose=False, download_files=str(tmp_path))


def generate(client, seed=0, **knobs):
    return client.predict(prompt="What is 12 + 30?", image=None, thinking=False, seed=seed, api_name="/generate",
                          **(FAST | knobs))


def refused(call) -> str:
    with pytest.raises(AppError) as err:
        call()
    return err.value.message


def test_a_seed_that_is_not_a_whole_number_is_refused_not_rounded_to_another_seed(client):
    assert refused(lambda: generate(client, seed=1.5)) == "seed must be a whole number in [0, 2^63), got 1.5"
    assert "Done" in generate(client, seed=2)[STATUS]  # a whole seed still runs


def test_an_inspected_position_outside_the_canvas_is_refused_naming_the_range_and_the_views_stay(client):
    final = generate(client)
    label = final[PICKER]["value"]
    message = refused(lambda: client.predict(label, 1, "argmax", 5000, api_name="/replay"))
    assert message == "position 5000 is outside this canvas's 0–15"
    assert refused(lambda: client.predict(label, 1, "argmax", -1, api_name="/replay")) == \
        "position -1 is outside this canvas's 0–15"
    assert refused(lambda: client.predict(label, 1, "argmax", 2.5, api_name="/replay")) == \
        "position must be a whole number, got 2.5"
    _, _, inspector = client.predict(label, 1, "argmax", 15, api_name="/replay")  # the last cell is still fine
    assert "position <b>15</b>" in inspector


def test_a_pace_or_slow_motion_out_of_range_is_refused_naming_the_value_and_the_bound(client):
    generate_at = lambda pace: client.predict(prompt="What is 12 + 30?", image=None, thinking=False, seed=0,  # noqa: E731
                                              pace_ms=pace, api_name="/generate", **FAST)
    race_at = lambda slow: client.predict(prompt="What is 12 + 30?", thinking=False, seed=0, slow_motion=slow,  # noqa: E731
                                          api_name="/race", **FAST)
    assert refused(lambda: generate_at(99999)) == "Value 99999 is greater than maximum value 2000."
    assert refused(lambda: race_at(500)) == "Value 500 is greater than maximum value 100."
    assert refused(lambda: race_at(0)) == "Value 0 is less than minimum value 1."


def test_the_inspector_names_the_canvas_then_the_step(client):
    final = generate(client)
    _, _, inspector = client.predict(final[PICKER]["value"], 1, "argmax", 3, api_name="/replay")
    assert "canvas 1 · step 1" in re.sub(r"<[^>]+>", "", inspector)
    assert "canvas · step" not in inspector


def test_a_hybrid_run_s_panel_counts_rounds_so_far_without_a_total(client):
    final = client.predict(prompt="What is 12 + 30?", image=None, thinking=False, seed=0, mode="hybrid",
                           api_name="/generate", **FAST)
    label, n = final[PICKER]["value"], final[STEP]["value"]
    panels = [client.predict(label, step, "argmax", 0, api_name="/replay")[1] for step in range(1, n + 1)]
    rounds = [int(m.group(1)) for p in panels for m in [re.search(r"round <b>([^<]*)</b>", p)] if m]
    assert rounds and rounds == sorted(rounds) and rounds[0] == 1  # "round 1", "round 2", … never "2/7"


def test_stop_after_a_finished_run_leaves_its_summary_as_it_is(client):
    final = generate(client)
    assert final[STATUS].startswith("**Done**")
    assert client.predict(api_name="/stop") == {"__type__": "update"}  # no new value: the page keeps "Done: …"


def test_a_file_that_is_not_an_image_is_one_line_naming_the_file_not_the_server_path(client, tmp_path):
    bad = tmp_path / "picture.png"
    bad.write_text("not a picture")
    message = "that file is not an image (picture.png): cannot identify image file"
    with pytest.raises(ValueError) as err:
        open_upload(bad)
    assert str(err.value) == message
    upload = handle_file(str(bad))
    assert refused(lambda: client.predict(prompt="Describe it.", image=upload, thinking=False, seed=0,
                                          api_name="/generate", **FAST)) == message


def test_the_token_budget_slider_ends_where_the_model_s_positions_do(loaded, client):
    sliders = [b for b in build_app(loaded).blocks.values() if getattr(b, "label", None) == "max_new_tokens"]
    text = loaded.model.config.get_text_config()
    assert budget_limit(loaded.model) == (text.max_position_embeddings - 1) // 16 * 16  # whole 16-token canvases
    assert sliders and all(s.maximum == budget_limit(loaded.model) for s in sliders)
    over = budget_limit(loaded.model) + 1
    assert str(over) in refused(lambda: generate(client, max_new_tokens=over))


def test_check_pos_keeps_a_position_inside_the_canvas(diffusion_trace):
    length = len(diffusion_trace.steps[0].argmax)
    assert generate_tab.check_pos(diffusion_trace, length - 1) == length - 1
    with pytest.raises(ValueError, match=f"position {length} is outside this canvas's 0–{length - 1}"):
        generate_tab.check_pos(diffusion_trace, length)
    assert generate_tab.check_pos(Trace(), 5000) == 0  # no run yet: nothing to inspect
    assert generate_tab.check_pos(None, 7) == 0  # no run picked
    with pytest.raises(ValueError, match=f"position -1 is outside this canvas's 0–{length - 1}"):
        generate_tab.check_pos(diffusion_trace, -1)
    for trace in (Trace(), None):  # a negative position is refused with no canvas to name too
        with pytest.raises(ValueError, match="position must be 0 or more, got -1"):
            generate_tab.check_pos(trace, -1)
