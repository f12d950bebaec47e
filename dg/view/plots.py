"""Plotly figures of a trace: entropy heatmap, settle steps, accepted per step, canvases, hybrid's verify
rounds, the race of diffusion, AR and hybrid.

Pure functions: a `Trace` in, a `plotly.graph_objects.Figure` out, titled with the metric it shows
(titles short enough for half of a 1024-px page) and transparent, so it reads in light and dark
themes. Steps are run steps counted from 1, as the replay slider counts them. Every figure also
renders for an empty or partial trace (the app draws them while a run streams).

    python -m pytest tests/view/test_plots.py -q
"""

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dg.view.render import channels
from dg.view import hybrid
from dg.view.theme import AR_COLOR, HYBRID_COLOR, PLOT_AXES, PLOT_LAYOUT, STATE_COLORS, THOUGHT_COLOR

LEGEND_ON_TOP = dict(orientation="h", yanchor="bottom", y=1.02, xanchor="left", x=0)  # clear of the x-axis title


def _styled(fig: go.Figure, title: str, **layout) -> go.Figure:
    """The theme's transparent layout, the title and any further layout."""
    fig.update_layout(**PLOT_LAYOUT)
    fig.update_layout(title_text=title, **layout)
    fig.update_xaxes(**PLOT_AXES)
    fig.update_yaxes(**PLOT_AXES)
    return fig


def _empty(title: str, message: str = "no steps yet") -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _styled(fig, title)


def _step_labels(steps) -> list[str]:
    return [f"run step {i + 1}: canvas {r.canvas + 1} · step {r.step}" for i, r in enumerate(steps)]


def _run_steps(steps) -> list[int]:
    return list(range(1, len(steps) + 1))


def entropy_heatmap(trace, canvas: int | None = None) -> go.Figure:
    """Per-position entropy of softmax(logits/τ): z is (positions, steps); canvases side by side."""
    steps = trace.steps if canvas is None else trace.steps_of(canvas)
    title = "Entropy per position and step" + ("" if canvas is None else f" (canvas {canvas + 1})")
    if not steps:
        return _empty(title)
    z = np.stack([r.entropy for r in steps], axis=1)  # (C, S)
    accepted = np.stack([r.accepted for r in steps], axis=1)  # (C, S)
    text = np.where(accepted, "accepted", "renoised")
    labels = np.array(_step_labels(steps))[None].repeat(z.shape[0], 0)  # (C, S)
    fig = go.Figure(go.Heatmap(
        z=z, x=_run_steps(steps), y=list(range(z.shape[0])), colorscale="Viridis",
        colorbar=dict(title="H (nats)"), text=text, customdata=labels,
        hovertemplate="position %{y}<br>%{customdata}<br>H=%{z:.3f}<br>%{text}<extra></extra>"))
    for i in range(1, len(steps)):
        if steps[i].canvas != steps[i - 1].canvas:
            fig.add_vline(x=i + 0.5, line=dict(color="white", width=2))  # between run steps i and i + 1
    return _styled(fig, title, xaxis_title="run step (canvases in order)", yaxis_title="canvas position",
                   yaxis=dict(autorange="reversed"))


def settle_matrix(trace) -> np.ndarray:
    """(K, C): the step (1-based) from which each position's argmax stopped changing in its canvas."""
    canvases = sorted({r.canvas for r in trace.steps})
    rows = []
    for k in canvases:
        argmax = np.stack([r.argmax for r in trace.steps_of(k)])  # (S, C)
        changed = np.vstack([np.ones((1, argmax.shape[1]), bool), argmax[1:] != argmax[:-1]])  # (S, C)
        last_change = argmax.shape[0] - 1 - np.argmax(changed[::-1], axis=0)
        rows.append(last_change + 1)
    return np.stack(rows) if rows else np.zeros((0, 0), dtype=int)


def settle_steps(trace) -> go.Figure:
    """Heatmap canvas × position of the step from which the argmax no longer changed."""
    title = "Settle step per position"
    z = settle_matrix(trace)
    if z.size == 0:
        return _empty(title)
    fig = go.Figure(go.Heatmap(
        z=z, x=list(range(z.shape[1])), y=[f"canvas {k + 1}" for k in range(z.shape[0])],
        colorscale="Magma", colorbar=dict(title="step"),
        hovertemplate="%{y}, position %{x}<br>argmax unchanged from step %{z} on<extra></extra>"))
    return _styled(fig, title, xaxis_title="canvas position (colour: the step its argmax stopped changing)",
                   yaxis=dict(autorange="reversed"))


def accepted_per_step(trace) -> go.Figure:
    """Accepted tokens per step (bars) and the entropy budget used, Σ H − max H over the bound (line)."""
    title = "Accepted per step, entropy budget used"
    if not trace.steps:
        return _empty(title)
    x = _run_steps(trace.steps)
    labels = _step_labels(trace.steps)
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    fig.add_trace(go.Bar(x=x, y=[r.n_accepted for r in trace.steps], name="accepted", customdata=labels,
                         marker_color=STATE_COLORS["accepted"],
                         hovertemplate="%{customdata}: %{y} accepted<extra></extra>"), secondary_y=False)
    used = [r.accepted_entropy / r.entropy_bound for r in trace.steps]
    fig.add_trace(go.Scatter(x=x, y=used, name="budget used (Σ H − max H) / bound", mode="lines+markers",
                             customdata=labels, line=dict(color=STATE_COLORS["remelted"]),
                             hovertemplate="%{customdata}: %{y:.0%} of the bound<extra></extra>"), secondary_y=True)
    _styled(fig, title, xaxis_title="run step (canvases in order)", legend=LEGEND_ON_TOP)
    fig.update_yaxes(title_text="accepted tokens", secondary_y=False)
    fig.update_yaxes(title_text="budget used", range=[0, 1.05], tickformat=".0%", secondary_y=True, showgrid=False)
    return fig


def canvas_token_shares(trace, tokenizer) -> list[dict]:
    """Per committed canvas: steps, stop reason, and its thought / answer token counts (pad excluded)."""
    pad = trace.start.pad_token_id if trace.start else None
    ids = [int(t) for c in trace.canvases for t in c.committed]
    chans = channels(tokenizer, ids)
    out, offset = [], 0
    for c in trace.canvases:
        kinds = [ch for t, ch in zip(c.committed, chans[offset:offset + len(c.committed)]) if int(t) != pad]
        offset += len(c.committed)
        out.append(dict(canvas=c.canvas, steps=c.steps, stop_reason=c.stop_reason,
                        thought=kinds.count("thought"), answer=kinds.count("answer")))
    return out


def canvas_timeline(trace, tokenizer) -> go.Figure:
    """Denoising steps per canvas, and the share of each canvas's tokens that were thought vs answer."""
    title = "Steps and tokens per canvas"
    rows = canvas_token_shares(trace, tokenizer)
    if not rows:
        return _empty(title, "no committed canvas yet")
    x = [f"canvas {r['canvas'] + 1}" for r in rows]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.12,
                        subplot_titles=("denoising steps", "tokens: thought vs answer"))
    fig.add_trace(go.Bar(x=x, y=[r["steps"] for r in rows], name="steps", marker_color=STATE_COLORS["committed"],
                         customdata=[r["stop_reason"] for r in rows],
                         hovertemplate="%{x}: %{y} steps (%{customdata})<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Bar(x=x, y=[r["thought"] for r in rows], name="thought", marker_color=THOUGHT_COLOR),
                  row=2, col=1)
    fig.add_trace(go.Bar(x=x, y=[r["answer"] for r in rows], name="answer", marker_color=STATE_COLORS["accepted"]),
                  row=2, col=1)
    fig.update_annotations(font_color=PLOT_LAYOUT["font"]["color"])  # the subplot titles
    return _styled(fig, title, barmode="stack")  # legend at the side: the subplot titles hold the top


def tokens_per_round(trace) -> go.Figure:
    """Hybrid: per verify round, the draft tokens AR kept and AR's own token (stacked), with the draft tokens
    it rejected beside them; the mean tokens per round in the title."""
    if not trace.rounds:
        return _empty("Tokens per verify round", "no verify round: a hybrid run has them")
    verdicts = [hybrid.verdict(trace, j) for j in range(len(trace.rounds))]
    x = list(range(1, len(verdicts) + 1))
    labels = [f"round {j}: canvas {v['round'].canvas + 1}, {v['round'].held} verified before"
              for j, v in zip(x, verdicts)]
    kept = [len(v["agreed"]) for v in verdicts]
    own = [int(v["bonus"] is not None or v["round"].bonus is not None) for v in verdicts]
    rejected = [max(len(v["round"].draft) - v["round"].held - k - o, 0) for v, k, o in zip(verdicts, kept, own)]
    fig = go.Figure()
    for name, y, state in (("draft = AR (kept)", kept, "agreed"), ("AR's own token", own, "bonus"),
                           ("rejected draft", rejected, "rejected")):
        fig.add_trace(go.Bar(x=x, y=y, name=name, marker_color=STATE_COLORS[state], customdata=labels,
                             hovertemplate=f"%{{customdata}}<br>%{{y}} {name}<extra></extra>",
                             offsetgroup="rejected" if state == "rejected" else "gained"))
    mean = trace.metrics()["tokens_per_round"]
    return _styled(fig, f"Tokens per verify round (mean {mean:.1f})", barmode="stack", legend=LEGEND_ON_TOP,
                   xaxis_title="verify round", yaxis_title="tokens")


def run_figures(trace, tokenizer) -> list[go.Figure]:
    """The Generate tab's four figures of a run: entropy, settle steps, accepted per step, and the canvas
    timeline (a hybrid run: its tokens per verify round)."""
    last = tokens_per_round(trace) if trace.mode == "hybrid" else canvas_timeline(trace, tokenizer)
    return [entropy_heatmap(trace), settle_steps(trace), accepted_per_step(trace), last]


def race_points(trace) -> tuple[list[float], list[int]]:
    """(wall seconds, tokens committed so far), starting at (0, 0): canvas commits, or AR's and hybrid's
    verified tokens; pad is not counted on any lane (as the metrics count tokens)."""
    times, counts = [0.0], [0]
    if trace.mode in ("ar", "hybrid"):
        pad = trace.start.pad_token_id if trace.start else None
        for r in trace.tokens:
            times.append(r.t)
            counts.append(counts[-1] + int(r.token_id != pad))
    else:
        for c in trace.canvases:
            times.append(c.t)
            counts.append(counts[-1] + c.tokens)
    return times, counts


RACE_LANES = {"diffusion": ("diffusion (per canvas)", STATE_COLORS["accepted"], "lines+markers"),
              "AR": ("AR (per token)", AR_COLOR, "lines"),
              "hybrid": ("hybrid (per verify round)", HYBRID_COLOR, "lines")}  # lane → legend, colour, plotly mode


def race_chart(lanes: dict) -> go.Figure:
    """Tokens committed vs wall time of each lane (name → trace: "diffusion", "AR", "hybrid"), each lane's
    speed over AR's in the title."""
    rates = {name: trace.metrics()["effective_tok_s"] for name, trace in lanes.items()}
    ar = rates.get("AR", 0.0)
    speedups = [f"{name} {rate / ar:.1f}×" for name, rate in rates.items() if name != "AR" and rate > 0 and ar > 0]
    title = f"Tokens vs wall time: {', '.join(speedups)} AR" if speedups else "Tokens vs wall time (speedup: n/a yet)"
    fig = go.Figure()
    for name, trace in lanes.items():
        label, color, mode = RACE_LANES.get(name, (name, STATE_COLORS["committed"], "lines"))
        t, n = race_points(trace)
        fig.add_trace(go.Scatter(x=t, y=n, name=f"{label}: {rates[name]:.1f} tok/s", mode=mode, line_shape="hv",
                                 line=dict(color=color)))
    return _styled(fig, title, xaxis_title="wall time (s)", yaxis_title="tokens committed (pad not counted)",
                   legend=LEGEND_ON_TOP)
