"""The Learn tab's views: a noised answer as a row of tokens, and one recorded sampler step in six stages.

`walkthrough` splits a recorded step of a trace into the stages of Algorithm 1 (decode, temperature,
entropy, sort + bound, accept, renoise) with that step's real numbers, each as a small HTML table;
`token_row_html` draws the forward process of `dg.noise` (or one prediction) as coloured tokens.

    python -m pytest tests/view/test_walkthrough.py -q
"""

import numpy as np
import torch

from dg.kernels.reference import entropy_bound_mask
from dg.trace import STOP_LABELS
from dg.view.theme import STATE_COLORS, esc, fill, meter, token_piece

STAGES = ("decode", "temperature", "entropy", "sort_bound", "accept", "renoise")


def token_row_html(tokenizer, ids, marks, clean, what: str) -> str:
    """Tokens as cells, the marked ones coloured (`what` is "replaced" or "recovered"); the clean token in
    each tooltip."""
    color = STATE_COLORS["accepted" if what == "recovered" else "changed"]
    cells = []
    for pos, (token_id, mark) in enumerate(zip(ids, marks)):
        piece = token_piece(tokenizer, token_id)
        tip = f"#{pos} {piece} (clean: {token_piece(tokenizer, clean[pos])})"
        cells.append(f'<span class="dg-cell" style="display:inline-block;margin:2px;'
                     f'{fill(color if mark else STATE_COLORS["noise"])}" title="{esc(tip)}">{esc(piece)}</span>')
    return f'<div class="dg-view">{"".join(cells)}<div class="dg-muted">{sum(marks)}/{len(marks)} {what}</div></div>'


def _table(headers, rows) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<div class="dg-view"><table class="dg-bars"><tr>{head}</tr>{body}</table></div>'


def _bar(value: float, scale: float, color: str) -> str:
    return meter(value / scale if scale > 0 else 0.0, color)


def _piece(tokenizer, token_id) -> str:
    return esc(token_piece(tokenizer, token_id))


def walkthrough(trace, tokenizer, step_index: int) -> list[dict]:
    """The six stages of one recorded sampler step (report Algorithm 1), each with that step's numbers."""
    if trace.mode != "diffusion":
        raise ValueError(f"walkthrough explains a diffusion step; this is a {trace.mode} trace")
    if not 0 <= step_index < len(trace.steps):
        raise ValueError(f"step_index must be in [0, {len(trace.steps) - 1}], got {step_index}")
    rec = trace.steps[step_index]
    previous = trace.steps[step_index - 1] if step_index > 0 else None
    previous = previous if previous is not None and previous.canvas == rec.canvas else None
    return [_decode_stage(tokenizer, rec, previous), _temperature_stage(trace, rec), _entropy_stage(tokenizer, rec),
            _bound_stage(rec), _accept_stage(tokenizer, rec), _renoise_stage(trace, rec, step_index)]


def _decode_stage(tokenizer, rec, previous) -> dict:
    kept = previous.accepted if previous is not None else np.zeros_like(rec.accepted)
    rows = [[pos, _piece(tokenizer, t), "kept (accepted last step)" if kept[pos] else "random"]
            for pos, t in enumerate(rec.noisy)]
    numbers = {"canvas": rec.canvas, "step": rec.step, "canvas_length": len(rec.noisy),
               "kept_from_previous_step": int(kept.sum()), "random": int((~kept).sum()),
               "self_conditioning": previous is not None}
    sc = "with self-conditioning on the previous step's logits/τ" if previous is not None else \
        "no self-conditioning (first step of the canvas)"
    return {"stage": "decode", "title": f"Decoder pass over the noisy canvas, {sc}",
            "html": _table(["position", "token fed in", "origin"], rows), "numbers": numbers}


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
    return {"stage": "temperature", "title": f"Temperature τ = {rec.temperature:.3f} (linear from t_max to t_min)",
            "html": _table(["", "value", "t_min → t_max"], rows), "numbers": numbers}


def _entropy_stage(tokenizer, rec) -> dict:
    top = float(rec.entropy.max()) if len(rec.entropy) else 0.0
    rows = [[pos, _piece(tokenizer, rec.argmax[pos]), f"{float(h):.4f}", _bar(float(h), top, STATE_COLORS["noise"])]
            for pos, h in enumerate(rec.entropy)]
    numbers = {"entropy": [float(h) for h in rec.entropy], "mean_entropy": rec.mean_entropy,
               "min": float(rec.entropy.min()), "max": top}
    return {"stage": "entropy", "title": f"Entropy of softmax(logits/τ) per position (mean {rec.mean_entropy:.3f})",
            "html": _table(["position", "argmax", "H (nats)", ""], rows), "numbers": numbers}


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
    return {"stage": "sort_bound",
            "title": f"Sort by entropy; accept while Σ H − max H ≤ {rec.entropy_bound:g}: k = {k}",
            "html": _table(["rank", "position", "H", "Σ H", "Σ H − max H", ""], rows), "numbers": numbers}


def _accept_stage(tokenizer, rec) -> dict:
    positions = [int(p) for p in np.flatnonzero(rec.accepted)]
    rows = [[p, _piece(tokenizer, rec.sampled[p]), _piece(tokenizer, rec.argmax[p]), f"{float(rec.entropy[p]):.4f}"]
            for p in positions]
    numbers = {"accepted": len(positions), "positions": positions,
               "tokens": [int(rec.sampled[p]) for p in positions], "accepted_entropy": rec.accepted_entropy}
    return {"stage": "accept", "title": f"Accept {len(positions)} positions: each keeps its sampled token",
            "html": _table(["position", "sampled", "argmax", "H"], rows), "numbers": numbers}


def _renoise_stage(trace, rec, step_index) -> dict:
    positions = [int(p) for p in np.flatnonzero(~rec.accepted)]
    following = trace.steps[step_index + 1] if step_index + 1 < len(trace.steps) else None
    following = following if following is not None and following.canvas == rec.canvas else None
    numbers = {"renoised": len(positions), "positions": positions, "stop_reason": rec.stop_reason,
               "stable": rec.stable, "confident": rec.confident}
    if rec.stop_reason:
        note = (f"the canvas stops here ({STOP_LABELS.get(rec.stop_reason, rec.stop_reason)}): its argmax is committed "
                "and the renoised canvas is discarded")
    else:
        note = "the next step's decoder reads accepted tokens plus fresh uniform random tokens"
    if following is not None:
        numbers["next_step_kept"] = int((following.noisy == rec.sampled)[rec.accepted].sum())
    rows = [["renoised positions", len(positions)], ["accepted kept", rec.n_accepted], ["then", esc(note)]]
    return {"stage": "renoise", "title": f"Renoise {len(positions)} positions with uniform random tokens",
            "html": _table(["", ""], rows), "numbers": numbers}
