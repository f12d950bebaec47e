"""Synthetic skill suite for the embedded tiny DiffusionGemma: generators, references and scorers.

Five skills, each chosen to show one thing about diffusion decoding:
- sudoku:     4×4 grid, 4–8 blanks, unique solution: bidirectional refinement fills cells in any order.
- arithmetic: a sum of two numbers of 3, 4 or 5 digits (each operand's digit count drawn first,
              equally likely); thinking mode first writes a fixed-shape trace in three passes over
              the columns (sums, carries, digits written; 4- and 5-digit traces span two canvases),
              so the answer follows from tokens the canvas has already settled. The generator and
              the trace also take more terms (`ADD_TERMS`; three as two additions in a row, each
              headed by its operands, the second adding the third term to the first's answer, up
              to four canvases), where a direct answer has to do every addition at once; the shipped
              model is trained on two and three (three only in training and the eval's hard rows).
              The eval measures thinking on against off per count of terms and digits.
- picture:    1–4 coloured shapes drawn with PIL, one question about them, answered in a sentence
              (image → encoder only).
- json:       a sentence → a JSON record of 4–5 fields (32–45 tokens): long, fully determined, copied
              from the prompt; it settles in a few steps.
- story:      a three-sentence story about a named animal (40–50 tokens); fluent text, deterministic
              in the prompt.

Every answer is a function of the prompt (and image), so a tiny model can reach ≥ 90 % accuracy.
`LONG_SKILLS` have answers of ≥ 32 tokens (with thinking on, the arithmetic reply is that long too, and
the eval holds it to the same TPF target);
every reply fits one 64-token canvas except thinking-mode arithmetic on 4- and 5-digit numbers, which
spans two, so the block-wise commits of the sampler show.
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
THINKING_SKILLS: tuple[str, ...] = ("arithmetic",)  # skills with a reasoning trace
LONG_SKILLS: tuple[str, ...] = ("json", "story")  # answers of >= 32 tokens without the thought
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


def _sudoku(rng: random.Random) -> tuple[str, str]:
    solution = _solved_grid(rng)
    k = rng.randint(*_SUDOKU_BLANKS)
    puzzle: list[int | None] = list(solution)
    for cell in rng.sample(range(16), 16):
        if puzzle.count(None) == k:
            break
        puzzle[cell] = None
        if _singles_order(puzzle) is None:  # solvable by singles ⇒ unique; also makes the trace honest
            puzzle[cell] = solution[cell]
    return f"Solve the sudoku: {sudoku_text(puzzle)}", sudoku_text(solution)


# --- arithmetic -------------------------------------------------------------------------------

_ADD_TEMPLATES = ("What is {sum}?", "Compute {sum}.", "Add {list}.")
ADD_TERMS = (2,)  # how many numbers a sum adds, drawn first when more than one, equally likely
HARD_TERMS = 3  # sums of this many numbers are hard enough that a direct answer fails (the eval's last rows)
ADD_DIGITS = (3, 4, 5)  # then each operand's digit count, equally likely


def _operand(rng: random.Random, digits: int | None = None) -> int:
    digits = rng.choice(ADD_DIGITS) if digits is None else digits
    return rng.randint(10 ** (digits - 1), 10 ** digits - 1)


def addition_prompt(template: str, terms: tuple[int, ...]) -> str:
    """'What is 12 + 34 + 56?', 'Add 12, 34 and 56.': one of `_ADD_TEMPLATES` filled with the terms."""
    listed = ", ".join(map(str, terms[:-1])) + f" and {terms[-1]}"
    return template.format(sum=" + ".join(map(str, terms)), list=listed)


def addition_trace(*terms: int) -> str:
    """'7+6=13; 8+5=13; 4+3=07; carry 0 1 1 0; write 3 4 8; answer 843' for 487 + 356.

    Two terms: three passes over the columns, ones first, as many columns as the longer operand has
    digits:
    - each column's two-digit sum of its two digits (0 past the shorter operand's end), a function
      of the prompt alone;
    - the carry into each column and out of the last one: 1 after a sum of 10 or more, or after a 9
      with a carry in; otherwise 0 (the first is always 0);
    - the digit written in each column: the ones of its sum plus its carry in;
    then the answer: the last carry when it is 1, then the written digits from the last column back.
    Every token depends on a few tokens at fixed places (only a run of 9s chains carries), so a canvas
    can settle pass by pass, most positions in parallel, and the trace's length follows from the
    prompt alone.

    More terms: one such trace per addition, left to right, each adding the next term to the answer
    of the one before and headed by its two operands (`487 + 356: 7+6=13; …; answer 843; 843 + 999:
    3+9=12; …; answer 1842` for 487 + 356 + 999). The header marks from the trace's first token that
    more than one addition follows, and gives each addition's columns a nearby place to read its
    operands from, the second one copied from the answer just written. The second addition reads an
    operand the first one wrote, so its digits exist only once the first has settled: a direct answer
    has to do both additions in the one canvas it refines.
    """
    if len(terms) < 2:
        raise ValueError(f"an addition needs at least two terms, got {terms!r}")
    if len(terms) == 2:
        return _two_term_trace(*terms)
    steps, total = [], terms[0]
    for term in terms[1:]:
        steps.append(f"{total} + {term}: {_two_term_trace(total, term)}")
        total += term
    return "; ".join(steps)


def _two_term_trace(a: int, b: int) -> str:
    width = max(len(str(a)), len(str(b)))
    da, db = str(a).zfill(width)[::-1], str(b).zfill(width)[::-1]
    sums = [int(x) + int(y) for x, y in zip(da, db)]
    carries = [0]
    for s in sums:
        carries.append(int(s + carries[-1] >= 10))
    written = [(s + c) % 10 for s, c in zip(sums, carries)]
    columns = "; ".join(f"{x}+{y}={s:02d}" for x, y, s in zip(da, db, sums))
    return (f"{columns}; carry {' '.join(map(str, carries))}; write {' '.join(map(str, written))}; "
            f"answer {a + b}")


def longest_addition_reply(terms: int) -> int:
    """Tokens of the longest thinking-on reply to a sum of `terms` numbers of `ADD_DIGITS` digits (all 9s),
    an upper bound in the embedded model's tokens: 90 for two; 208, 318 and 428 for three, four and five
    terms (each further addition brings its header, a column more and a longer answer)."""
    return 90 if terms == 2 else 98 + 110 * (terms - 2)


def check_add_terms(add_terms: Iterable[int]) -> tuple[int, ...]:
    """`add_terms` as a tuple; a ValueError when it is empty or holds a count below two."""
    add_terms = tuple(add_terms)
    if not add_terms or any(not isinstance(t, int) or t < 2 for t in add_terms):
        raise ValueError(f"add_terms must be counts of terms >= 2, got {add_terms!r}")
    return add_terms


def parse_add_terms(text: str) -> tuple[int, ...]:
    """'2,3' → (2, 3): the `--add-terms` of training and evaluation."""
    try:
        return check_add_terms(int(part) for part in text.split(","))
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"expected counts of terms >= 2 like 2,3, got {text!r}") from err


def _arithmetic(rng: random.Random, thinking: bool, digits: int | None = None, terms: int | None = None,
                add_terms: tuple[int, ...] | None = None) -> tuple[str, str, str]:
    if terms is None:  # a single count spends no draw, so two-term streams are those of the 2-term skill
        counts = ADD_TERMS if add_terms is None else add_terms
        terms = rng.choice(counts) if len(counts) > 1 else counts[0]
    numbers = tuple(_operand(rng, digits) for _ in range(terms))
    prompt = addition_prompt(rng.choice(_ADD_TEMPLATES), numbers)
    return prompt, str(sum(numbers)), addition_trace(*numbers) if thinking else ""


# --- json -------------------------------------------------------------------------------------

_JSON_CLAUSES = {  # field → phrasings of "<name> ..."
    "age": ("is {} years old", "is {}"),
    "city": ("lives in {}", "is from {}"),
    "job": ("works as a {}", "is a {}"),
    "pet": ("has a {}", "owns a {}"),
}
_JSON_PROMPTS = ("Convert to JSON: {}", "Extract the fields as JSON: {}")


def _json(rng: random.Random) -> tuple[str, str]:
    """4–5 fields, always in the record's key order; the sentence states them in a random order."""
    fields = sorted(rng.sample(list(_JSON_CLAUSES), rng.randint(3, 4)), key=list(_JSON_CLAUSES).index)
    record: dict[str, object] = {"name": rng.choice(NAMES)}
    pools = {"age": range(18, 90), "city": CITIES, "job": JOBS, "pet": PETS}
    for f in fields:
        record[f] = rng.choice(pools[f])
    clauses = [rng.choice(_JSON_CLAUSES[f]).format(record[f]) for f in rng.sample(fields, len(fields))]
    said = ", ".join(clauses[:-1]) + " and " + clauses[-1]
    prompt = rng.choice(_JSON_PROMPTS).format(f"{record['name']} {said}.")
    return prompt, json.dumps(record)


# --- story ------------------------------------------------------------------------------------

_STORY_TEMPLATES = (  # (prompt, answer): the prompt template fixes the answer template
    ("Write a short story about a {animal} named {name} who likes {food} and the {place}.",
     "{name} the {animal} woke up hungry one morning. The {animal} walked to the {place} and found "
     "some {food} there. {name} ate the {food} and was happy all day."),
    ("Tell a story about {name} the {animal}, some {food} and the {place}.",
     "Once upon a time, {name} the {animal} lived near the {place}. Every day the {animal} looked "
     "for {food}. One day {name} found a big pile of {food} and shared it with friends."),
    ("Write three sentences where {name} the {animal} eats {food} at the {place}.",
     "{name} the {animal} went to the {place} after lunch. There was fresh {food} on the ground. "
     "The {animal} ate the {food} and then {name} took a long nap."),
)
PLACES = ("forest", "garden", "river", "hill", "farm", "lake", "park", "beach")


def _story(rng: random.Random) -> tuple[str, str]:
    prompt, answer = rng.choice(_STORY_TEMPLATES)
    slots = {"name": rng.choice(NAMES), "animal": rng.choice(ANIMALS), "food": rng.choice(FOODS),
             "place": rng.choice(PLACES)}
    return prompt.format(**slots), answer.format(**slots)


# --- public API -------------------------------------------------------------------------------


def check_skills(skills: Iterable[str], what: str = "skills") -> tuple[str, ...]:
    """`skills` as a tuple; a ValueError naming `what` when it is empty or names an unknown skill."""
    skills = tuple(skills)
    if not skills:
        raise ValueError(f"{what} must name at least one skill, got {skills!r}")
    for s in skills:
        if s not in SKILLS:
            raise ValueError(f"unknown skill {s!r} in {what}; expected one of {SKILLS}")
    return skills


def make_example(skill: str, rng: random.Random, *, thinking: bool = False,
                 add_terms: tuple[int, ...] | None = None) -> Example:
    """One example of `skill` drawn from `rng`; `thinking` adds the trace where the skill has one;
    `add_terms` (default `ADD_TERMS`) are the counts of terms an addition draws from."""
    check_skills([skill])
    image, thought = None, ""
    if skill == "sudoku":
        prompt, answer = _sudoku(rng)
    elif skill == "arithmetic":
        prompt, answer, thought = _arithmetic(rng, thinking, add_terms=add_terms)
    elif skill == "picture":
        scene = pictures.random_scene(rng)
        image = pictures.render(scene)
        prompt, answer = pictures.ask(scene, rng)
    elif skill == "json":
        prompt, answer = _json(rng)
    else:
        prompt, answer = _story(rng)
    return Example(skill, prompt, answer, thought, image, target=answer)


def addition_example(rng: random.Random, digits: int, *, thinking: bool, terms: int = 2) -> Example:
    """A sum of `terms` numbers of `digits` digits each: the eval's arithmetic rows by difficulty."""
    if digits < 1:
        raise ValueError(f"digits must be >= 1, got {digits}")
    if terms < 2:
        raise ValueError(f"terms must be >= 2, got {terms}")
    prompt, answer, thought = _arithmetic(rng, thinking, digits, terms)
    return Example("arithmetic", prompt, answer, thought, None, target=answer)


def _iter_examples(seed: int, n: int, skills: tuple[str, ...],
                   add_terms: tuple[int, ...] | None = None) -> Iterator[Example]:
    rng = random.Random(seed)
    for i in range(n):
        skill = skills[i % len(skills)]
        thinking = skill in THINKING_SKILLS and rng.random() < THINKING_P
        yield make_example(skill, rng, thinking=thinking, add_terms=add_terms)


def sample_examples(seed: int, n: int, skills: Iterable[str] = SKILLS,
                    add_terms: Iterable[int] | None = None) -> list[Example]:
    """n examples, deterministic in `seed`, round-robin over `skills`; thinking drawn per example;
    additions of `add_terms` terms (default `ADD_TERMS`)."""
    if n <= 0:
        raise ValueError(f"n must be > 0, got {n}")
    terms = None if add_terms is None else check_add_terms(add_terms)
    return list(_iter_examples(seed, n, check_skills(skills), terms))


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
    if example.skill in ("arithmetic", "picture"):  # case and a final full stop don't matter
        return text.rstrip(".").lower() == example.target.rstrip(".").lower()
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
