"""HTML views of a trace: the canvas grid, its legend, the step panel, a token inspector, the text.

Pure functions: a `Trace` (and the tokenizer) in, one self-contained HTML string out (inline CSS, no
scripts, every token escaped). The app re-renders them as the sampler streams records; the same
colours drive the GIF in dg/export.py. Colours are translucent so they read on dark and light themes.

    python -m pytest tests/test_render.py -q
"""

import html
import math
import re

import numpy as np

from dg.prompts import THOUGHT_CLOSE, THOUGHT_OPEN, decode_reply

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
STOP_LABELS = {"stable_confident": "stable + confident", "step_cap": "step cap", "eos": "EOS"}
SHOWS = ("argmax", "noisy", "sampled")
COLUMNS = 16
_BYTE = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_BYTE_NAMES = {0x0A: "⏎", 0x09: "⇥", 0x20: "␣"}

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


def _style(state: str) -> str:
    color = STATE_COLORS[state]
    return f"background:{color}33;border-color:{color}"


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


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


def channels(tokenizer, token_ids) -> list[str]:
    """"thought" for tokens inside `<|channel>thought … <channel|>` (markers included), else "answer"."""
    opening = tokenizer.convert_tokens_to_ids(THOUGHT_OPEN)
    closing = tokenizer.convert_tokens_to_ids(THOUGHT_CLOSE)
    out, inside = [], False
    for token_id in token_ids:
        token_id = int(token_id)
        if token_id == opening:
            inside = True
        out.append("thought" if inside else "answer")
        if token_id == closing:
            inside = False
    return out


def _resolve_step(trace, step_index):
    if not trace.steps:
        return None
    if step_index is None:
        return len(trace.steps) - 1
    if not -len(trace.steps) <= step_index < len(trace.steps):
        raise IndexError(f"step_index must be in [0, {len(trace.steps) - 1}], got {step_index}")
    return step_index % len(trace.steps)


def position_states(trace, step_index) -> list[str]:
    """State of each live canvas position at global step `step_index` (see STATE_HELP)."""
    if trace.mode == "ar":
        n = len(trace.tokens)
        return ["committed"] * (n if step_index is None else min(step_index + 1, n))
    i = _resolve_step(trace, step_index)
    if i is None:
        return []
    rec = trace.steps[i]
    earlier = [r for r in trace.steps[:i] if r.canvas == rec.canvas]
    ever_accepted = np.zeros_like(rec.accepted)
    for r in earlier:
        ever_accepted |= r.accepted
    previous = earlier[-1].argmax if earlier else rec.argmax
    after_eos = _after_eos(rec.argmax, trace.start.eos_token_ids if trace.start else ())
    states = []
    for pos in range(len(rec.argmax)):
        if after_eos[pos]:
            states.append("pad")
        elif rec.accepted[pos]:
            states.append("accepted")
        elif ever_accepted[pos]:
            states.append("remelted")
        elif previous[pos] != rec.argmax[pos]:
            states.append("changed")
        else:
            states.append("noise")
    return states


def _after_eos(ids, eos_ids) -> np.ndarray:
    is_eos = np.isin(np.asarray(ids), list(eos_ids))
    seen = np.cumsum(is_eos)
    return (seen > 0) & ~((seen == 1) & is_eos)


def canvas_cells(trace, tokenizer, step_index: int | None = None, show: str = "argmax") -> list[dict]:
    """One dict per live canvas position: pos, id, piece, state, entropy, channel (also used by the GIF)."""
    if show not in SHOWS:
        raise ValueError(f"show must be one of {SHOWS}, got {show!r}")
    i = _resolve_step(trace, step_index)
    if i is None:
        return []
    rec = trace.steps[i]
    ids = getattr(rec, show)
    prefix = [int(t) for c in trace.canvases if c.canvas < rec.canvas for t in c.committed]
    chans = channels(tokenizer, prefix + [int(t) for t in rec.argmax])[len(prefix):]
    return [dict(pos=pos, id=int(ids[pos]), piece=token_piece(tokenizer, ids[pos]), state=state,
                 entropy=float(rec.entropy[pos]), channel=chans[pos])
            for pos, state in enumerate(position_states(trace, i))]


def _cell(pos, piece, state, channel, tip, extra_class="") -> str:
    thought = " dg-thought" if channel == "thought" else ""
    return (f'<div class="dg-cell dg-{state}{thought}{extra_class}" data-pos="{pos}" style="{_style(state)}" '
            f'title="{_esc(tip)}">{_esc(piece)}</div>')


def _grid(cells: list[str], columns: int) -> str:
    return (f'<div class="dg-grid" style="grid-template-columns:repeat({columns},minmax(0,1fr))">'
            + "".join(cells) + "</div>")


def _committed_rows(trace, tokenizer, before: int) -> str:
    rows = []
    done = [c for c in trace.canvases if c.canvas < before]
    ids = [int(t) for c in done for t in c.committed]
    chans, offset = channels(tokenizer, ids), 0
    pad = trace.start.pad_token_id if trace.start else None
    for c in done:
        spans = []
        for j, token_id in enumerate(int(t) for t in c.committed):
            if token_id != pad:
                thought = " dg-thought" if chans[offset + j] == "thought" else ""
                spans.append(f'<span class="dg-tok{thought}" style="border-color:{STATE_COLORS["committed"]}">'
                             f"{_esc(token_piece(tokenizer, token_id))}</span>")
        offset += len(c.committed)
        label = f"canvas {c.canvas + 1} · {c.steps} steps · {STOP_LABELS.get(c.stop_reason, c.stop_reason)}"
        rows.append(f'<div class="dg-crow"><span class="dg-clabel">{_esc(label)}</span>{"".join(spans)}</div>')
    return f'<div class="dg-committed-rows">{"".join(rows)}</div>' if rows else ""


def canvas_html(trace, tokenizer, step_index: int | None = None, *, show="argmax", title: str = "",
                columns: int = COLUMNS) -> str:
    """The live canvas as a grid of coloured cells, committed canvases compactly above it."""
    head = CSS + '<div class="dg-view">' + (f'<div class="dg-title">{_esc(title)}</div>' if title else "")
    if trace.start is None:
        return head + '<div class="dg-muted">waiting for the run to start…</div></div>'
    if trace.mode == "ar":
        return head + _ar_row(trace, tokenizer, step_index, columns) + "</div>"
    cells = canvas_cells(trace, tokenizer, step_index, show)
    if not cells:
        wait = [f'<div class="dg-cell dg-waiting" data-pos="{p}" title="waiting for first step">·</div>'
                for p in range(trace.start.canvas_length)]
        return head + '<div class="dg-muted">waiting for first step…</div>' + _grid(wait, columns) + "</div>"
    rec = trace.steps[_resolve_step(trace, step_index)]
    body = [_cell(c["pos"], c["piece"], c["state"], c["channel"],
                  f'#{c["pos"]} {c["piece"]} · H={c["entropy"]:.3f} · {c["state"]}'
                  + (" · thought" if c["channel"] == "thought" else "")) for c in cells]
    label = f'<div class="dg-clabel">canvas {rec.canvas + 1} · step {rec.step} · showing {show}</div>'
    return head + _committed_rows(trace, tokenizer, rec.canvas) + label + _grid(body, columns) + "</div>"


def _ar_row(trace, tokenizer, step_index, columns) -> str:
    n = len(trace.tokens) if step_index is None else min(step_index + 1, len(trace.tokens))
    records = trace.tokens[:n]
    chans = channels(tokenizer, [r.token_id for r in records])
    cells = [_cell(r.index, token_piece(tokenizer, r.token_id), "committed", chans[j],
                   f"#{r.index} {token_piece(tokenizer, r.token_id)} · H={r.entropy:.3f} · AR token")
             for j, r in enumerate(records)]
    label = f'<div class="dg-clabel">AR · {n} tokens, one per forward</div>'
    return label + (_grid(cells, columns) if cells else '<div class="dg-muted">waiting for first token…</div>')


def legend_html() -> str:
    items = [f'<span class="dg-cell dg-{s}" style="{_style(s)}" title="{_esc(STATE_HELP[s])}">{s}</span>'
             for s in STATES]
    items.append('<span class="dg-cell dg-thought" style="border-color:#94a3b8" '
                 'title="inside &lt;|channel&gt;thought … &lt;channel|&gt;">thought (dashed)</span>')
    return CSS + '<div class="dg-view dg-legend">' + "".join(items) + "</div>"


def _meter(fraction: float, color: str) -> str:
    width = 100 * min(max(fraction, 0.0), 1.0)
    return f'<span class="dg-meter"><i style="width:{width:.0f}%;background:{color}"></i></span>'


def _kv(key, value) -> str:
    return f'<span class="dg-kv">{_esc(key)} <b>{value}</b></span>'


def _badge(text, color) -> str:
    return f'<span class="dg-badge" style="border-color:{color};background:{color}33">{_esc(text)}</span>'


def _metrics_html(trace) -> str:
    m = trace.metrics()
    return (_kv("NFE", m["nfe"]) + _kv("TPF", f'{m["tpf"]:.2f}') + _kv("tok/s", f'{m["effective_tok_s"]:.1f}')
            + _kv("tokens", m["tokens"]))


def step_panel_html(trace, step_index: int | None = None) -> str:
    """Where the run is (canvas k/K, step n/N, τ), what this step accepted, and the running metrics."""
    head = CSS + '<div class="dg-view dg-panel">'
    if trace.mode == "ar" and trace.tokens:
        n = len(trace.tokens) if step_index is None else min(step_index + 1, len(trace.tokens))
        rec = trace.tokens[n - 1]
        return head + _kv("AR token", f"{n}/{trace.start.max_new_tokens}") + _kv("entropy", f"{rec.entropy:.3f}") \
            + _metrics_html(trace) + "</div>"
    i = _resolve_step(trace, step_index)
    if i is None:
        return head + '<span class="dg-muted">waiting for first step…</span></div>'
    rec, cfg, start = trace.steps[i], trace.start.config, trace.start
    n_canvases = math.ceil(start.max_new_tokens / start.canvas_length)
    parts = [_kv("canvas", f"{rec.canvas + 1}/{n_canvases}"),
             _kv("step", f'{rec.step}/{cfg.get("max_denoising_steps", "?")}'),
             _kv("τ", f"{rec.temperature:.3f}"),
             _kv("accepted", f"{rec.n_accepted}/{len(rec.accepted)}"),
             _kv("entropy budget", f"{_meter(rec.accepted_entropy / rec.entropy_bound, STATE_COLORS['accepted'])} "
                 f"{rec.accepted_entropy:.3f} / {rec.entropy_bound:g}"),
             _kv("mean H", f'{rec.mean_entropy:.4f} {"&lt;" if rec.confident else "≥"} '
                 f'{cfg.get("confidence_threshold", float("nan")):g}'),
             _kv("stable", "yes" if rec.stable else "no")]
    canvas = next((c for c in trace.canvases if c.canvas == rec.canvas), None)
    if rec.stop_reason:
        parts.append(_badge(STOP_LABELS.get(rec.stop_reason, rec.stop_reason), STATE_COLORS["committed"]))
        if canvas is not None and canvas.eos:
            parts.append(_badge(STOP_LABELS["eos"], STATE_COLORS["pad"]))
    return head + "".join(parts) + _metrics_html(trace) + "</div>"


def _topk_table(tokenizer, ids, probs) -> str:
    rows = [f"<tr><td>{_esc(token_piece(tokenizer, t))}</td><td>{_meter(float(p), STATE_COLORS['accepted'])}</td>"
            f"<td>{float(p):.3f}</td></tr>" for t, p in zip(ids, probs)]
    return '<table class="dg-bars">' + "".join(rows) + "</table>"


def _ar_inspector(trace, tokenizer, index: int) -> str:
    if not 0 <= index < len(trace.tokens):
        return f'<span class="dg-muted">no AR token {index} (have {len(trace.tokens)})</span>'
    rec = trace.tokens[index]
    return (_kv("token", _esc(token_piece(tokenizer, rec.token_id))) + " " + _kv("entropy", f"{rec.entropy:.3f}")
            + _topk_table(tokenizer, rec.topk_ids, rec.topk_probs))


def inspector_html(trace, tokenizer, step_index: int, position: int) -> str:
    """One position at one step: top-k candidates, entropy, fed/argmax/sampled, accepted, argmax flips."""
    head = CSS + '<div class="dg-view">'
    if trace.mode == "ar":
        return head + _ar_inspector(trace, tokenizer, step_index) + "</div>"
    if not trace.steps or not 0 <= step_index < len(trace.steps):
        n = len(trace.steps)
        return head + f'<span class="dg-muted">no step {step_index}: the trace has {n} steps</span></div>'
    rec = trace.steps[step_index]
    if not 0 <= position < len(rec.argmax):
        return head + f'<span class="dg-muted">no position {position}: the canvas has {len(rec.argmax)}</span></div>'
    history = [r.argmax[position] for r in trace.steps[:step_index + 1] if r.canvas == rec.canvas]
    flips = sum(int(a != b) for a, b in zip(history, history[1:]))
    state = position_states(trace, step_index)[position]

    def piece(token_id):
        return _esc(token_piece(tokenizer, token_id))

    facts = [_kv("position", position), _kv("canvas · step", f"{rec.canvas + 1} · {rec.step}"),
             _kv("entropy", f"{float(rec.entropy[position]):.4f}"), _kv("fed in", piece(rec.noisy[position])),
             _kv("argmax", piece(rec.argmax[position])), _kv("sampled", piece(rec.sampled[position])),
             _kv("accepted", "yes" if rec.accepted[position] else "no"), _badge(state, STATE_COLORS[state]),
             _kv("argmax flips so far", flips)]
    return head + '<div class="dg-panel">' + "".join(facts) + "</div>" \
        + _topk_table(tokenizer, rec.topk_ids[position], rec.topk_probs[position]) + "</div>"


def text_view_html(trace, tokenizer) -> str:
    """Committed text so far: the thought muted and collapsible, then the answer."""
    head = CSS + '<div class="dg-view">'
    ids = trace.token_ids if trace.start is not None else []
    if not ids:
        return head + '<span class="dg-muted">no committed text yet</span></div>'
    reply = decode_reply(tokenizer, ids)
    parts = []
    if reply.thinking:
        status = "" if reply.thought_closed else (
            ' <span class="dg-warn">thinking filled the canvas: the thought never closed</span>' if trace.done
            else ' <span class="dg-muted">thinking…</span>')
        parts.append(f'<details class="dg-muted"><summary>thought ({len(reply.thought)} chars){status}</summary>'
                     f'<div class="dg-text">{_esc(reply.thought)}</div></details>')
    parts.append(f'<div class="dg-text">{_esc(reply.answer)}</div>')
    return head + "".join(parts) + "</div>"
