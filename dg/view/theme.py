"""The one theme of every view: token-state colours and their meaning, labels, the CSS, token display text.

The HTML views (`render`, `walkthrough`), the figures (`plots`) and the GIF (`export`) all colour
tokens from `STATE_COLORS`; the CSS is put on a page once (the app's legend, the replay file's head),
never into each view. Colours are translucent where they fill, so they read on dark and light themes.

    python -c "from dg.view.theme import STATE_COLORS; print(STATE_COLORS)"
"""

import html
import re

STATES = ("committed", "accepted", "changed", "remelted", "noise", "pad")  # legend order
STATE_COLORS = {"committed": "#6366f1", "accepted": "#16a34a", "changed": "#f59e0b",
                "remelted": "#dc2626", "noise": "#94a3b8", "pad": "#475569"}
STATE_HELP = {
    "committed": "committed in an earlier canvas; the encoder has it in the KV cache",
    "accepted": "accepted this step: within the entropy bound, kept as the sampled token",
    "changed": "renoised; its argmax differs from the previous step's",
    "remelted": "accepted at an earlier step of this canvas, renoised again this step",
    "noise": "renoised; argmax unchanged since the previous step",
    "pad": "after the first EOS: becomes pad when the canvas is committed",
}
THOUGHT_COLOR = "#a855f7"  # tokens inside the thought channel
AR_COLOR = "#f97316"  # the AR side of a race
COLUMNS = 16  # canvas cells per row, in the page and in the GIF

CSS = """<style>
.dg-view{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px;color:inherit}
.dg-title{font-weight:600;margin:2px 0 6px}
.dg-grid{display:grid;gap:3px}
.dg-cell{border:1.5px solid;border-radius:4px;padding:3px 2px;text-align:center;white-space:pre;
 overflow:hidden;text-overflow:ellipsis;min-height:1.3em;cursor:pointer}
.dg-cell.dg-thought{border-style:dashed;font-style:italic}
.dg-cell.dg-waiting{border-style:dotted;border-color:#94a3b866;color:#94a3b8}
.dg-committed-rows{margin-bottom:8px;opacity:.85}
.dg-crow{margin:2px 0;line-height:1.7}
.dg-clabel{font-size:10px;opacity:.7;margin-right:6px}
.dg-tok{border-bottom:2px solid;padding:0 1px;margin-right:1px;white-space:pre}
.dg-tok.dg-thought{border-bottom-style:dashed;font-style:italic}
.dg-legend span.dg-cell{display:inline-block;margin:2px 6px 2px 0;padding:2px 6px;cursor:default}
.dg-panel{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center}
.dg-kv b{font-weight:600}
.dg-meter{display:inline-block;width:90px;height:8px;border:1px solid #94a3b8;border-radius:4px;
 vertical-align:middle;overflow:hidden}
.dg-meter>i{display:block;height:100%}
.dg-badge{border-radius:10px;padding:1px 8px;font-weight:600;border:1px solid}
.dg-muted{opacity:.65}
.dg-warn{color:#dc2626;font-weight:600}
.dg-text{white-space:pre-wrap;font-family:inherit}
.dg-bars td{padding:1px 6px}
</style>"""

_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_BYTE_NAMES = {0x0A: "⏎", 0x09: "⇥", 0x20: "␣"}


def token_piece(tokenizer, token_id) -> str:
    """Display text of one token: `▁` as ␣, newline as ⏎, byte tokens as hex, specials as they are."""
    token_id = int(token_id)
    try:
        piece = tokenizer.convert_ids_to_tokens(token_id)
    except (IndexError, OverflowError, ValueError):
        piece = None
    if piece is None:
        return f"[{token_id}]"  # an id the model has but the tokenizer does not
    byte = _BYTE.fullmatch(piece)
    if byte:
        value = int(byte.group(1), 16)
        return _BYTE_NAMES.get(value, f"0x{value:02X}")
    return piece.replace("▁", "␣").replace("\n", "⏎").replace("\t", "⇥")


def esc(text) -> str:
    return html.escape(str(text), quote=True)


def fill(color: str) -> str:
    """Inline style of a cell filled with a state colour: translucent fill, solid border."""
    return f"background:{color}33;border-color:{color}"


def meter(fraction: float, color: str) -> str:
    """A small horizontal bar, `fraction` of it filled (clipped to [0, 1])."""
    width = 100 * min(max(fraction, 0.0), 1.0)
    return f'<span class="dg-meter"><i style="width:{width:.0f}%;background:{color}"></i></span>'
