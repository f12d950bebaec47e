"""Writes the app's example prompts for the embedded model (examples.json, read by dg.examples), drawn from the
skills with their reference answers.

Each shipped example is a held-out draw of a skill generator (seeds far from training's), so its
reference answer is the skill's own; pictures are saved next to `examples.json`. The "infill" group holds
drafts with blanks on skill prompts (a story's middle, a pinned JSON value, sudoku cells); the "race" group
holds the Race tab's default, a sum of three numbers found by running the model (`race_row`): the first
held-out draw that diffusion gets wrong at the app's defaults and seed while greedy AR (and so hybrid
decoding) gets it right; the "general" group (prompts for the released model) is kept as it is.

    python -m dg.tiny.examples --out assets/examples   # rewrite the "tiny", "infill" and "race" groups, the pictures
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

from dg.examples import EXAMPLES_DIR, ExampleRow
from dg.prompts import decode_reply
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
    ExampleRow("Explain in three sentences how a diffusion language model writes text.", None, False, None, None),
    ExampleRow("Write a Python function that checks whether a number is prime.", None, False, None, None),
    ExampleRow("A train leaves at 14:05 and arrives at 17:40. How long is the trip?", None, True, None, None),
)


# Infill on the embedded model (dg.drafts' blanks, sized in the model's own tokens): bidirectionality shows as
# text the model writes to fit what comes after it. (example index in CHOSEN, how its reply is blanked)
INFILL = ((11, "story middle"), (9, "json pinned city"), (0, "sudoku pinned cells"))
SUDOKU_PINS = 3  # solution cells pinned where the puzzle is blank


def infill_rows(tokenizer, chosen: list[skills.Example] | None = None) -> list[ExampleRow]:
    """The infill examples: a story with its middle sentence blanked; a JSON record with its city pinned to one
    the prompt does not say (every other field free); a sudoku answer with a few of its cells pinned."""
    chosen = chosen or chosen_examples()
    size = lambda text: len(tokenizer.encode(text, add_special_tokens=False))  # noqa: E731
    rows = []
    for index, how in INFILL:
        ex = chosen[index]
        if how == "story middle":
            first, middle, last = (part.strip() + "." for part in ex.answer.split(".")[:3])
            draft = f"{first}{{{{{size(' ' + middle)}}}}} {last}"
        elif how == "json pinned city":
            other = next(city for city in skills.CITIES if city not in ex.prompt)
            head = ex.answer[:ex.answer.index('"city"')]
            draft = f'{{{{{size(head)}}}}}"city": "{other}"{{{{...}}}}'
        else:
            puzzle = ex.prompt.rsplit(" ", 1)[-1]
            pins = [i for i, ch in enumerate(puzzle) if ch == "."][::2][:SUDOKU_PINS]  # spread over the rows
            draft = "".join(ch if i in pins or ch == "/" else "{{1}}" for i, ch in enumerate(ex.answer))
            draft = _merged_blanks(draft)
        rows.append(ExampleRow(ex.prompt, None, bool(ex.thought), ex.skill, ex.answer, draft))
    return rows


def _merged_blanks(draft: str) -> str:
    """Runs of one-token blanks as one blank: '{{1}}{{1}}' → '{{2}}'."""
    return re.sub(r"(?:\{\{1\}\})+", lambda m: f"{{{{{len(m.group(0)) // len('{{1}}')}}}}}", draft)


def chosen_examples() -> list[skills.Example]:
    """The shipped examples, in order; deterministic."""
    return [_draw(*entry) for entry in CHOSEN]


def _draw(skill: str, draw: int, thinking: bool, terms: int | None = None) -> skills.Example:
    add_terms = None if terms is None else (terms,)
    return skills.make_example(skill, random.Random(EXAMPLE_SEED_BASE + draw), thinking=thinking,
                               add_terms=add_terms)


def _embedded_model():
    from dg.loading import EMBEDDED_MODEL, load  # the model's own tokens size the blanks; it runs the race's search

    return load(EMBEDDED_MODEL)


RACE_SEED = 0  # the app's default seed (Generate's, which the race takes)
RACE_DRAWS = 200  # three-term draws tried, from the first


def race_row(loaded, draws: int = RACE_DRAWS) -> ExampleRow:
    """The first held-out sum of three numbers (thinking on) whose diffusion run at the model's default sampler
    settings and seed RACE_SEED answers wrong while greedy AR answers right: the race where hybrid decoding
    gives AR's answer at about diffusion's speed. A ValueError when none of `draws` is such a sum."""
    import torch

    eos = loaded.model.generation_config.eos_token_id
    eos = eos if isinstance(eos, list) else [eos]
    right = lambda ex, trace: skills.score(ex, decode_reply(loaded.tokenizer, trace.token_ids).answer)  # noqa: E731
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the app runs on 2 cores (dg.devices.share_cpu): the same float sums
    try:
        return _first_race(loaded, draws, eos, right)
    finally:
        torch.set_num_threads(threads)


def _first_race(loaded, draws: int, eos: list, right) -> ExampleRow:
    import torch

    from dg.ar import generate_ar
    from dg.prompts import build_inputs
    from dg.sampler import generate_diffusion

    for draw in range(draws):
        ex = _draw("arithmetic", draw, True, 3)
        inputs = build_inputs(loaded.processor, ex.prompt, thinking=True)
        torch.manual_seed(RACE_SEED)
        if right(ex, generate_diffusion(loaded.model, inputs, loaded.sampler_config)):
            continue
        if right(ex, generate_ar(loaded.model, inputs, loaded.sampler_config, eos_token_ids=eos)):
            return ExampleRow(ex.prompt, None, True, ex.skill, ex.answer)
    raise ValueError(f"none of the first {draws} three-term draws is right by AR and wrong by diffusion")


def write(out: Path) -> dict:
    """Write the pictures and examples.json (keeping its "general" group) into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    embedded = _embedded_model()
    rows, pictures = [], 0
    for ex in chosen_examples():
        image = None
        if ex.image is not None:
            pictures += 1
            image = f"picture-{pictures}.png"
            ex.image.save(out / image)
        rows.append(ExampleRow(ex.prompt, image, bool(ex.thought), ex.skill, ex.answer)[:5])
    groups = {
        "_comment": ("Examples of the app: [prompt, image file in this folder or null, thinking, skill, "
                     "reference answer(, draft with blanks)]. 'tiny', 'infill' and 'race' are written by `python -m "
                     "dg.tiny.examples` (held-out draws of dg/tiny/skills.py; infill drafts in dg.drafts' syntax; "
                     "race: the first three-term sum diffusion errs on at seed 0 and AR answers right); "
                     "'general' needs the released model."),
        "tiny": rows,
        "infill": infill_rows(embedded.tokenizer),
        "race": [race_row(embedded)[:5]],
        "general": [row[:5] for row in GENERAL],
    }
    (out / "examples.json").write_text(json.dumps(groups, indent=2, ensure_ascii=False) + "\n")
    return groups


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=EXAMPLES_DIR)
    args = parser.parse_args()
    groups = write(args.out)
    for prompt, _, _, skill, answer, *draft in groups["tiny"] + groups["infill"] + groups["race"]:
        print(f"{skill:>10}  {prompt}  →  {draft[0] + '  →  ' if draft else ''}{answer}")


if __name__ == "__main__":
    main()
