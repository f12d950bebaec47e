"""The edited canvas drawn: one cell per position, pinned (the theme's pinned state), free or blank.

Pure: a `dg.edits.CanvasEdit` (and the tokenizer) in, fragments out, one per cell as `render.canvas_parts`
sends them (the page joins them with `render.PARTS_TEMPLATE`, and a change resends only the cells it
touched). Cells carry `data-pos`, so the app's click handler knows which one was clicked.

    python -m pytest tests/view/test_edit.py -q
"""

from dg.view.render import GRID_OPEN
from dg.view.theme import STATE_SHORT, esc, piece_html, plural, token_piece

BLANK_MARK = "·"
EMPTY = "No canvas to edit yet: generate a run (diffusion), then edit its canvas here."
HOW = ("click a cell to pin or free it (or to blank it, or to pick it for writing); shift-click reaches every "
       "cell since the last click")


def _cell(pos: int, token_id, pinned: bool, tokenizer, selected: bool) -> str:
    if token_id is None:
        state, piece, what = "blank", BLANK_MARK, "blank: a random token when the run starts"
    else:
        piece = token_piece(tokenizer, token_id)
        state, what = ("pinned", STATE_SHORT["pinned"]) if pinned else ("free", "free: a warm start it may change")
    mark = " dg-inspected" * selected
    body = esc(piece) if token_id is None else piece_html(piece)
    return f'<div class="dg-cell dg-{state}{mark}" data-pos="{pos}" title="#{pos} · {esc(what)}">{body}</div>'


def edit_parts(edit, tokenizer, *, selected: int | None = None, title: str = "", note: str = "") -> list[str]:
    """The edit's canvases as cells (a label before each canvas), its counts above; `selected` outlines the cell
    that text is written to; `note` says why there is nothing to edit."""
    head = '<div class="dg-view">' + (f'<div class="dg-title">{esc(title)}</div>' if title else "")
    if edit is None:
        return [head, f'<div class="dg-muted">{esc(note or EMPTY)}</div></div>']
    counts = edit.counts
    line = (f'<div class="dg-clabel">{plural(counts["pinned"], "position")} pinned · {counts["free"]} free · '
            f'{counts["blank"]} blank · {esc(HOW)}</div>')
    parts = [head + line]
    for start in range(0, len(edit), edit.canvas_length):
        parts.append(f'<div class="dg-clabel">canvas {start // edit.canvas_length + 1} · cells {start}–'
                     f'{start + edit.canvas_length - 1}</div>{GRID_OPEN}')
        parts += [_cell(p, edit.ids[p], edit.pinned[p], tokenizer, p == selected)
                  for p in range(start, start + edit.canvas_length)]
        parts.append("</div>")
    return parts + ["</div>"]
