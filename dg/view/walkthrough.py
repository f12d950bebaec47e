"""The Learn tab's views: a noised answer as a row of tokens, and one recorded sampler step in six stages.

`walkthrough` splits a recorded step of a trace into the stages of Algorithm 1 (decode, temperature,
entropy, sort + bound, accept, renoise) with that step's real numbers, each as a picture an educator
can point at (canvas cells, entropy bars with the bound, the τ schedule; `dg.view.svg`) with its
numbers folded underneath; `instructive_step` picks a step worth explaining first. `token_row_html`
draws the forward process of `dg.noise` (or one prediction) as coloured tokens.

    python -m pytest tests/view/test_walkthrough.py -q
"""

import numpy as np
import torch

from dg.kernels.reference import entropy_bound_mask
from dg.trace import STOP_LABELS
from dg.view import svg
from dg.view.theme import STATE_COLORS, esc, fill, meter, piece_html, token_piece

STAGES = ("decode", "temperature", "entropy", "sort_bound", "accept", "renoise")


def token_row_html(tokenizer, ids, marks, clean, what: str) -> str:
    """Tokens as cells, the marked ones coloured (`what` is "replaced" or "recovered"); the clean token in
    each tooltip."""
    color = STATE_COLORS["accepted" if what == "recovered" else "changed"]
    colors = [color if mark else STATE_COLORS["noise"] for mark in marks]
    tips = [f"(clean: {token_piece(tokenizer, c)})" for c in clean]
    return (f'<div class="dg-view">{cells_row(tokenizer, ids, colors, tips)}'
            f'<div class="dg-muted">{sum(marks)}/{len(marks)} {what}</div></div>')


def _table(headers, rows) -> str:
    head = f'<tr>{"".join(f"<th>{esc(h)}</th>" for h in headers)}</tr>' if any(headers) else ""
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="dg-scroll"><table class="dg-bars">{head}{body}</table></div>'


def _stage_html(picture: str, caption: str, table: str) -> str:
    """A stage as an educator shows it: the picture, one line on how to read it, the numbers folded below."""
    return (f'<div class="dg-view">{picture}<div class="dg-muted">{caption}</div>'
            f"<details><summary>the numbers</summary>{table}</details></div>")


def _bar(value: float, scale: float, color: str) -> str:
    return meter(value / scale if scale > 0 else 0.0, color)


def _piece(tokenizer, token_id) -> str:
    return esc(token_piece(tokenizer, token_id))


def cells_row(tokenizer, ids, colors, tips=None, label: str = "") -> str:
    """Tokens as canvas cells (whole tokens, wrapping like text), each filled with its colour."""
    tips = tips or [""] * len(ids)
    cells = [f'<span class="dg-cell" style="display:inline-block;{fill(c)}" title="{esc(f"#{p} {tip}")}">'
             f"{piece_html(token_piece(tokenizer, t))}</span>" for p, (t, c, tip) in enumerate(zip(ids, colors, tips))]
    head = f'<div class="dg-clabel">{esc(label)}</div>' if label else ""
    return f'{head}<div class="dg-grid">{"".join(cells)}</div>'


def walkthrough(trace, tokenizer, step_index: int) -> list[dict]:
    """The six stages of one recorded sampler step (report Algorithm 1), each a picture with that step's
    numbers folded under it (`html`), a title, and the numbers as a dict (canvas and step from 1)."""
    if trace.mode == "ar":  # a hybrid run's draft steps are the sampler's own (its verified tokens pinned)
        raise ValueError(f"walkthrough explains a sampler step; this is a {trace.mode} trace")
    if not 0 <= step_index < len(trace.steps):
        raise ValueError(f"step_index must be in [0, {len(trace.steps) - 1}], got {step_index}")
    rec = trace.steps[step_index]
    previous = trace.steps[step_index - 1] if step_index > 0 else None
    previous = previous if previous is not None and previous.canvas == rec.canvas else None
    return [_decode_stage(tokenizer, rec, previous), _temperature_stage(trace, rec), _entropy_stage(tokenizer, rec),
            _bound_stage(rec), _accept_stage(tokenizer, rec), _renoise_stage(trace, tokenizer, rec, step_index)]


def instructive_step(trace) -> int:
    """The step to explain first: one that accepts some positions and renoises others (the most evenly
    split), after the first step of its canvas (so self-conditioning is on); 0 for a trace without such."""
    def score(i):
        rec = trace.steps[i]
        return min(rec.n_accepted, len(rec.accepted) - rec.n_accepted) + (0.5 if rec.step > 1 else 0.0)

    return max(range(len(trace.steps)), key=lambda i: (score(i), -i), default=0)


def _decode_stage(tokenizer, rec, previous) -> dict:
    kept = previous.accepted if previous is not None else np.zeros_like(rec.accepted)
    rows = [[pos, _piece(tokenizer, t), "kept (accepted last step)" if kept[pos] else "random"]
            for pos, t in enumerate(rec.noisy)]
    numbers = {"canvas": rec.canvas + 1, "step": rec.step, "canvas_length": len(rec.noisy),
               "kept_from_previous_step": int(kept.sum()), "random": int((~kept).sum()),
               "self_conditioning": previous is not None}
    sc = "with self-conditioning on the previous step's logits/τ" if previous is not None else \
        "no self-conditioning (first step of the canvas)"
    colors = [STATE_COLORS["accepted"] if k else STATE_COLORS["noise"] for k in kept]
    picture = cells_row(tokenizer, rec.noisy, colors, ["kept from the last step" if k else "random" for k in kept],
                        "the canvas fed to the decoder")
    caption = (f"Green: {int(kept.sum())} tokens the last step accepted; grey: {int((~kept).sum())} uniform random "
               "tokens. The decoder reads them all at once (bidirectional) and predicts every position.")
    return {"stage": "decode", "title": f"Decoder pass over the noisy canvas, {sc}",
            "html": _stage_html(picture, caption, _table(["position", "token fed in", "origin"], rows)),
            "numbers": numbers}


def _temperature_stage(trace, rec) -> dict:
    cfg = trace.start.config
    t_min, t_max, n_max = cfg.get("t_min"), cfg.get("t_max"), cfg.get("max_denoising_steps")
    numbers = {"temperature": rec.temperature, "t_min": t_min, "t_max": t_max, "max_denoising_steps": n_max,
               "steps_remaining": (n_max - rec.step + 1) if n_max else None}
    scale = (t_max - t_min) if t_max is not None and t_min is not None else 0.0
    meter = _bar(rec.temperature - (t_min or 0.0), scale, STATE_COLORS["changed"])
    rows = [["τ", f"{rec.temperature:.4f}", meter],
            ["schedule", f"t_min + (t_max − t_min) · remaining / N = {t_min} + ({t_max} − {t_min}) · "
                         f"{numbers['steps_remaining']}/{n_max}", ""]]
    picture, caption = "", "The schedule's settings are not in this trace."
    if None not in (t_min, t_max, n_max):
        steps = list(range(1, n_max + 1))
        taus = [t_min + (t_max - t_min) * (n_max - n + 1) / n_max for n in steps]
        picture = svg.line(steps, taus, mark=min(rec.step, n_max) - 1, mark_label=f"step {rec.step}: τ = "
                           f"{rec.temperature:.3f}", x_label=f"step of the canvas (1 … N = {n_max})", y_label="τ")
        caption = (f"τ falls linearly from t_max = {t_max} at step 1 towards t_min = {t_min}: early steps sample "
                   "boldly, later ones sharply. A canvas usually stops long before step N.")
    return {"stage": "temperature", "title": f"Temperature τ = {rec.temperature:.3f} (linear from t_max to t_min)",
            "html": _stage_html(picture, caption, _table(["", "value", "t_min → t_max"], rows)), "numbers": numbers}


def _entropy_stage(tokenizer, rec) -> dict:
    top = float(rec.entropy.max()) if len(rec.entropy) else 0.0
    rows = [[pos, _piece(tokenizer, rec.argmax[pos]), f"{float(h):.4f}", _bar(float(h), top, STATE_COLORS["noise"])]
            for pos, h in enumerate(rec.entropy)]
    numbers = {"entropy": [float(h) for h in rec.entropy], "mean_entropy": rec.mean_entropy,
               "min": float(rec.entropy.min()), "max": top}
    picture = svg.bars(rec.entropy, [STATE_COLORS["noise"]] * len(rec.entropy), threshold=rec.mean_entropy,
                       threshold_label=f"mean H = {rec.mean_entropy:.3f}", x_label="canvas position",
                       y_label="H (nats)")
    caption = "Each bar: how unsure the model is at that position. Low bars are the candidates to keep."
    return {"stage": "entropy", "title": f"Entropy of softmax(logits/τ) per position (mean {rec.mean_entropy:.3f})",
            "html": _stage_html(picture, caption, _table(["position", "argmax", "H (nats)", ""], rows)),
            "numbers": numbers}


def _bound_stage(rec) -> dict:
    entropy = torch.from_numpy(np.asarray(rec.entropy, dtype=np.float32))
    sorted_entropy, order = torch.sort(entropy)
    cumulative = torch.cumsum(sorted_entropy, dim=-1)
    lhs = cumulative - sorted_entropy  # Σ H_1..k − max H_1..k, since sorted ascending
    k = int(entropy_bound_mask(entropy[None], rec.entropy_bound).sum())
    rows = [[j + 1, int(order[j]), f"{float(sorted_entropy[j]):.4f}", f"{float(cumulative[j]):.4f}",
             f"{float(lhs[j]):.4f}", "accept" if float(lhs[j]) <= rec.entropy_bound else "—"]
            for j in range(len(order))]
    numbers = {"sorted_entropy": sorted_entropy.tolist(), "order": order.tolist(), "cumulative": cumulative.tolist(),
               "sum_minus_max": lhs.tolist(), "entropy_bound": rec.entropy_bound, "k": k}
    colors = [STATE_COLORS["accepted"] if j < k else STATE_COLORS["noise"] for j in range(len(order))]
    picture = svg.bars(sorted_entropy, colors, line=lhs.tolist(), line_label="Σ H − max H (running)",
                       threshold=rec.entropy_bound, threshold_label=f"bound {rec.entropy_bound:g}", log=True,
                       x_label="positions sorted by entropy (rank)", y_label="nats (log scale)")
    caption = (f"Bars: entropies from lowest to highest, on a log scale (they span decades). The red line adds "
               f"them up (minus the largest); the {k} green bars are those before it crosses the bound.")
    return {"stage": "sort_bound",
            "title": f"Sort by entropy; accept while Σ H − max H ≤ {rec.entropy_bound:g}: k = {k}",
            "html": _stage_html(picture, caption, _table(["rank", "position", "H", "Σ H", "Σ H − max H", ""], rows)),
            "numbers": numbers}


def _accept_stage(tokenizer, rec) -> dict:
    positions = [int(p) for p in np.flatnonzero(rec.accepted)]
    rows = [[p, _piece(tokenizer, rec.sampled[p]), _piece(tokenizer, rec.argmax[p]), f"{float(rec.entropy[p]):.4f}"]
            for p in positions]
    numbers = {"accepted": len(positions), "positions": positions,
               "tokens": [int(rec.sampled[p]) for p in positions], "accepted_entropy": rec.accepted_entropy}
    colors = [STATE_COLORS["accepted"] if a else STATE_COLORS["noise"] for a in rec.accepted]
    picture = cells_row(tokenizer, rec.sampled, colors, ["accepted" if a else "not accepted" for a in rec.accepted],
                        "the sampled candidate at every position")
    caption = f"Green: the {len(positions)} accepted positions keep their sampled token; grey ones are dropped."
    return {"stage": "accept", "title": f"Accept {len(positions)} positions: each keeps its sampled token",
            "html": _stage_html(picture, caption, _table(["position", "sampled", "argmax", "H"], rows)),
            "numbers": numbers}


def _renoise_stage(trace, tokenizer, rec, step_index) -> dict:
    positions = [int(p) for p in np.flatnonzero(~rec.accepted)]
    following = trace.steps[step_index + 1] if step_index + 1 < len(trace.steps) else None
    following = following if following is not None and following.canvas == rec.canvas else None
    numbers = {"renoised": len(positions), "positions": positions, "stop_reason": rec.stop_reason,
               "stable": rec.stable, "confident": rec.confident}
    keep = [STATE_COLORS["accepted"] if a else STATE_COLORS["noise"] for a in rec.accepted]
    before = cells_row(tokenizer, rec.sampled, keep, label="before: the sampled candidates (green = accepted)")
    if rec.stop_reason:
        note = (f"the canvas stops here ({STOP_LABELS.get(rec.stop_reason, rec.stop_reason)}): its argmax is committed "
                "and the renoised canvas is discarded")
        after = cells_row(tokenizer, rec.argmax, [STATE_COLORS["committed"]] * len(rec.argmax),
                          label="after: the argmax canvas is committed (no renoise)")
    else:
        note = "the next step's decoder reads accepted tokens plus fresh uniform random tokens"
        after = ""
    if following is not None:
        numbers["next_step_kept"] = int((following.noisy == rec.sampled)[rec.accepted].sum())
        after = cells_row(tokenizer, following.noisy, [STATE_COLORS["accepted"] if a else STATE_COLORS["changed"]
                                                       for a in rec.accepted],
                          label="after: the next step's input (orange = fresh uniform random tokens)")
    rows = [["renoised positions", len(positions)], ["accepted kept", rec.n_accepted], ["then", esc(note)]]
    caption = f"{len(positions)} positions become uniform random tokens again; {rec.n_accepted} stay. Then: {note}."
    return {"stage": "renoise", "title": f"Renoise {len(positions)} positions with uniform random tokens",
            "html": _stage_html(before + after, caption, _table(["", ""], rows)), "numbers": numbers}
