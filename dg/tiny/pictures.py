"""Pictures for the tiny model's "picture" skill: 1–4 flat shapes on a 2×2 grid, drawn with PIL.

A scene is a few `Shape`s, each in its own grid cell and in its own colour, so every question
(count, colour of a shape, shape at a position, description) has one answer that can be read off
the image alone. Shapes are 72 px wide on a 224 px white picture: several 16 px ViT patches each.
No antialiasing, so every shape pixel has exactly its palette colour (tests read pixels back).

Preview: `python -m dg.tiny.skills --skill picture --n 4 --save-images /tmp/pictures`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from PIL import Image, ImageDraw

PICTURE_PX = 224
SHAPE_PX = 72
JITTER_PX = 8  # small shifts keep the tiny ViT from memorising four fixed patch patterns
BACKGROUND = (255, 255, 255)
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 160, 60),
    "blue": (40, 80, 220),
    "yellow": (235, 200, 20),
    "purple": (140, 60, 180),
    "orange": (245, 130, 20),
}
KINDS = ("circle", "square", "triangle")
POSITIONS = ("top left", "top right", "bottom left", "bottom right")  # grid cells 0..3, reading order


@dataclass(frozen=True)
class Shape:
    kind: str
    colour: str
    cell: int  # index into POSITIONS
    centre: tuple[int, int]  # pixel centre after jitter


def cell_centre(cell: int) -> tuple[int, int]:
    """Pixel centre of grid cell 0..3; it lies inside any shape drawn in that cell, whatever the jitter."""
    half = PICTURE_PX // 4
    return (half + (cell % 2) * 2 * half, half + (cell // 2) * 2 * half)


def random_scene(rng: random.Random) -> tuple[Shape, ...]:
    """1–4 shapes in distinct cells and distinct colours, sorted by cell (reading order)."""
    n = rng.randint(1, len(POSITIONS))
    cells = sorted(rng.sample(range(len(POSITIONS)), n))
    colours = rng.sample(list(COLOURS), n)
    shapes = []
    for cell, colour in zip(cells, colours):
        cx, cy = cell_centre(cell)
        dx, dy = rng.randint(-JITTER_PX, JITTER_PX), rng.randint(-JITTER_PX, JITTER_PX)
        shapes.append(Shape(rng.choice(KINDS), colour, cell, (cx + dx, cy + dy)))
    return tuple(shapes)


def render(shapes: tuple[Shape, ...]) -> Image.Image:
    """RGB picture of the scene."""
    image = Image.new("RGB", (PICTURE_PX, PICTURE_PX), BACKGROUND)
    draw = ImageDraw.Draw(image)
    r = SHAPE_PX // 2
    for s in shapes:
        x, y = s.centre
        fill = COLOURS[s.colour]
        if s.kind == "circle":
            draw.ellipse((x - r, y - r, x + r, y + r), fill=fill)
        elif s.kind == "square":
            draw.rectangle((x - r, y - r, x + r, y + r), fill=fill)
        else:
            draw.polygon(((x, y - r), (x - r, y + r), (x + r, y + r)), fill=fill)
    return image


def describe(shapes: tuple[Shape, ...]) -> str:
    """'a red circle, a blue square and a green triangle' in reading order."""
    parts = [f"{'an' if s.colour[0] in 'aeiou' else 'a'} {s.colour} {s.kind}" for s in shapes]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def ask(shapes: tuple[Shape, ...], rng: random.Random) -> tuple[str, str]:
    """One (question, answer sentence) about the scene; the question never contains its answer.

    The question type is drawn uniformly first, so counts and descriptions are as common as the
    per-shape questions however many shapes there are.
    """
    kinds = [s.kind for s in shapes]
    n = len(shapes)
    count = "There is 1 shape." if n == 1 else f"There are {n} shapes."
    by_type = [
        [("How many shapes are in the picture?", count)],
        [("Describe the picture.", f"I see {describe(shapes)}.")],
        [(f"What colour is the {s.kind}?", f"The {s.kind} is {s.colour}.") for s in shapes if kinds.count(s.kind) == 1],
        [(f"What shape is in the {POSITIONS[s.cell]}?", f"The {POSITIONS[s.cell]} shape is a {s.kind}.")
         for s in shapes],
    ]
    return rng.choice(rng.choice([qs for qs in by_type if qs]))
