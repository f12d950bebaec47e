"""The app's infill examples (examples.json "infill", dg/tiny/examples.py) on the embedded model: drafts in
dg.drafts' syntax, sized in its own tokens, that show what the model does around pinned text; and the prompts
outside its five skills (dg/tiny/scope.py), which the app marks."""

import json

import pytest
import torch

from dg.drafts import build_draft
from dg.loading import EMBEDDED_MODEL, load
from dg.prompts import build_inputs, decode_reply
from dg.sampler import generate_diffusion
from dg.tiny import examples, skills
from dg.examples import SkillExamples, as_example, load_rows
from dg.tiny.scope import skill_of

APP_SEED = 0  # the app's default seed
ROWS = {row.skill: row for row in load_rows()["infill"]}


@pytest.fixture(scope="module")
def loaded():
    torch.set_num_threads(1)
    return load(EMBEDDED_MODEL)


def infill(loaded, row):
    """The row's draft run as the app runs it: the checkpoint's settings, blanks drawn from the app's seed."""
    config = loaded.sampler_config
    draft = build_draft(loaded.tokenizer, row.draft, canvas_length=loaded.model.config.canvas_length,
                        max_new_tokens=config.max_new_tokens, vocab_size=loaded.model.config.text_config.vocab_size,
                        eos_token_id=loaded.eos_token_ids[0], pad_token_id=loaded.pad_token_id,
                        generator=torch.Generator().manual_seed(APP_SEED))
    torch.manual_seed(APP_SEED)
    trace = generate_diffusion(loaded.model, build_inputs(loaded.processor, row.prompt, thinking=row.thinking),
                               config, draft=draft)
    return decode_reply(loaded.tokenizer, trace.token_ids).answer


def test_the_shipped_infill_rows_are_what_the_writer_makes_on_skill_prompts_with_reference_answers(loaded):
    assert [list(r) for r in examples.infill_rows(loaded.tokenizer)] == [list(r) for r in load_rows()["infill"]]
    assert set(ROWS) == {"story", "json", "sudoku"}
    for row in ROWS.values():
        assert SkillExamples.load().find(row.prompt) is not None and "{{" in row.draft


def test_the_story_s_blanked_middle_is_written_to_fit_the_sentence_after_it(loaded):
    row = ROWS["story"]
    assert infill(loaded, row) == row.answer  # the reference story: its middle sentence, exactly


def test_a_json_value_pinned_against_the_prompt_stays_and_the_fields_around_it_follow_the_prompt(loaded):
    row = ROWS["json"]
    record, reference = json.loads(infill(loaded, row)), json.loads(row.answer)
    pinned = json.loads("{" + row.draft.split("}}", 1)[1].split("{{")[0] + "}")
    assert record["city"] == pinned["city"] != reference["city"]
    assert {k: v for k, v in record.items() if k != "city"} == {k: v for k, v in reference.items() if k != "city"}


def test_a_sudoku_with_some_answer_cells_pinned_is_solved(loaded):
    row = ROWS["sudoku"]
    assert skills.score(as_example(row), infill(loaded, row))


def test_prompts_outside_the_five_skills_are_told_apart_from_every_skill_s_prompts():
    for row in load_rows()["tiny"]:
        assert skill_of(row.prompt, bool(row.image)) == row.skill
    for ex in skills.sample_examples(1, 100):
        assert skill_of(ex.prompt, ex.image is not None) == ex.skill
    for row in load_rows()["general"]:
        assert skill_of(row.prompt) is None
    assert skill_of("Why is the sky blue?") is None and skill_of("Describe the picture.") is None
