"""The Generate tab through the real server: slow motion shows every step in order, a skill example's reply
is checked against its reference, its trace file says what produced it, the released model's examples
only appear for another model, and a user's mistake is one line in the server's log."""

import dataclasses
import json
import re
import time
from pathlib import Path

import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from dg.loading import EMBEDDED_MODEL
from dg.ui import generate_tab
from dg.ui.app import build_app
from dg.examples import SkillExamples

FAST = dict(max_denoising_steps=6, max_new_tokens=16)
CANVAS, PANEL, TEXT, STATUS, STEP, INSPECTOR, TRACE_FILE, PICKER = range(8)
RUN_STEP = re.compile(r"run step (\d+) of (\d+)")


@pytest.fixture
def client(url, tmp_path):
    return Client(url, verbose=False, download_files=str(tmp_path))


def test_slow_motion_draws_every_step_in_order_at_the_pace(client):
    start = time.perf_counter()
    job = client.submit(prompt="What is 12 + 30?", image=None, thinking=False, seed=0, pace_ms=150,
                        api_name="/generate", **FAST)
    final = job.result(timeout=120)
    elapsed = time.perf_counter() - start
    shown = [int(m.group(1)) for out in job.outputs()[:-1] if isinstance(out[CANVAS], list)
             for m in [RUN_STEP.search("".join(out[CANVAS]))] if m]
    n = final[STEP]["value"]
    assert shown == sorted(shown) and set(range(1, n)) <= set(shown)  # no step skipped, none out of order
    assert elapsed >= 0.15 * (n - 1)  # the pace held, though the sampler alone takes milliseconds
    assert any("slow motion" in out[STATUS] for out in job.outputs()[:-1] if isinstance(out[STATUS], str))
    assert final[STATUS].startswith("**Done**")


def test_stop_ends_slow_motion_at_once(client):
    many_steps = dict(max_denoising_steps=20, max_new_tokens=16, confidence_threshold=0.0001)  # to the step cap
    start = time.perf_counter()
    job = client.submit(prompt="What is 12 + 30?", image=None, thinking=False, seed=0, pace_ms=500,
                        api_name="/generate", **many_steps)
    while len(job.outputs()) < 3 and not job.done():
        time.sleep(0.05)
    time.sleep(max(0.0, start + 2.0 - time.perf_counter()))  # the sampler's 20 steps take well under 2 s here
    assert client.predict(api_name="/stop").startswith("Stopping")
    final = job.result(timeout=60)
    assert time.perf_counter() - start < 0.5 * 19 / 2  # far less than the whole slow motion
    assert final[STATUS].startswith(("**Done**", "**Stopped**")) and final[STEP]["value"] == 20


def test_a_skill_example_is_checked_against_its_reference_and_its_trace_says_what_produced_it(client):
    row = next(r for r in SkillExamples.load().rows if not r[1])
    final = client.predict(prompt=row[0], image=None, thinking=row[2], seed=3, api_name="/generate", **FAST)
    assert "reference answer" in final[TEXT] and re.search("[✓✗]", final[TEXT])
    run = json.loads(Path(final[TRACE_FILE]).read_text())["run"]
    assert run["prompt"] == row[0] and run["seed"] == 3 and run["thinking"] == row[2] and run["model"]
    assert run["max_denoising_steps"] == 6
    other = client.predict(prompt="Say hi.", image=None, thinking=False, seed=3, api_name="/generate", **FAST)
    assert "reference answer" not in other[TEXT]


def test_learn_says_there_is_nothing_to_export_before_a_run(client):
    message, *files = client.predict(None, api_name="/export")
    assert message.startswith("Nothing to export yet") and files == [None, None, None]


@pytest.mark.parametrize("bad, message", [(dict(prompt="  "), "prompt is empty"),  # dg's check
                                          (dict(entropy_bound=-0.5), "less than minimum")])  # Gradio's own
def test_a_refused_input_is_one_line_in_the_server_log(client, capfd, caplog, bad, message):
    capfd.readouterr()
    with caplog.at_level("WARNING", logger="dg.ui"):
        with pytest.raises(AppError, match=message):
            client.predict(**(dict(prompt="hi", image=None, thinking=False, seed=0) | FAST | bad), api_name="/generate")
    logged = [r.getMessage() for r in caplog.records if r.name == "dg.ui"]
    assert len(logged) == 1 and message in logged[0] and "\n" not in logged[0]
    assert "Traceback" not in capfd.readouterr().err


def labels(demo) -> list[str]:
    return [str(getattr(block, "label", "")) for block in demo.blocks.values()]


def test_the_released_models_examples_show_and_on_the_embedded_model_say_its_reply_has_no_meaning(loaded):
    assert not loaded.embedded
    assert any(label == "General (for the released model)" for label in labels(build_app(loaded)))
    embedded = dataclasses.replace(loaded, source=str(EMBEDDED_MODEL))
    assert embedded.embedded
    assert any("released model" in label and "no meaning" in label for label in labels(build_app(embedded)))


def test_hybrid_mode_colours_each_verify_round_and_its_replay_and_plots_follow_it(client):
    job = client.submit(prompt="What is 12 + 30?", image=None, thinking=False, seed=0, mode="hybrid", pace_ms=50,
                        api_name="/generate", **FAST)
    final = job.result(timeout=120)
    frames = ["".join(out[CANVAS]) for out in job.outputs()[:-1] if isinstance(out[CANVAS], list)]
    shown = [int(m.group(1)) for m in map(RUN_STEP.search, frames) if m]
    assert shown == sorted(shown) and any("verify round" in f for f in frames)  # slow motion, round by round
    assert final[STATUS].startswith("**Done**") and "verify round" in final[STATUS]
    assert re.search(r'dg-cell dg-(agreed|bonus|rejected)', "".join(final[CANVAS]))
    assert "verify round" in final[PANEL]
    label = final[PICKER]["value"]
    replayed = client.predict(label, 1, "argmax", 0, api_name="/replay")  # run step 1 of the hybrid run
    assert "run step 1 of" in "".join(replayed[0]) and "dg-cell dg-verified" in "".join(replayed[0])
    *_, per_round = client.predict(label, api_name="/plots")
    assert "Tokens per verify round" in json.dumps(per_round)
    run = json.loads(Path(final[TRACE_FILE]).read_text())
    assert run["run"]["mode"] == "hybrid" and [r["kind"] for r in run["records"]].count("round") > 0


def test_ar_mode_streams_one_token_per_forward_and_its_run_replays_without_an_error(client):
    job = client.submit(prompt="What is 12 + 30?", image=None, thinking=False, seed=0, mode="AR", pace_ms=100,
                        api_name="/generate", **FAST)
    final = job.result(timeout=120)
    assert not any("slow motion" in out[STATUS] for out in job.outputs() if isinstance(out[STATUS], str))  # no steps
    assert final[STATUS].startswith("**Done**") and "AR, one per forward" in final[STATUS]
    assert "AR ·" in "".join(final[CANVAS]) and "AR token" in final[PANEL]
    label = final[PICKER]["value"]
    assert client.predict(label, 1, "argmax", 0, api_name="/replay")  # no steps to replay: the views stay
    assert all(client.predict(label, api_name="/plots"))


def test_a_reply_of_the_embedded_model_outside_its_skills_gets_the_note_and_a_skill_prompt_or_another_model_not(
        diffusion_trace, loaded):
    from dg.ui.kept import History

    def text(prompt, source):
        kept = History().keep(prompt, diffusion_trace, meta={"image": None}).run(None)
        runner = dataclasses.replace(loaded, source=source)
        return generate_tab.text_and_check(kept, runner, SkillExamples.load())

    assert "no meaning" in text("Why is the sky blue?", str(EMBEDDED_MODEL))
    assert "no meaning" not in text("Compute 2487 + 3356.", str(EMBEDDED_MODEL))  # a sum of its own: a skill
    assert "no meaning" not in text("Why is the sky blue?", "google/diffusiongemma-26B-A4B-it")


def test_the_run_picker_has_one_listener_to_its_change_that_answers_every_view_that_follows_it(loaded):
    # Gradio's page says a held-back `change` again to every listener of a component once one of them ends: two
    # or more server listeners on one trigger re-send each other forever, and the session's replies queue behind
    config = build_app(loaded).get_config_file()
    listeners = {}
    for dep in config["dependencies"]:
        if dep["backend_fn"] and dep["trigger_mode"] == "always_last":
            for target in dep["targets"]:
                listeners.setdefault(tuple(target), []).append(dep["api_name"])
    assert {t: names for t, names in listeners.items() if len(names) > 1} == {}
    picker = next(c["id"] for c in config["components"] if c["props"].get("elem_id") == "dg-run-picker")
    assert len(listeners[(picker, "change")]) == 1


def test_picks_gives_each_view_its_own_inputs_and_leaves_a_skipped_view_as_it_is():
    import gradio as gr

    from dg.ui.common import Picks

    with gr.Blocks() as demo:
        picks, lone = Picks(gr.Dropdown(["a", "b"])), Picks(gr.Dropdown(["a", "b"]))
        note, title, body, other = gr.Textbox(), gr.Markdown(), gr.HTML(), gr.Markdown()
        picks.follow(lambda label, shown: f"{label} (was {shown})", [picks.picker, note], [title])
        picks.follow(lambda label: (f"body of {label}", label), [picks.picker], [body, other])
        picks.follow(lambda note: gr.skip(), [note], [gr.Textbox(), gr.Textbox()])
        lone.follow(lambda label: gr.skip(), [lone.picker], [gr.Textbox(), gr.Textbox()])
        picks.wire()
        lone.wire()
    listener, alone = [f for f in demo.fns.values() if f.name == "on_pick"]
    assert [c._id for c in listener.inputs] == [picks.picker._id, note._id]  # each input once
    assert listener.fn("b", "x") == {title: "b (was x)", body: "body of b", other: "b"}
    assert alone.fn("b") == gr.skip()  # every view skipped: one skip for all (Gradio errs on an empty dict)
    with pytest.raises(AssertionError, match="fill one component"):
        picks.follow(lambda label: label, [picks.picker], [title])
