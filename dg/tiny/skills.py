"""Synthetic skill suite for the embedded tiny DiffusionGemma: generators, references and scorers.

Five skills, each chosen to show one thing about diffusion decoding:
- sudoku:     4×4 grid, 4–8 blanks, unique solution: bidirectional refinement fills cells in any order.
- arithmetic: 2–3 digit addition; thinking mode writes a column-by-column carry trace first,
              the case where thinking visibly helps.
- picture:    1–4 coloured shapes drawn with PIL, one question about them (image → encoder only).
- json:       a sentence → a JSON record; long, fully determined answer that settles in 2–3 steps.
- story:      one templated sentence about a named animal; fluent text, deterministic in the prompt.

Every answer is a function of the prompt (and image), so a tiny model can reach ≥ 90 % accuracy,
and every answer + thought stays within about two 64-token canvases.
`Example.thought` is non-empty exactly when the example is in thinking mode.

Preview: `python -m dg.tiny.skills --seed 0 --n 5` (add `--save-images DIR` to write the pictures).
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from dg.tiny import pictures

SKILLS: tuple[str, ...] = ("sudoku", "arithmetic", "picture", "json", "story")
THINKING_SKILLS: tuple[str, ...] = ("sudoku", "arithmetic")  # skills with a reasoning trace
THINKING_P = 0.5  # share of thinking-mode examples in `sample_examples`, per supporting skill

NAMES = ("Alice", "Bob", "Clara", "David", "Emma", "Felix", "Grace", "Hugo",
         "Ivy", "Jack", "Lena", "Max", "Nora", "Oscar", "Rosa", "Tom")
CITIES = ("Paris", "London", "Berlin", "Madrid", "Rome", "Tokyo",
          "Cairo", "Oslo", "Lima", "Dublin", "Vienna", "Prague")
JOBS = ("baker", "teacher", "doctor", "pilot", "farmer", "nurse", "painter", "chef", "driver", "writer")
PETS = ("cat", "dog", "fish", "parrot", "rabbit", "hamster", "turtle", "horse")
ANIMALS = ("cat", "dog", "fox", "owl", "bear", "rabbit", "mouse", "duck", "horse", "frog")
FOODS = ("fish", "apples", "carrots", "cheese", "berries", "bread", "honey", "cake", "nuts", "corn")


@dataclass(frozen=True)
class Example:
    skill: str
    prompt: str  # the user's text (for "picture", a question about the image)
    answer: str  # the final answer the model should write, without special tokens
    thought: str  # reasoning trace for thinking mode; "" when not thinking or the skill has none
    image: Image.Image | None  # only for "picture"
    target: str  # canonical answer used by `score`


# --- sudoku -----------------------------------------------------------------------------------

_SUDOKU_BASE = ((1, 2, 3, 4), (3, 4, 1, 2), (2, 1, 4, 3), (4, 3, 2, 1))
_SUDOKU_BLANKS = (4, 8)


def _peers(cell: int) -> set[int]:
    r, c = divmod(cell, 4)
    box = {(r // 2 * 2 + i) * 4 + c // 2 * 2 + j for i in range(2) for j in range(2)}
    return ({r * 4 + j for j in range(4)} | {i * 4 + c for i in range(4)} | box) - {cell}


_PEERS = tuple(_peers(i) for i in range(16))


def sudoku_candidates(grid: list[int | None], cell: int) -> set[int]:
    return {1, 2, 3, 4} - {grid[p] for p in _PEERS[cell]}


def count_solutions(grid: list[int | None], limit: int = 2) -> int:
    """Backtracking count of completions of a 16-cell grid (None = blank), stopping at `limit`."""
    if None not in grid:
        return 1
    cell = grid.index(None)
    total = 0
    for d in sudoku_candidates(grid, cell):
        total += count_solutions(grid[:cell] + [d] + grid[cell + 1:], limit - total)
        if total >= limit:
            break
    return total


def _singles_order(grid: list[int | None]) -> list[int] | None:
    """Cells in the order naked singles fill them (first forced cell in reading order), or None if stuck."""
    grid, order = list(grid), []
    while None in grid:
        cell = next((i for i in range(16) if grid[i] is None and len(sudoku_candidates(grid, i)) == 1), None)
        if cell is None:
            return None
        (grid[cell],) = sudoku_candidates(grid, cell)
        order.append(cell)
    return order


def _solved_grid(rng: random.Random) -> list[int]:
    """A random valid 4×4 grid: digit relabelling, row/column swaps within bands, band swaps, transpose."""
    digits = rng.sample(range(1, 5), 4)
    rows = [b * 2 + i for b in rng.sample((0, 1), 2) for i in rng.sample((0, 1), 2)]
    cols = [b * 2 + i for b in rng.sample((0, 1), 2) for i in rng.sample((0, 1), 2)]
    grid = [[digits[_SUDOKU_BASE[r][c] - 1] for c in cols] for r in rows]
    if rng.random() < 0.5:
        grid = [list(col) for col in zip(*grid)]
    return [d for row in grid for d in row]


def sudoku_text(grid: list[int | None]) -> str:
    """'12.4/3..2/2.43/4321': rows joined by '/', blanks as '.'."""
    cells = "".join("." if d is None else str(d) for d in grid)
    return "/".join(cells[i:i + 4] for i in range(0, 16, 4))


def _sudoku(rng: random.Random, thinking: bool) -> tuple[str, str, str]:
    solution = _solved_grid(rng)
    k = rng.randint(*_SUDOKU_BLANKS)
    puzzle: list[int | None] = list(solution)
    for cell in rng.sample(range(16), 16):
        if puzzle.count(None) == k:
            break
        puzzle[cell] = None
        if _singles_order(puzzle) is None:  # solvable by singles ⇒ unique; also makes the trace honest
            puzzle[cell] = solution[cell]
    order = _singles_order(puzzle)
    thought = "; ".join(f"r{c // 4 + 1}c{c % 4 + 1}={solution[c]}" for c in order) if thinking else ""
    return f"Solve the sudoku: {sudoku_text(puzzle)}", sudoku_text(solution), thought


# --- arithmetic -------------------------------------------------------------------------------

_ADD_TEMPLATES = ("What is {a} + {b}?", "Compute {a} + {b}.", "Add {a} and {b}.")


def addition_trace(a: int, b: int) -> str:
    """'7+6=13 write 3 carry 1; 8+5+1=14 write 4 carry 1; 4+3+1=8 write 8; answer 843'."""
    da, db = str(a)[::-1], str(b)[::-1]
    steps, carry = [], 0
    for i in range(max(len(da), len(db))):
        x, y = int(da[i]) if i < len(da) else 0, int(db[i]) if i < len(db) else 0
        total = x + y + carry
        step = f"{x}+{y}" + (f"+{carry}" if carry else "") + f"={total} write {total % 10}"
        carry = total // 10
        steps.append(step + (" carry 1" if carry else ""))
    if carry:
        steps.append("write 1")
    return "; ".join(steps) + f"; answer {a + b}"


def _arithmetic(rng: random.Random, thinking: bool) -> tuple[str, str, str]:
    a, b = rng.randint(10, 999), rng.randint(10, 999)
    prompt = rng.choice(_ADD_TEMPLATES).format(a=a, b=b)
    return prompt, str(a + b), addition_trace(a, b) if thinking else ""


# --- json -------------------------------------------------------------------------------------

_JSON_CLAUSES = {  # field → phrasings of "<name> ..."
    "age": ("is {} years old", "is {}"),
    "city": ("lives in {}", "is from {}"),
    "job": ("works as a {}", "is a {}"),
    "pet": ("has a {}", "owns a {}"),
}
_JSON_PROMPTS = ("Convert to JSON: {}", "Extract the fields as JSON: {}")


def _json(rng: random.Random) -> tuple[str, str]:
    fields = sorted(rng.sample(list(_JSON_CLAUSES), rng.randint(1, 3)), key=list(_JSON_CLAUSES).index)
    record: dict[str, object] = {"name": rng.choice(NAMES)}
    pools = {"age": range(18, 90), "city": CITIES, "job": JOBS, "pet": PETS}
    for f in fields:
        record[f] = rng.choice(pools[f])
    clauses = [rng.choice(_JSON_CLAUSES[f]).format(record[f]) for f in fields]
    said = clauses[0] if len(clauses) == 1 else ", ".join(clauses[:-1]) + " and " + clauses[-1]
    prompt = rng.choice(_JSON_PROMPTS).format(f"{record['name']} {said}.")
    return prompt, json.dumps(record)


# --- story ------------------------------------------------------------------------------------

_STORY_TEMPLATES = (  # (prompt, answer): the prompt template fixes the answer template
    ("Write one sentence about a {animal} named {name} who likes {food}.",
     "{name} the {animal} loves to eat {food} every day."),
    ("Tell a short story about {name} the {animal} and some {food}.",
     "{name} the {animal} found some {food} and was happy all day."),
    ("Write a sentence where {name} the {animal} eats {food}.",
     "One morning, {name} the {animal} ate {food} in the garden."),
)


def _story(rng: random.Random) -> tuple[str, str]:
    prompt, answer = rng.choice(_STORY_TEMPLATES)
    slots = {"name": rng.choice(NAMES), "animal": rng.choice(ANIMALS), "food": rng.choice(FOODS)}
    return prompt.format(**slots), answer.format(**slots)


# --- public API -------------------------------------------------------------------------------


def _check_skills(skills: Iterable[str]) -> tuple[str, ...]:
    skills = tuple(skills)
    if not skills:
        raise ValueError(f"skills must name at least one skill, got {skills!r}")
    for s in skills:
        if s not in SKILLS:
            raise ValueError(f"unknown skill {s!r}; expected one of {SKILLS}")
    return skills


def make_example(skill: str, rng: random.Random, *, thinking: bool = False) -> Example:
    """One example of `skill` drawn from `rng`; `thinking` adds the trace where the skill has one."""
    _check_skills([skill])
    image, thought = None, ""
    if skill == "sudoku":
        prompt, answer, thought = _sudoku(rng, thinking)
    elif skill == "arithmetic":
        prompt, answer, thought = _arithmetic(rng, thinking)
    elif skill == "picture":
        scene = pictures.random_scene(rng)
        image = pictures.render(scene)
        prompt, answer = pictures.ask(scene, rng)
    elif skill == "json":
        prompt, answer = _json(rng)
    else:
        prompt, answer = _story(rng)
    return Example(skill, prompt, answer, thought, image, target=answer)


def _iter_examples(seed: int, n: int, skills: tuple[str, ...]) -> Iterator[Example]:
    rng = random.Random(seed)
    for i in range(n):
        skill = skills[i % len(skills)]
        thinking = skill in THINKING_SKILLS and rng.random() < THINKING_P
        yield make_example(skill, rng, thinking=thinking)


def sample_examples(seed: int, n: int, skills: Iterable[str] = SKILLS) -> list[Example]:
    """n examples, deterministic in `seed`, round-robin over `skills`; thinking drawn per example."""
    if n <= 0:
        raise ValueError(f"n must be > 0, got {n}")
    return list(_iter_examples(seed, n, _check_skills(skills)))


def _normalise(text: str) -> str:
    return " ".join(text.split())


def score(example: Example, answer_text: str) -> bool:
    """True when `answer_text` (thought already stripped) is the correct answer to `example`."""
    text = _normalise(answer_text)
    if example.skill == "json":
        try:
            return json.loads(text) == json.loads(example.target)
        except ValueError:
            return False
    if example.skill == "sudoku":
        return text.replace(" ", "") == example.target
    if example.skill in ("arithmetic", "picture"):  # short answers: case and a final full stop don't matter
        return text.rstrip(".").lower() == example.target.lower()
    return text == _normalise(example.target)


def corpus(seed: int, n: int) -> Iterator[str]:
    """Plain texts (prompt, thought when present, answer) of n examples, for training a BPE tokenizer."""
    if n <= 0:
        raise ValueError(f"n must be > 0, got {n}")

    def texts() -> Iterator[str]:
        for ex in _iter_examples(seed, n, SKILLS):
            yield ex.prompt
            if ex.thought:
                yield ex.thought
            yield ex.answer

    return texts()


def main() -> None:
    parser = argparse.ArgumentParser(description="Print synthetic examples for the tiny model.")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--skill", choices=SKILLS, action="append", help="repeatable; default all")
    parser.add_argument("--save-images", type=Path, help="write picture examples as PNGs here")
    args = parser.parse_args()
    for i, ex in enumerate(sample_examples(args.seed, args.n, args.skill or SKILLS)):
        print(f"[{i}] {ex.skill}\n  prompt:  {ex.prompt}")
        if ex.thought:
            print(f"  thought: {ex.thought}")
        print(f"  answer:  {ex.answer}")
        if ex.image is not None and args.save_images:
            args.save_images.mkdir(parents=True, exist_ok=True)
            ex.image.save(args.save_images / f"{i:03d}.png")
            print(f"  image:   {args.save_images / f'{i:03d}.png'}")


if __name__ == "__main__":
    main()
