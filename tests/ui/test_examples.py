"""The app's skill examples as references: a run's prompt (and picture) finds its example, the skill's
scorer marks the reply, and the race starts on a long-answer skill."""

from dg.tiny.skills import LONG_SKILLS
from dg.ui.examples import Reference
from tests.view.conftest import _text_trace


def test_a_prompt_finds_its_example_and_a_picture_example_needs_its_picture():
    ref = Reference.load()
    text_row = next(r for r in ref.rows if not r[1])
    picture_row = next(r for r in ref.rows if r[1])
    assert ref.find(text_row[0]) == text_row and ref.find(f"  {text_row[0]} ") == text_row
    assert ref.find(picture_row[0], f"/tmp/gradio/abc/{picture_row[1]}") == picture_row
    assert ref.find(picture_row[0]) is None and ref.find("What is the meaning of life?") is None


def test_the_reference_answer_is_right_and_another_answer_is_wrong(processor):
    ref = Reference.load()
    row = next(r for r in ref.rows if not r[1])
    tok = processor.tokenizer
    right = ref.check(row[0], None, _text_trace(tok, row[4]), tok)
    wrong = ref.check(row[0], None, _text_trace(tok, "no idea"), tok)
    assert right.reference == row[4] and right.correct and not wrong.correct
    assert ref.check("not an example", None, _text_trace(tok, row[4]), tok) is None


def test_the_race_starts_on_a_long_answer_skill_without_a_picture():
    ref = Reference.load()
    row = ref.find(ref.race_prompt())
    assert row is not None and row[3] in LONG_SKILLS and not row[1]
