"""The app's examples: held-out skill draws that the embedded model answers right with the app's defaults; a
run's prompt (and picture) finds its example, the skill's scorer marks the reply, the race starts on a long answer."""

import re

import pytest
import torch

from dg.loading import EMBEDDED_MODEL, load
from dg.prompts import build_inputs, decode_reply, open_image
from dg.sampler import generate_diffusion
from dg.tiny import examples, skills
from dg.examples import EXAMPLES_DIR, SkillExamples, _terms
from dg import examples as reader
from tests.view.conftest import _text_trace

APP_SEED = 0  # the Generate view's default seed
ROWS = list(reader.load_rows()["tiny"])
# Skills whose shipped examples the embedded model answers wrong in diffusion mode (its model card
# would say so): strict, so the day the model gets them right this list must shrink.
KNOWN_WRONG: set[str] = set()


def cases():
    for i, row in enumerate(ROWS):
        marks = [pytest.mark.xfail(strict=True, reason="the model card's limitations")] if row[3] in KNOWN_WRONG else []
        yield pytest.param(row, id=f"{row[3]}-{i}", marks=marks)


@pytest.fixture(scope="module")
def loaded():
    torch.set_num_threads(1)
    return load(EMBEDDED_MODEL)


def run_with_app_defaults(loaded, prompt, thinking, picture=None):
    """The Generate view's run of `prompt`: the checkpoint's sampler settings and the default seed."""
    inputs = build_inputs(loaded.processor, prompt, images=picture, thinking=thinking)
    torch.manual_seed(APP_SEED)
    return generate_diffusion(loaded.model, inputs, loaded.sampler_config)


def test_the_shipped_examples_are_what_the_generator_writes():
    rows = [reader.ExampleRow(ex.prompt, row.image, bool(ex.thought), ex.skill, ex.answer)
            for ex, row in zip(examples.chosen_examples(), ROWS)]
    assert rows == ROWS and len(ROWS) == len(examples.CHOSEN)
    assert set(row[3] for row in ROWS) == set(skills.SKILLS)
    assert all((EXAMPLES_DIR / row[1]).exists() for row in ROWS if row[1])


@pytest.mark.parametrize("row", list(cases()))
def test_every_example_gives_its_reference_answer_with_the_app_defaults(loaded, row):
    prompt, image, thinking, skill, answer = row[:5]
    picture = open_image(EXAMPLES_DIR / image) if image else None
    trace = run_with_app_defaults(loaded, prompt, thinking, picture)
    reply = decode_reply(loaded.tokenizer, trace.token_ids)
    assert skills.score(reader.as_example(row), reply.answer), (reply.thought, reply.answer, answer)
    assert reply.thinking == thinking


def test_a_thinking_example_spans_two_canvases_so_block_wise_commits_show(loaded):
    row = next(r for r in ROWS if r[2])
    assert len(run_with_app_defaults(loaded, row[0], thinking=True).canvases) == 2


def test_the_three_term_example_is_right_only_with_its_trace(loaded):
    row = next(r for r in ROWS if r[3] == "arithmetic" and len(re.findall(r"\d+", r[0])) == 3)
    traces = {thinking: run_with_app_defaults(loaded, row[0], thinking) for thinking in (True, False)}
    answers = {thinking: decode_reply(loaded.tokenizer, trace.token_ids).answer for thinking, trace in traces.items()}
    example = reader.as_example(row)
    assert skills.score(example, answers[True]) and not skills.score(example, answers[False]), answers



def test_a_prompt_finds_its_example_and_a_picture_example_needs_its_picture():
    ref = SkillExamples.load()
    text_row = next(r for r in ref.rows if not r[1])
    picture_row = next(r for r in ref.rows if r[1])
    assert ref.find(text_row[0]) == text_row and ref.find(f"  {text_row[0]} ") == text_row
    assert ref.find(picture_row[0], f"/tmp/gradio/abc/{picture_row[1]}") == picture_row
    assert ref.find(picture_row[0]) is None and ref.find("What is the meaning of life?") is None


def test_the_reference_answer_is_right_and_another_answer_is_wrong(processor):
    ref = SkillExamples.load()
    row = next(r for r in ref.rows if not r[1])
    tok = processor.tokenizer
    right = ref.check(row[0], None, _text_trace(tok, row[4]), tok)
    wrong = ref.check(row[0], None, _text_trace(tok, "no idea"), tok)
    assert right.reference == row[4] and right.correct and not wrong.correct
    assert ref.check("not an example", None, _text_trace(tok, row[4]), tok) is None


def test_the_race_starts_on_a_sum_of_three_numbers_with_thinking_on():
    ref = SkillExamples.load()
    row = ref.race_example()
    assert ref.find(ref.race_example().prompt) == row and row.skill == "arithmetic" and row.thinking and not row.image
    assert row == ref.rows[-1] and _terms(row.prompt) == 3


def test_the_race_s_sum_is_the_first_draw_diffusion_gets_wrong_and_ar_right(loaded):
    from dg.tiny.examples import race_row

    assert race_row(loaded) == SkillExamples.load().race_example()  # the search finds the shipped row again
