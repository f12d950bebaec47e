"""HTML views of a trace: the canvas, its legend, the step panel, a token inspector, the text.

Pure functions: a `Trace` (and the tokenizer) in, one HTML fragment out (no scripts, every token
escaped), styled by the classes of `theme.CSS`, which the page carries once. The app re-renders them
as the sampler streams records; `canvas_cells` also feeds the GIF in `export.py`. Steps are counted
from 1 everywhere a person reads them ("run step 12 of 40", "canvas 2 · step 4"); `step_index`
arguments are 0-based list indices into `trace.steps`.

    python -m pytest tests/view/test_render.py -q
"""

import numpy as np
import torch

from dg.passes import after_eos
from dg.prompts import THOUGHT_CLOSE, THOUGHT_OPEN, decode_reply
from dg.trace import STOP_LABELS
from dg.trace import Trace
from dg.view import hybrid
from dg.view.theme import STATE_COLORS, STATE_SHORT, THOUGHT_MARK, TOKEN_STATES, esc, fill, meter, mode_states, \
    piece_html, plural, token_piece

SHOWS = ("argmax", "noisy", "sampled")


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
    eos_ids = trace.start.eos_token_ids if trace.start else []
    padded = after_eos(torch.tensor(rec.argmax), eos_ids).numpy()
    states = []
    for pos in range(len(rec.argmax)):
        if rec.pinned is not None and rec.pinned[pos]:
            states.append("pinned")
        elif padded[pos]:
            states.append("pad")
        elif rec.accepted[pos]:
            states.append("accepted")
        elif ever_accepted[pos]:
            states.append("remelted")
        elif previous[pos] != rec.argmax[pos]:
            states.append("changed")
        else:
            states.append("noise")
    return hybrid.round_states(trace, i, states) if trace.mode == "hybrid" else states


def canvas_cells(trace, tokenizer, step_index: int | None = None, show: str = "argmax") -> list[dict]:
    """One dict per live canvas position: pos, id, piece, state, entropy, channel (also used by the GIF).

    For an AR trace: one committed cell per token up to `step_index` (all of them when None).
    """
    if show not in SHOWS:
        raise ValueError(f"show must be one of {SHOWS}, got {show!r}")
    if trace.mode == "ar":
        records = trace.tokens if step_index is None else trace.tokens[:step_index + 1]
        chans = channels(tokenizer, [r.token_id for r in records])
        return [dict(pos=r.index, id=r.token_id, piece=token_piece(tokenizer, r.token_id), state="committed",
                     entropy=r.entropy, channel=chan) for r, chan in zip(records, chans)]
    i = _resolve_step(trace, step_index)
    if i is None:
        return []
    rec = trace.steps[i]
    ids = hybrid.shown_ids(trace, i, rec.argmax) if trace.mode == "hybrid" and show == "argmax" else getattr(rec, show)
    prefix = [int(t) for _, row in _done_rows(trace, rec.canvas) for t in row]
    chans = channels(tokenizer, prefix + [int(t) for t in rec.argmax])[len(prefix):]
    return [dict(pos=pos, id=int(ids[pos]), piece=token_piece(tokenizer, ids[pos]), state=state,
                 entropy=float(rec.entropy[pos]), channel=chans[pos])
            for pos, state in enumerate(position_states(trace, i))]


def trace_until(trace, step_index: int | None) -> Trace:
    """The run as it stood when step `step_index` had finished: its steps so far and the canvases
    committed by then (the whole trace for the last step)."""
    i = _resolve_step(trace, step_index)
    if i is None or i == len(trace.steps) - 1:
        return trace
    if trace.mode == "hybrid":
        return hybrid.trace_until(trace, i)
    rec = trace.steps[i]
    committed = [c for c in trace.canvases if c.canvas < rec.canvas or (c.canvas == rec.canvas and rec.stop_reason)]
    return Trace(start=trace.start, steps=trace.steps[:i + 1], canvases=committed)


def _cell(pos, piece, state, channel, tip, inspected: bool = False) -> str:
    classes = " dg-thought" * (channel == "thought") + " dg-inspected" * inspected
    return f'<div class="dg-cell dg-{state}{classes}" data-pos="{pos}" title="{esc(tip)}">{piece_html(piece)}</div>'


GRID_OPEN = '<div class="dg-grid">'  # cells as wide as their token, wrapping like text: whole tokens at any length


def _done_rows(trace, before: int) -> list[tuple[int, list[int]]]:
    """(canvas, token ids) of the canvases before `before`: committed ones, or a hybrid run's verified tokens."""
    if trace.mode == "hybrid":
        return hybrid.verified_rows(trace, before)
    return [(c.canvas, [int(t) for t in c.committed]) for c in trace.canvases if c.canvas < before]


def _committed_rows(trace, tokenizer, before: int) -> str:
    rows = []
    done = _done_rows(trace, before)
    chans, offset = channels(tokenizer, [t for _, row in done for t in row]), 0
    pad = trace.start.pad_token_id if trace.start else None
    color = STATE_COLORS["verified" if trace.mode == "hybrid" else "committed"]
    records = {c.canvas: c for c in trace.canvases}
    for k, row in done:
        spans = []
        for j, token_id in enumerate(row):
            if token_id != pad:
                thought = " dg-thought" if chans[offset + j] == "thought" else ""
                spans.append(f'<span class="dg-tok{thought}" style="border-color:{color}">'
                             f"{piece_html(token_piece(tokenizer, token_id))}</span>")
        offset += len(row)
        c = records.get(k)
        label = (f"canvas {k + 1} · {plural(c.steps, 'step')} · {STOP_LABELS.get(c.stop_reason, c.stop_reason)}"
                 if c is not None else f"canvas {k + 1} · verified by AR")
        rows.append(f'<div class="dg-crow"><span class="dg-clabel">{esc(label)}</span>{"".join(spans)}</div>')
    return f'<div class="dg-committed-rows">{"".join(rows)}</div>' if rows else ""


IDLE = "No run yet: pick an example (or type a prompt), then Generate."


# A view sent as a list of HTML fragments (`canvas_parts`) and drawn by the page as their concatenation.
# Gradio streams a list by its changed items, so a live frame carries only the cells that changed: a
# 256-token canvas step costs the cells it moved, not the whole canvas. The fragments stay data to the
# page's template (`value` is a variable there), never template source.
PARTS_TEMPLATE = "${value.join('')}"


def canvas_parts(trace, tokenizer, step_index: int | None = None, *, show="argmax", title: str = "",
                 inspect: int | None = None) -> list[str]:
    """The live canvas as coloured cells, committed canvases compactly above it, one fragment per cell
    (`canvas_html` joins them); `inspect` outlines the cell the inspector shows."""
    head = '<div class="dg-view">' + (f'<div class="dg-title">{esc(title)}</div>' if title else "")
    if trace.start is None:
        return [head, '<div class="dg-muted">The canvas appears here: random tokens at first, then the '
                      'sampler keeps the confident ones, step by step.</div></div>']
    cells = canvas_cells(trace, tokenizer, step_index, show)
    if trace.mode == "ar":
        label = f'<div class="dg-clabel">AR · {plural(len(cells), "token")}, one per forward</div>'
        if not cells:
            return [head + label, '<div class="dg-muted">waiting for first token…</div></div>']
        return [head + label, GRID_OPEN, *_cells(cells, "AR token"), "</div></div>"]
    if not cells:
        wait = [f'<div class="dg-cell dg-waiting" data-pos="{p}" title="waiting for first step">·</div>'
                for p in range(trace.start.canvas_length)]
        return [head, '<div class="dg-muted">waiting for first step…</div>', GRID_OPEN, *wait, "</div></div>"]
    i = _resolve_step(trace, step_index)
    rec = trace.steps[i]
    verify = hybrid.round_label(trace, i) if trace.mode == "hybrid" else ""
    label = (f'<div class="dg-clabel">canvas {rec.canvas + 1} · step {rec.step} · showing {show} · '
             f'run step {i + 1} of {len(trace.steps)}{esc(verify)}</div>')
    return [head + _committed_rows(trace, tokenizer, rec.canvas), label, GRID_OPEN,
            *_cells(cells, inspect=inspect), "</div></div>"]


def canvas_html(trace, tokenizer, step_index: int | None = None, *, show="argmax", title: str = "",
                inspect: int | None = None) -> str:
    """`canvas_parts` as one HTML fragment."""
    return "".join(canvas_parts(trace, tokenizer, step_index, show=show, title=title, inspect=inspect))


def _cells(cells: list[dict], what: str | None = None, inspect: int | None = None) -> list[str]:
    """Cells with a tooltip: position, entropy to 2 decimals, and the state in short (or `what` the token
    is; the cell shows the token, the legend each state's whole meaning). A settled cell reads the same
    from step to step, so a live frame does not resend it."""
    return [_cell(c["pos"], c["piece"], c["state"], c["channel"],
                  f'#{c["pos"]} · H={c["entropy"]:.2f} · {what or STATE_SHORT[c["state"]]}'
                  + (" · thought" if c["channel"] == "thought" and what is None else ""), c["pos"] == inspect)
            for c in cells]


def legend_html(mode: str | None = None) -> str:
    """Each token state a run of `mode` can show (every state when None: a page of any run), with its colour and
    a few visible words (the full meaning in the tooltip), and the thought mark."""
    states = TOKEN_STATES if mode is None else mode_states(mode)
    items = [f'<span class="dg-li" data-state="{s.name}"><span class="dg-cell dg-{s.name}" style="{fill(s.color)}" '
             f'title="{esc(s.help)}">{s.name}</span><span class="dg-what">{esc(s.short)}</span></span>'
             for s in states]
    items.append('<span class="dg-li" data-state="thought"><span class="dg-cell dg-thought" '
                 'style="border-color:#94a3b8" title="inside &lt;|channel&gt;thought … &lt;channel|&gt;">thought</span>'
                 f'<span class="dg-what">{THOUGHT_MARK}</span></span>')
    return '<div class="dg-view dg-legend">' + "".join(items) + "</div>"


def _kv(key, value, tip: str = "") -> str:
    title = f' title="{esc(tip)}"' if tip else ""
    return f'<span class="dg-kv"{title}>{esc(key)} <b>{value}</b></span>'


def _badge(text, color) -> str:
    return f'<span class="dg-badge" style="{fill(color)}">{esc(text)}</span>'


HELD_BADGE = '<span class="dg-badge dg-held" aria-hidden="true">&nbsp;</span>'  # a badge's height, unseen


def _group(name: str) -> str:
    return f'<span class="dg-group">{esc(name)}</span>'


def _run_so_far(trace, pending_canvas: int | None = None) -> str:
    """Whole-run counters of a (possibly partial) trace: elapsed, steps, NFE, tokens, and TPF and tok/s
    once a token is committed."""
    m = trace.metrics()
    parts = [_kv("elapsed", f'{m["wall_s"]:.2f} s'), _kv("steps", m["total_steps"]),
             _kv("NFE", m["nfe"], "decoder + encoder forwards"), _kv("tokens committed", m["tokens"])]
    if m["tokens"]:
        tpf = ("tokens / NFE: hybrid counts every pass" if trace.mode == "hybrid"
               else "tokens / (steps + K − 1), report §3.4")
        parts += [_kv("TPF", f'{m["tpf"]:.2f}', tpf),
                  _kv("tok/s", f'{m["effective_tok_s"]:.1f}', "committed tokens / elapsed")]
    elif pending_canvas is not None:
        parts.append(f'<span class="dg-muted">canvas {pending_canvas + 1} still denoising: tokens count when '
                     "it commits</span>")
    return "".join(parts)


def step_panel_html(trace, step_index: int | None = None) -> str:
    """This step's values (canvas k/K, step n/N, τ, accepted, entropy, stable), a hybrid run's verify round, the
    badges, then the run up to it: one row each, every row at every step of a run (nothing jumps as it plays)."""
    head = '<div class="dg-view dg-panel">'
    if trace.start is None:
        return head + f'<span class="dg-muted">{esc(IDLE)}</span></div>'
    if trace.mode == "ar" and trace.tokens:
        n = len(trace.tokens) if step_index is None else min(step_index + 1, len(trace.tokens))
        rec = trace.tokens[n - 1]
        return (head + _group("this token") + _kv("AR token", f"{n}/{trace.start.max_new_tokens}")
                + _kv("entropy", f"{rec.entropy:.3f}") + _group("run so far") + _run_so_far(trace) + "</div>")
    i = _resolve_step(trace, step_index)
    if i is None:
        return head + '<span class="dg-muted">waiting for first step…</span></div>'
    rec, cfg = trace.steps[i], trace.start.config
    parts = [_group("this step"), _kv("canvas", f"{rec.canvas + 1}/{trace.start.max_canvases}"),
             _kv("step", f'{rec.step}/{cfg.get("max_denoising_steps", "?")}'),
             _kv("τ", f"{rec.temperature:.3f}"),
             _kv("accepted", f"{rec.n_accepted}/{len(rec.accepted)}", "positions this step keeps (entropy bound)"),
             _kv("entropy budget", f"{meter(rec.accepted_entropy / rec.entropy_bound, STATE_COLORS['accepted'])} "
                 f"{rec.accepted_entropy:.3f} / {rec.entropy_bound:g}", "Σ H − max H of the accepted, ≤ the bound"),
             _kv("mean H", f'{rec.mean_entropy:.4f} {"&lt;" if rec.confident else "≥"} '
                 f'{cfg.get("confidence_threshold", float("nan")):g}'),
             _kv("stable", "yes" if rec.stable else "no")]
    rows = ["".join(parts)]
    if trace.mode == "hybrid":  # a row of its own, drawn at every step: its facts come and go, the row stays
        facts = hybrid.round_facts(trace, i)
        if facts:  # the round's number alone: a live run has no known total, so no "7/7" while it runs
            facts["round"] = hybrid.round_index(trace, i) + 1
        facts = [_kv(k, v) for k, v in facts.items()]
        waiting = '<span class="dg-muted">AR has not verified this draft yet</span>'
        rows.append(_group("verify round") + "".join(facts or [waiting]))
    so_far = trace_until(trace, i)
    end = trace.end.finish_reason if trace.end is not None and so_far is trace else None
    rows += [_badges(trace, rec, end),
             _group("run up to this step") + _run_so_far(so_far, None if rec.stop_reason else rec.canvas)]
    return "".join(f"{head}{row}</div>" for row in rows)


def _badges(trace, rec, end: str | None) -> str:
    """The badges' row: why the step's canvas stopped (and its EOS), a run ended on an all-pad canvas. It is
    drawn at every step, one unseen badge high when the step has none, so the panel keeps its rows."""
    badges = []
    if rec.stop_reason:
        badges.append(_badge(STOP_LABELS.get(rec.stop_reason, rec.stop_reason), STATE_COLORS["committed"]))
        canvas = next((c for c in trace.canvases if c.canvas == rec.canvas), None)
        if canvas is not None and canvas.eos:
            badges.append(_badge(STOP_LABELS["eos"], STATE_COLORS["pad"]))
    if end == "pad_canvas":
        badges.append(_badge(f"run ended: {STOP_LABELS.get(end, end)}", STATE_COLORS["pad"]))
    return "".join(badges) or HELD_BADGE


def _topk_table(tokenizer, ids, probs) -> str:
    rows = [f"<tr><td>{esc(token_piece(tokenizer, t))}</td><td>{meter(float(p), STATE_COLORS['accepted'])}</td>"
            f"<td>{float(p):.3f}</td></tr>" for t, p in zip(ids, probs)]
    return '<table class="dg-bars">' + "".join(rows) + "</table>"


def _ar_inspector(trace, tokenizer, index: int) -> str:
    if not 0 <= index < len(trace.tokens):
        return f'<span class="dg-muted">no AR token {index} (have {len(trace.tokens)})</span>'
    rec = trace.tokens[index]
    return (_kv("token", esc(token_piece(tokenizer, rec.token_id))) + " " + _kv("entropy", f"{rec.entropy:.3f}")
            + _topk_table(tokenizer, rec.topk_ids, rec.topk_probs))


def inspector_html(trace, tokenizer, step_index: int, position: int) -> str:
    """One position at one step: top-k candidates, entropy, fed/argmax/sampled, accepted, argmax flips."""
    head = '<div class="dg-view">'
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
        return esc(token_piece(tokenizer, token_id))

    facts = [_kv("position", position), _kv("canvas", rec.canvas + 1) + " · " + _kv("step", rec.step),
             _kv("run step", f"{step_index + 1} of {len(trace.steps)}"),
             _kv("entropy", f"{float(rec.entropy[position]):.4f}"), _kv("fed in", piece(rec.noisy[position])),
             _kv("argmax", piece(rec.argmax[position])), _kv("sampled", piece(rec.sampled[position])),
             _kv("accepted", "yes" if rec.accepted[position] else "no"), _badge(state, STATE_COLORS[state]),
             _kv("argmax flips so far", flips)]
    return head + '<div class="dg-panel">' + "".join(facts) + "</div>" + '<div class="dg-scroll">' \
        + _topk_table(tokenizer, rec.topk_ids[position], rec.topk_probs[position]) + "</div></div>"


def text_view_html(trace, tokenizer) -> str:
    """Committed text so far: the thought muted and collapsible, then the answer."""
    head = '<div class="dg-view">'
    ids = trace.token_ids if trace.start is not None else []
    if not ids:
        said = (f"the run ended with no text (finish: {trace.end.finish_reason})" if trace.done
                else "no committed text yet")
        return head + f'<span class="dg-muted">{said}</span></div>'
    reply = decode_reply(tokenizer, ids)
    parts = []
    if reply.thinking:
        status = "" if reply.thought_closed else (
            ' <span class="dg-warn">thinking filled the canvas: the thought never closed</span>' if trace.done
            else ' <span class="dg-muted">thinking…</span>')
        parts.append(f'<details class="dg-muted"><summary>thought ({len(reply.thought)} chars){status}</summary>'
                     f'<div class="dg-text">{esc(reply.thought)}</div></details>')
    if reply.answer.strip() or not trace.done:
        parts.append(f'<div class="dg-text dg-answer">{esc(reply.answer)}</div>')
    else:
        parts.append('<div class="dg-text dg-answer dg-muted">no answer after the thought</div>')
    return head + "".join(parts) + "</div>"


def check_html(reference: str, correct: bool) -> str:
    """A skill example's reference answer beside the output, with ✓ (the skill's scorer accepts the
    answer) or ✗."""
    color = STATE_COLORS["accepted"] if correct else STATE_COLORS["remelted"]
    mark = "✓ matches the reference" if correct else "✗ differs from the reference"
    return (f'<div class="dg-view dg-ref" style="border-color:{color}"><b style="color:{color}">{mark}</b>'
            f'<div class="dg-muted">reference answer</div><div class="dg-text">{esc(reference)}</div></div>')
