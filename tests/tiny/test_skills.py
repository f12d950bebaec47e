"""Tests for the tiny model's synthetic skills: `python -m pytest tests/tiny/test_skills.py -q`."""

import json
import random
import re
from collections import Counter

import pytest

from dg.tiny import pictures
from dg.tiny.skills import (
    ADD_DIGITS,
    ADD_TERMS,
    LONG_SKILLS,
    SKILLS,
    THINKING_SKILLS,
    addition_example,
    addition_prompt,
    addition_trace,
    corpus,
    count_solutions,
    make_example,
    sample_examples,
    score,
)

N = 250  # 50 per skill


@pytest.fixture(scope="module")
def examples():
    return sample_examples(seed=7, n=N)


def of(examples, skill):
    return [e for e in examples if e.skill == skill]


def corrupt(answer: str) -> str:
    """Change the last letter or digit, keeping the format (a sudoku stays a grid, JSON stays JSON)."""
    i = max(i for i, ch in enumerate(answer) if ch.isalnum())
    ch = answer[i]
    new = str((int(ch) + 1) % 10) if ch.isdigit() else ("a" if ch.lower() == "z" else chr(ord(ch) + 1))
    return answer[:i] + new + answer[i + 1:]


def test_same_seed_gives_the_same_examples_and_another_seed_does_not():
    a, b, c = sample_examples(3, 20), sample_examples(3, 20), sample_examples(4, 20)
    key = lambda e: (e.skill, e.prompt, e.answer, e.thought, e.target, e.image and e.image.tobytes())
    assert [key(e) for e in a] == [key(e) for e in b]
    assert [key(e) for e in a] != [key(e) for e in c]


def test_examples_go_round_robin_over_the_requested_skills():
    assert [e.skill for e in sample_examples(0, 10)] == list(SKILLS) * 2
    assert [e.skill for e in sample_examples(0, 4, skills=("json", "story"))] == ["json", "story"] * 2


@pytest.mark.parametrize("skill", SKILLS)
def test_reference_answers_score_true_and_corrupted_ones_false(examples, skill):
    for e in of(examples, skill):
        assert score(e, e.answer), e
        assert score(e, f"  {e.answer} \n"), e
        assert not score(e, corrupt(e.answer)), e
        assert not score(e, ""), e


def test_json_score_compares_records_not_spelling():
    e = make_example("json", random.Random(0))
    record = json.loads(e.answer)
    assert score(e, json.dumps(dict(reversed(record.items())), indent=1))
    assert not score(e, e.answer[:-1])  # truncated: does not parse


def test_only_skills_with_a_trace_think_and_only_when_asked(examples):
    for skill in SKILLS:
        assert make_example(skill, random.Random(1), thinking=False).thought == ""
        assert bool(make_example(skill, random.Random(1), thinking=True).thought) == (skill in THINKING_SKILLS)
    for skill in THINKING_SKILLS:
        thinking = [bool(e.thought) for e in of(examples, skill)]
        assert any(thinking) and not all(thinking)


def test_the_answer_is_a_function_of_the_prompt():
    seen = {}
    for e in sample_examples(11, 2000, skills=("arithmetic", "json", "story", "sudoku")):
        assert seen.setdefault(e.prompt, e.answer) == e.answer, e.prompt


def test_answers_and_thoughts_fit_about_two_canvases(examples):
    for e in examples:
        assert 0 < len(e.answer) <= 200 and len(e.answer) + len(e.thought) <= 300, e
        assert e.target == e.answer


def test_long_skills_answer_in_at_least_32_tokens_and_long_traces_span_two_canvases(processor):
    from dg.tiny.data import encode_example

    lengths = {}
    for e in sample_examples(3, 60, skills=(*LONG_SKILLS, "arithmetic")):
        lengths.setdefault((e.skill, bool(e.thought)), []).append(len(encode_example(e, processor).reply_ids))
    for skill in LONG_SKILLS:
        assert min(lengths[(skill, False)]) >= 32, (skill, lengths[(skill, False)])
    assert min(lengths[("arithmetic", True)]) >= 32 and max(lengths[("arithmetic", True)]) > 64


def grid(text: str) -> list[int | None]:
    return [None if ch == "." else int(ch) for ch in text.replace("/", "")]


def test_sudoku_puzzles_have_4_to_8_blanks_and_one_solution_which_is_the_answer(examples):
    for e in of(examples, "sudoku"):
        puzzle, solution = grid(e.prompt.split(": ")[1]), grid(e.answer)
        assert 4 <= puzzle.count(None) <= 8
        assert count_solutions(puzzle) == 1
        assert all(p is None or p == s for p, s in zip(puzzle, solution))
        rows = [solution[i * 4:(i + 1) * 4] for i in range(4)]
        cols = [solution[i::4] for i in range(4)]
        boxes = [[solution[(r + i) * 4 + c + j] for i in range(2) for j in range(2)] for r in (0, 2) for c in (0, 2)]
        assert all(sorted(g) == [1, 2, 3, 4] for g in rows + cols + boxes)


def test_addition_trace_writes_sums_then_carries_then_digits():
    assert addition_trace(487, 356) == "7+6=13; 8+5=13; 4+3=07; carry 0 1 1 0; write 3 4 8; answer 843"
    assert addition_trace(9500, 517) == ("0+7=07; 0+1=01; 5+5=10; 9+0=09; carry 0 0 0 1 1; write 7 1 0 0; "
                                         "answer 10017")
    # a run of 9s chains the carry through every column
    assert addition_trace(9999, 1) == "9+1=10; 9+0=09; 9+0=09; 9+0=09; carry 0 1 1 1 1; write 0 0 0 0; answer 10000"


def test_a_sum_of_three_numbers_is_two_headed_additions_the_second_reading_the_first_ones_answer():
    assert addition_trace(487, 356, 999) == (
        "487 + 356: 7+6=13; 8+5=13; 4+3=07; carry 0 1 1 0; write 3 4 8; answer 843; "
        "843 + 999: 3+9=12; 4+9=13; 8+9=17; carry 0 1 1 1; write 2 4 8; answer 1842")
    assert addition_trace(12345, 67, 8) == (f"12345 + 67: {addition_trace(12345, 67)}; "
                                            f"12412 + 8: {addition_trace(12412, 8)}")
    assert addition_trace(1, 2, 3, 4).count(": ") == 3  # one headed addition per further term
    with pytest.raises(ValueError, match="two terms"):
        addition_trace(5)


def test_addition_prompts_list_every_term():
    assert addition_prompt("What is {sum}?", (12, 345, 6789)) == "What is 12 + 345 + 6789?"
    assert addition_prompt("Add {list}.", (12, 345, 6789)) == "Add 12, 345 and 6789."
    assert addition_prompt("Add {list}.", (487, 356)) == "Add 487 and 356."


def test_the_answer_is_the_last_carry_then_the_written_digits_backwards():
    for terms in [(100, 100), (999, 1), (4821, 377), (5555, 4445), (123, 9876), (9999, 9999), (999, 999, 999),
                  (12345, 67, 8), (50000, 50000, 5)]:
        last = addition_trace(*terms).split("; answer ")[-2]  # the last addition's passes
        carries = last.split("carry ")[1].split(";")[0].split()
        written = last.split("write ")[1].split(";")[0].split()
        assert ("1" if carries[-1] == "1" else "") + "".join(reversed(written)) == str(sum(terms))


def test_the_trace_length_follows_from_the_prompt_alone(processor):
    """Same operand widths → same number of column tokens, whatever the carries (only the sum's own
    length can differ by its leading carry)."""
    tok = processor.tokenizer
    columns = [addition_trace(a, b).split("; answer")[0] for a, b in [(1000, 1000), (9999, 9999), (4821, 377),
                                                                       (5555, 4445)]]
    assert len({len(tok(c, add_special_tokens=False)["input_ids"]) for c in columns}) == 1


def test_arithmetic_answer_is_the_sum_and_the_thought_ends_with_it(examples):
    for e in of(examples, "arithmetic"):
        terms = list(map(int, re.findall(r"\d+", e.prompt)))
        assert len(terms) in ADD_TERMS and all(len(str(t)) in ADD_DIGITS for t in terms)
        assert e.answer == str(sum(terms))
        assert not e.thought or e.thought.endswith(f"answer {sum(terms)}")


def test_with_more_counts_of_terms_each_is_drawn_equally_often():
    drawn = sample_examples(5, 3000, skills=("arithmetic",), add_terms=(2, 3))
    counts = Counter(len(re.findall(r"\d+", e.prompt)) for e in drawn)
    assert set(counts) == {2, 3} and all(abs(c / 3000 - 1 / 2) < 0.03 for c in counts.values()), counts
    three = next(e for e in drawn if e.thought and len(re.findall(r"\d+", e.prompt)) == 3)
    assert three.thought.count("; answer ") == 2 and three.thought.endswith(f"answer {three.answer}")


@pytest.mark.parametrize("bad", [(), (1,), (2, 0), ("3",)])
def test_impossible_counts_of_terms_are_rejected(bad):
    with pytest.raises(ValueError, match="add_terms"):
        sample_examples(0, 5, add_terms=bad)


def test_a_single_count_of_terms_spends_no_draw():
    """The shipped two-term skill draws exactly what it drew before sums of more terms existed."""
    assert ADD_TERMS == (2,)
    example = make_example("arithmetic", random.Random(11), thinking=True)
    rng = random.Random(11)  # two operands (digit count, then the number), then the template
    numbers = []
    for _ in range(2):
        digits = rng.choice(ADD_DIGITS)
        numbers.append(rng.randint(10 ** (digits - 1), 10 ** digits - 1))
    template = rng.choice(("What is {} + {}?", "Compute {} + {}.", "Add {} and {}."))
    assert example.prompt == template.format(*numbers)


def test_each_operand_digit_count_is_drawn_equally_often():
    counts = Counter(len(n) for e in sample_examples(5, 3000, skills=("arithmetic",))
                     for n in re.findall(r"\d+", e.prompt))
    assert set(counts) == set(ADD_DIGITS)
    assert all(abs(c / sum(counts.values()) - 1 / len(ADD_DIGITS)) < 0.03 for c in counts.values()), counts


@pytest.mark.parametrize("terms", (2, 3))
@pytest.mark.parametrize("digits", ADD_DIGITS)
def test_an_addition_example_has_the_asked_terms_and_digit_count(digits, terms):
    rng = random.Random(0)
    for thinking in (True, False, True):
        e = addition_example(rng, digits, thinking=thinking, terms=terms)
        numbers = list(map(int, re.findall(r"\d+", e.prompt)))
        total = sum(numbers)
        assert len(numbers) == terms and {len(str(t)) for t in numbers} == {digits} and e.target == str(total)
        assert bool(e.thought) == thinking and score(e, str(total)) and not score(e, str(total + 1))
    with pytest.raises(ValueError, match="digits"):
        addition_example(rng, 0, thinking=False)
    with pytest.raises(ValueError, match="terms"):
        addition_example(rng, digits, thinking=False, terms=1)


def read_scene(image) -> tuple[pictures.Shape, ...]:
    """Recover (kind, colour, cell) from pixels: colour at the cell centre, kind from how much of the
    bounding box the colour fills (square 1, circle π/4, triangle 1/2)."""
    names = {rgb: name for name, rgb in pictures.COLOURS.items()}
    px, half = image.load(), pictures.PICTURE_PX // 2
    shapes = []
    for cell in range(len(pictures.POSITIONS)):
        colour = names.get(px[pictures.cell_centre(cell)])
        if colour is None:
            assert px[pictures.cell_centre(cell)] == pictures.BACKGROUND
            continue
        x0, y0 = (cell % 2) * half, (cell // 2) * half
        rgb = pictures.COLOURS[colour]
        xy = [(x, y) for x in range(x0, x0 + half) for y in range(y0, y0 + half) if px[x, y] == rgb]
        xs, ys = [x for x, _ in xy], [y for _, y in xy]
        assert min(xs) > x0 and max(xs) < x0 + half - 1, "shape must stay inside its cell"
        assert max(xs) - min(xs) >= 50 and max(ys) - min(ys) >= 50, "shape must span several ViT patches"
        fill = len(xy) / ((max(xs) - min(xs) + 1) * (max(ys) - min(ys) + 1))
        kind = "square" if fill > 0.95 else "circle" if fill > 0.65 else "triangle"
        shapes.append(pictures.Shape(kind, colour, cell, (0, 0)))
    return tuple(shapes)


def test_picture_answers_can_be_read_back_from_the_pixels(examples):
    for e in of(examples, "picture"):
        assert e.image.mode == "RGB" and e.image.size == (pictures.PICTURE_PX, pictures.PICTURE_PX)
        scene = read_scene(e.image)
        assert 1 <= len(scene) <= 4 and len({s.colour for s in scene}) == len(scene)
        n = len(scene)
        if e.prompt.startswith("How many"):
            assert e.answer == ("There is 1 shape." if n == 1 else f"There are {n} shapes.")
        elif e.prompt.startswith("Describe"):
            assert e.answer == f"I see {pictures.describe(scene)}."
        elif e.prompt.startswith("What colour is the "):
            kind = e.prompt.removeprefix("What colour is the ").rstrip("?")
            (colour,) = [s.colour for s in scene if s.kind == kind]
            assert e.answer == f"The {kind} is {colour}."
        else:
            position = e.prompt.removeprefix("What shape is in the ").rstrip("?")
            (kind,) = [s.kind for s in scene if pictures.POSITIONS[s.cell] == position]
            assert e.answer == f"The {position} shape is a {kind}."


def test_json_answers_parse_and_every_value_comes_from_the_prompt(examples):
    for e in of(examples, "json"):
        record = json.loads(e.answer)
        assert list(record)[0] == "name" and 4 <= len(record) <= 5
        assert set(record) <= {"name", "age", "city", "job", "pet"}
        assert all(str(v) in e.prompt for v in record.values())


def test_story_answer_names_the_prompts_name_animal_food_and_place(examples):
    for e in of(examples, "story"):
        words = set(re.findall(r"\w+", e.answer))
        assert len(words & set(re.findall(r"\w+", e.prompt))) >= 4 and e.answer.endswith(".")
        assert len(re.findall(r"[.!?]", e.answer)) == 3


def test_corpus_yields_every_prompt_thought_and_answer_deterministically():
    texts = list(corpus(5, 10))
    assert texts == list(corpus(5, 10))
    expected = [t for e in sample_examples(5, 10) for t in (e.prompt, e.thought, e.answer) if t]
    assert texts == expected


@pytest.mark.parametrize("bad", ["chess", "", "Sudoku"])
def test_unknown_skill_raises_value_error_naming_it(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        make_example(bad, random.Random(0))
    with pytest.raises(ValueError, match=repr(bad)):
        sample_examples(0, 3, skills=("json", bad))


@pytest.mark.parametrize("n", [0, -3])
def test_non_positive_n_raises_value_error_naming_it(n):
    with pytest.raises(ValueError, match=str(n)):
        sample_examples(0, n)
    with pytest.raises(ValueError, match=str(n)):
        corpus(0, n)
