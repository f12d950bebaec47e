"""The one theme of every view: token-state colours and their meaning, labels, the CSS, token display text.

The HTML views (`render`, `walkthrough`), the figures (`plots`) and the GIF (`export`) all colour
tokens from one table of states (`TOKEN_STATES`: name, colour, legend words, tooltip) and mark thought
tokens the same way; the CSS is put on a page once (the app's legend, the replay file's head), never into
each view. Colours are translucent where they fill
and figures are transparent, so everything reads on dark and light themes. Canvas cells size to their
token (the canvas reads like text); `body.dg-presenter` is the app's presenter view (large cells).

    python -c "from dg.view.theme import STATE_COLORS; print(STATE_COLORS)"
"""

import html
import re
from typing import NamedTuple

from dg.config import MODES


class TokenState(NamedTuple):
    """What a canvas position is at a step, as every view shows it."""

    name: str
    color: str
    short: str  # the legend's visible words
    help: str  # the full sentence, in each tooltip
    modes: tuple = ("diffusion", "hybrid")  # the decoding modes (dg.config.MODES) whose canvas can show it


TOKEN_STATES = (  # legend order
    TokenState("committed", "#6366f1", "earlier canvas",
               "committed in an earlier canvas; the encoder has it in the KV cache", ("diffusion",)),
    TokenState("accepted", "#16a34a", "kept this step",
               "accepted this step: within the entropy bound, kept as the sampled token"),
    TokenState("changed", "#f59e0b", "renoised, argmax changed", "renoised; its argmax differs from the previous step's"),
    TokenState("remelted", "#dc2626", "accepted before, renoised now",
               "accepted at an earlier step of this canvas, renoised again this step"),
    TokenState("noise", "#94a3b8", "renoised, argmax same", "renoised; argmax unchanged since the previous step"),
    TokenState("pad", "#475569", "after EOS", "after the first EOS: becomes pad when the canvas is committed"),
    TokenState("pinned", "#c026d3", "pinned by you",
               "pinned: held at your draft's token in every step, never renoised (infill, an edited canvas)",
               ("diffusion",)),  # a hybrid run's pinned cells are its verified tokens
    # hybrid decoding (dg.hybrid): a verify round's verdict on the draft
    TokenState("verified", "#3b82f6", "hybrid: verified earlier",
               "hybrid: greedy AR's token, verified in an earlier round; pinned in the draft, never renoised",
               ("hybrid",)),
    TokenState("agreed", "#14b8a6", "hybrid: draft = AR", "hybrid: the draft's token equals greedy AR's: kept",
               ("hybrid",)),
    TokenState("bonus", "#f97316", "hybrid: AR token",
               "hybrid: AR's token at the first disagreement with the draft: every round gains it", ("hybrid",)),
    TokenState("rejected", "#e11d48", "hybrid: rejected draft",
               "hybrid: draft after the first disagreement: dropped, drafted again next round", ("hybrid",)),
)
# an AR run's canvas is its tokens, each committed by the forward that made it: one state, in committed's colour
AR_TOKEN = TOKEN_STATES[0]._replace(short="AR token, one per forward",
                                    help="greedy AR's token: one forward each, committed at once", modes=("ar",))
STATES = tuple(s.name for s in TOKEN_STATES)
STATE_COLORS = {s.name: s.color for s in TOKEN_STATES}
STATE_HELP = {s.name: s.help for s in TOKEN_STATES}
STATE_SHORT = {s.name: s.short for s in TOKEN_STATES}


def mode_states(mode: str) -> tuple[TokenState, ...]:
    """The token states a run of `mode` (dg.config.MODES) can show, in legend order: its legend."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return tuple(s for s in (*TOKEN_STATES, AR_TOKEN) if mode in s.modes)


THOUGHT_COLOR = "#a855f7"  # tokens inside the thought channel
THOUGHT_MARK = "dashed border, italic"  # how every view marks a thought token (page, GIF, replay)
AR_COLOR = STATE_COLORS["bonus"]  # the AR lane of a race: AR's own tokens
HYBRID_COLOR = STATE_COLORS["agreed"]  # the hybrid lane of a race: drafts AR kept
INK = "#94a3b8"  # text and axes of figures: readable on light and dark backgrounds
# plotly layout of every figure: transparent, so a figure takes the page's background (light or dark)
PLOT_LAYOUT = dict(paper_bgcolor="rgba(0,0,0,0)", plot_bgcolor="rgba(0,0,0,0)", font=dict(color=INK),
                   margin=dict(l=60, r=20, t=90, b=50), title=dict(x=0.01, xanchor="left"))
PLOT_AXES = dict(gridcolor="rgba(148,163,184,0.25)", zerolinecolor="rgba(148,163,184,0.4)")

# System font stacks for the whole page: Gradio's default theme names a web font that an offline room lacks,
# and its fallback drew some glyphs (a bold capital "A") from another face.
SANS = 'ui-sans-serif,system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,"Noto Sans","DejaVu Sans",sans-serif'
MONO = 'ui-monospace,SFMono-Regular,Menlo,Consolas,"DejaVu Sans Mono",monospace'
CSS = """<style>
.dg-view{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:13px;color:inherit}
.dg-title{font-weight:600;margin:2px 0 6px}
.dg-grid{display:flex;flex-wrap:wrap;gap:3px}
.dg-cell{border:1.5px solid;border-radius:4px;padding:2px 4px;text-align:center;white-space:pre;
 min-width:1.2em;min-height:1.3em;cursor:pointer}
.dg-cell.dg-thought{border-style:dashed;font-style:italic}
.dg-cell.dg-waiting{border-style:dotted;border-color:#94a3b866;color:#94a3b8}
.dg-cell.dg-inspected{outline:3px solid #0ea5e9;outline-offset:1px}
.dg-cell.dg-pinned{border-style:double;border-width:3px;padding:.5px 2.5px}  /* same size as a cell */
.dg-cell.dg-free{border-style:dotted}
.dg-cell.dg-blank{border-style:dotted;border-color:#94a3b8;color:#94a3b8}
.dg-sp{opacity:.4}
input[role=combobox]{padding-right:26px!important;text-overflow:ellipsis}  /* a long run label stops short of the arrow */
.dg-committed-rows{margin-bottom:8px;opacity:.85}
.dg-crow{margin:2px 0;line-height:1.7}
.dg-clabel{font-size:11px;opacity:.75;margin-right:6px}
.dg-tok{display:inline-block;border-bottom:2px solid;padding:0 1px;margin-right:1px;white-space:pre}
.dg-tok.dg-thought{border-bottom-style:dashed;font-style:italic}
.dg-legend{display:flex;flex-wrap:wrap;gap:4px 14px;align-items:center}
.dg-legend .dg-li{display:inline-flex;gap:5px;align-items:center}
.dg-legend span.dg-cell{display:inline-block;padding:1px 6px;cursor:default}
.dg-legend .dg-what{font-size:11px;opacity:.8}
.dg-panel{display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center}
.dg-group{font-size:11px;text-transform:uppercase;letter-spacing:.04em;opacity:.65}
.dg-kv b{font-weight:600}
.dg-meter{display:inline-block;width:90px;height:8px;border:1px solid #94a3b8;border-radius:4px;
 vertical-align:middle;overflow:hidden}
.dg-meter>i{display:block;height:100%}
.dg-badge{border-radius:10px;padding:1px 8px;font-weight:600;border:1px solid}
.dg-muted{opacity:.65}
.dg-warn{color:#dc2626;font-weight:600}
.dg-text{white-space:pre-wrap;font-family:inherit}
.dg-ref{margin-top:6px;padding:4px 8px;border-radius:6px;border:1px solid}
.dg-bars{max-width:100%}
.dg-bars td{padding:1px 6px}
.dg-scroll{overflow-x:auto;max-width:100%}
.dg-fig{display:block;width:100%;height:auto;max-height:260px}
.dg-fig text{font-family:inherit;font-size:11px;fill:currentColor}
.dg-badge.dg-held{visibility:hidden}
#dg-css{display:none}
#dg-status{min-height:1.6em}
body.dg-presenter #dg-main{display:grid;grid-template-columns:minmax(240px,1fr) auto max-content auto minmax(170px,240px);
 gap:10px 14px;align-items:end}
body.dg-presenter #dg-main>.column,body.dg-presenter #dg-main>.column>.form{display:contents}
body.dg-presenter #dg-main>.column>*,body.dg-presenter #dg-main>.column>.form>*{grid-column:1/-1;order:20;
 min-width:0;width:auto;margin:0}
body.dg-presenter #dg-main #dg-prompt{grid-area:1/1}
body.dg-presenter #dg-main #dg-run{grid-area:1/2;flex-wrap:nowrap;align-self:end}
body.dg-presenter #dg-main #dg-mode{grid-area:1/3}
body.dg-presenter #dg-main #dg-thinking{grid-area:1/4}
body.dg-presenter #dg-main #dg-pace{grid-area:1/5}
body.dg-presenter #dg-run>button{min-width:0;flex:0 0 auto;padding-left:16px;padding-right:16px}
body.dg-presenter #dg-mode>span:first-of-type{display:none}
body.dg-presenter :is(#dg-prompt,#dg-mode,#dg-thinking,#dg-pace) .info-text{display:none}
body.dg-presenter #dg-main #dg-examples{order:1}
body.dg-presenter #dg-main #dg-canvas{order:2;scroll-margin-top:12px}
body.dg-presenter #dg-main #dg-status{order:3}
body.dg-presenter #dg-main #dg-panel{order:4}
body.dg-presenter #dg-main #dg-text{order:5}
body.dg-presenter #dg-main #dg-legend{order:6}
body.dg-presenter #dg-main :is(#dg-image-row,#dg-settings){order:30}
body.dg-presenter #dg-status,body.dg-presenter #dg-status *{font-size:28px;line-height:1.35}
body.dg-presenter .dg-view{font-size:20px}
body.dg-presenter #dg-canvas .dg-cell,body.dg-presenter #dg-edit-canvas .dg-cell{padding:5px 9px;border-width:2.5px}
body.dg-presenter #dg-canvas .dg-pinned,body.dg-presenter #dg-edit-canvas .dg-pinned{padding:3.5px 7.5px;border-width:4px}
body.dg-presenter .dg-clabel,body.dg-presenter .dg-legend .dg-what,body.dg-presenter .dg-group{font-size:15px}
#dg-edit-compare{overflow-x:auto}
#dg-edit-compare th,#dg-edit-compare td{word-break:keep-all;overflow-wrap:normal;white-space:nowrap}
"""
CSS += f"body,.gradio-container{{--font:{SANS};--font-mono:{MONO}}}\n"
# each state's fill as a class, so a canvas cell names its state instead of carrying an inline style
CSS += "".join(f".dg-cell.dg-{state}{{background:{color}33;border-color:{color}}}\n"
               for state, color in STATE_COLORS.items()) + "</style>"

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


def piece_html(piece: str) -> str:
    """A token's display text, escaped, with the ␣ of a leading space muted so the canvas reads as text."""
    return esc(piece).replace("␣", '<span class="dg-sp">␣</span>')


def plural(n: int, word: str, many: str | None = None) -> str:
    """'1 canvas', '2 canvases': `many` is the plural when it is not `word` + 's'."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def fill(color: str) -> str:
    """Inline style of a cell filled with a state colour: translucent fill, solid border."""
    return f"background:{color}33;border-color:{color}"


def meter(fraction: float, color: str) -> str:
    """A small horizontal bar, `fraction` of it filled (clipped to [0, 1])."""
    width = 100 * min(max(fraction, 0.0), 1.0)
    return f'<span class="dg-meter"><i style="width:{width:.0f}%;background:{color}"></i></span>'
