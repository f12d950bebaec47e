"""The app's skill examples as references: which example a run's prompt is, and whether its reply is right.

Rows of assets/examples/examples.json read [prompt, image file or null, thinking, skill, reference
answer] (written by `python -m dg.tiny.examples`); a "tiny" row becomes a scoreable example through
`dg.tiny.examples.as_example`, and the skill's own scorer (`dg.tiny.skills.score`) says right or wrong.
The "general" group has no references: it is for the released model.

    python -c "from dg.ui.examples import Reference; print(Reference.load().race_prompt())"
"""

import json
import os
from dataclasses import dataclass
from pathlib import Path

from dg.prompts import decode_reply
from dg.tiny.examples import as_example
from dg.tiny.skills import LONG_SKILLS, score

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "assets" / "examples"
SKILL_GROUP = "tiny"  # the group whose rows carry a skill and a reference answer


@dataclass(frozen=True)
class Check:
    """A reply against its example: the reference answer and whether the skill's scorer accepts the reply."""

    reference: str
    correct: bool


@dataclass(frozen=True)
class Reference:
    rows: tuple  # the skill group's rows, as in examples.json

    @classmethod
    def load(cls, folder: Path = EXAMPLES_DIR) -> "Reference":
        groups = json.loads((Path(folder) / "examples.json").read_text())
        return cls(tuple(tuple(row) for row in groups.get(SKILL_GROUP, [])))

    def find(self, prompt: str, image=None) -> tuple | None:
        """The example row with this prompt and picture (the picture by file name: the app hands the
        example's file over under its own name), else None."""
        name = os.path.basename(str(image)) if image else None
        return next((row for row in self.rows if row[0] == (prompt or "").strip() and row[1] == name), None)

    def check(self, prompt: str, image, trace, tokenizer) -> Check | None:
        """The finished run's answer (thought stripped) against the example it answers; None when the
        prompt is no skill example."""
        row = self.find(prompt, image)
        if row is None or trace.start is None:
            return None
        answer = decode_reply(tokenizer, trace.token_ids).answer
        return Check(row[4], score(as_example(list(row)), answer))

    def race_prompt(self, fallback: str = "Write a short story about a bear.") -> str:
        """The first long-answer skill example without a picture: a race diffusion should win (a whole
        canvas of tokens per few steps against one token per forward)."""
        return next((row[0] for row in self.rows if row[3] in LONG_SKILLS and not row[1]), fallback)
