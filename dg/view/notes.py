"""Notes beside a reply: what the embedded tiny model cannot answer, and how to load the real checkpoint.

Pure HTML, styled by the theme's CSS (`dg-ref`, `dg-warn`), shown under the reply's text.

    python -m pytest tests/view/test_notes.py -q
"""

from dg.view.theme import STATE_COLORS, esc

REAL_CHECKPOINT = "python app.py --model google/diffusiongemma-26B-A4B-it"
SKILLS_LINE = ("a 4×4 sudoku, sums with their carry trace, a question about a picture of shapes, "
               "a sentence → JSON, a three-sentence story")


def outside_skills_html() -> str:
    """The embedded model knows five skills; this prompt is none of them, so its reply has no meaning."""
    color = STATE_COLORS["remelted"]
    return (f'<div class="dg-view dg-ref dg-outside" style="border-color:{color}">'
            f'<b style="color:{color}">⚠ outside the tiny model\'s five skills: '
            "this reply has no meaning</b>"
            f'<div class="dg-muted">The embedded 2 M-parameter model knows only {esc(SKILLS_LINE)}; anything else '
            "gets a reply that means nothing (a fluent, templated one, or none at all). For real answers load the "
            "released checkpoint "
            f'(README, "Using the real checkpoint"): <code>{esc(REAL_CHECKPOINT)}</code></div></div>')
