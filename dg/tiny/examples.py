"""The app's example prompts for the embedded model, drawn from the skills with their reference answers.

Each shipped example is a held-out draw of a skill generator (seeds far from training's), so its
reference answer is the skill's own; pictures are saved next to `examples.json`. Rows read
[prompt, image file or null, thinking, skill, reference answer]; the "general" group holds prompts for
the released model (no reference: the tiny model cannot answer them, and the app says so).

    python -m dg.tiny.examples --out assets/examples     # rewrite the "tiny" group and its pictures
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from dg.tiny import skills

EXAMPLE_SEED_BASE = 900_000  # held out: training draws seeds >= 1000 in a stream far below this
# (skill, draw, thinking[, terms]): every skill and every picture question, held-out draws (with the app's
# defaults the shipped model answers the first 20 draws of every skill right but one of the 20 additions,
# draw 6; its accuracy on fresh draws is the model card's); the first arithmetic trace (two 5-digit
# numbers) spans two canvases, so block-wise commits show; the second (two 3-digit numbers) fits one. The
# third adds three numbers, where the trace is what gets the sum right: picked among draws the model
# answers right with thinking on and wrong with it off (on fresh three-term draws it is right about three
# times in four with the trace and seldom without; the model card has the figures).
CHOSEN = (
    ("sudoku", 0, False), ("sudoku", 1, False),
    ("arithmetic", 1, True), ("arithmetic", 4, True), ("arithmetic", 17, True, 3),
    ("picture", 2, False), ("picture", 18, False), ("picture", 0, False), ("picture", 7, False),
    ("json", 0, False), ("json", 1, False),
    ("story", 0, False), ("story", 2, False), ("story", 13, False),
)
GENERAL = (
    ["Explain in three sentences how a diffusion language model writes text.", None, False, None, None],
    ["Write a Python function that checks whether a number is prime.", None, False, None, None],
    ["A train leaves at 14:05 and arrives at 17:40. How long is the trip?", None, True, None, None],
)


def chosen_examples() -> list[skills.Example]:
    """The shipped examples, in order; deterministic."""
    return [_draw(*entry) for entry in CHOSEN]


def _draw(skill: str, draw: int, thinking: bool, terms: int | None = None) -> skills.Example:
    add_terms = None if terms is None else (terms,)
    return skills.make_example(skill, random.Random(EXAMPLE_SEED_BASE + draw), thinking=thinking,
                               add_terms=add_terms)


def as_example(row: list) -> skills.Example:
    """A "tiny" row back as a scoreable `Example` (no image object: the scorer reads text only)."""
    prompt, _image, thinking, skill, answer = row
    return skills.Example(skill, prompt, answer, "…" if thinking else "", None, target=answer)


def write(out: Path) -> dict:
    """Write the pictures and examples.json (keeping its "general" group) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    rows, pictures = [], 0
    for ex in chosen_examples():
        image = None
        if ex.image is not None:
            pictures += 1
            image = f"picture-{pictures}.png"
            ex.image.save(out / image)
        rows.append([ex.prompt, image, bool(ex.thought), ex.skill, ex.answer])
    groups = {
        "_comment": ("Examples of the app: [prompt, image file in this folder or null, thinking, skill, "
                     "reference answer]. 'tiny' is written by `python -m dg.tiny.examples` (held-out draws "
                     "of dg/tiny/skills.py); 'general' needs the released model."),
        "tiny": rows,
        "general": [list(r) for r in GENERAL],
    }
    (out / "examples.json").write_text(json.dumps(groups, indent=2, ensure_ascii=False) + "\n")
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "assets" / "examples")
    args = parser.parse_args()
    groups = write(args.out)
    for row in groups["tiny"]:
        print(f"{row[3]:>10}  {row[0]}  →  {row[4]}")


if __name__ == "__main__":
    main()
