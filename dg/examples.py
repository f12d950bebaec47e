"""The app's example prompts and their answer checker: the one reader of assets/examples/examples.json, shared by
the app, the race and the benches.

Rows read [prompt, image file or null, thinking, skill, reference answer(, draft with blanks)] per group: "tiny"
holds held-out draws of the embedded model's skills with their reference answers; "general" holds prompts for the
released model (no reference: the tiny model cannot answer them, and the app says so); "infill" holds drafts with
blanks on skill prompts; "race" holds the Race tab's default. `SkillExamples` finds a run's example and checks its
reply with the skill's own scorer (✓/✗ in the app); `skill_of` says which skill a free prompt asks for. This
module is where the app reaches the tiny model's skills, and the only one: the file is written by
`python -m dg.tiny.examples`.

    python -m pytest tests/tiny/test_examples.py -q
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from dg.prompts import decode_reply
from dg.tiny import skills
from dg.tiny.scope import skill_of

__all__ = ["EXAMPLES_DIR", "ExampleRow", "load_rows", "Check", "SkillExamples", "skill_of"]

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "assets" / "examples"
SKILL_GROUP = "tiny"  # the group whose rows carry a skill and a reference answer
RACE_GROUP = "race"  # the race's default prompt (a skill row too)


class ExampleRow(NamedTuple):
    """One row of examples.json, in the file's order."""

    prompt: str
    image: str | None  # a picture's file name in the examples folder
    thinking: bool
    skill: str | None  # None in the "general" group: prompts for the released model
    answer: str | None  # the skill's reference answer
    draft: str | None = None  # "infill" group: the reply with blanks (dg.drafts), its text pinned


def load_rows(folder: Path = EXAMPLES_DIR) -> dict[str, tuple[ExampleRow, ...]]:
    """examples.json as typed rows per group (the file's "_comment" left out): the one reader of the file."""
    groups = json.loads((Path(folder) / "examples.json").read_text())
    return {name: tuple(ExampleRow(*row) for row in rows) for name, rows in groups.items() if name != "_comment"}


def as_example(row: ExampleRow) -> skills.Example:
    """A "tiny" row back as a scoreable `Example` (no image object: the scorer reads text only)."""
    return skills.Example(row.skill, row.prompt, row.answer, "…" if row.thinking else "", None, target=row.answer)


@dataclass(frozen=True)
class Check:
    """A reply against its example: the reference answer and whether the skill's scorer accepts the reply."""

    reference: str
    correct: bool


@dataclass(frozen=True)
class SkillExamples:
    """The skill group's rows: which example a run's prompt is, and whether its reply is right."""

    rows: tuple[ExampleRow, ...]

    @classmethod
    def load(cls, folder: Path = EXAMPLES_DIR) -> "SkillExamples":
        groups = load_rows(folder)
        return cls(groups.get(SKILL_GROUP, ()) + groups.get(RACE_GROUP, ()))

    def find(self, prompt: str, image=None) -> ExampleRow | None:
        """The example row with this prompt and picture (the picture by file name: the app hands the
        example's file over under its own name), else None."""
        name = os.path.basename(str(image)) if image else None
        return next((row for row in self.rows if row.prompt == (prompt or "").strip() and row.image == name), None)

    def check(self, prompt: str, image, trace, tokenizer) -> Check | None:
        """The finished run's answer (thought stripped) against the example it answers; None when the
        prompt is no skill example."""
        row = self.find(prompt, image)
        if row is None or trace.start is None:
            return None
        answer = decode_reply(tokenizer, trace.token_ids).answer
        return Check(row.answer, skills.score(as_example(row), answer))

    def race_example(self) -> ExampleRow:
        """The race's default: the last sum of three numbers with thinking on (the "race" group's row, where
        diffusion errs at the app's defaults and AR, and so hybrid, is right: diffusion's trace errs more often
        than AR's); a long-answer skill example when the examples hold no such sum."""
        rows = [row for row in reversed(self.rows) if not row.image]
        three = (row for row in rows if row.skill == "arithmetic" and row.thinking and _terms(row.prompt) == 3)
        long = (row for row in rows if row.skill in skills.LONG_SKILLS)
        return next(three, None) or next(long, None) or RACE_FALLBACK


RACE_FALLBACK = ExampleRow("Write a short story about a bear.", None, False, None, None)


def _terms(prompt: str) -> int:
    """How many numbers an addition prompt adds ('Add 55806, 5298 and 3132.' → 3)."""
    return len(re.findall(r"\d+", prompt))
