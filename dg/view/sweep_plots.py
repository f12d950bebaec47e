"""Figures of the latency-dial sweep (`python -m dg.bench.sweep`, assets/measurements/sweep.json).

Pure functions: the sweep's JSON (a dict) in, a plotly figure or a Markdown line out. Accuracy and wall
time against the step cap (report §9: the cap is a latency dial), steps per canvas by skill (adaptive
computation), and how fast each skill's argmax draft reaches the committed canvas (structured output).

    python -m pytest tests/view/test_sweep_plots.py -q
"""

import json
from pathlib import Path

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from dg.view.axes import PAD_DECADES, data_span, log_axis
from dg.view.theme import PLOT_AXES, PLOT_LAYOUT

SWEEP = Path(__file__).resolve().parents[2] / "assets" / "measurements" / "sweep.json"
SKILL_COLORS = {"sudoku": "#6366f1", "arithmetic": "#dc2626", "picture": "#0ea5e9", "json": "#16a34a",
                "story": "#f59e0b"}
LEGEND_ON_TOP = dict(orientation="h", yanchor="bottom", y=1.04, xanchor="left", x=0)
BAR_PAD_DECADES = 2 * PAD_DECADES  # a bar is a step wide: its half-width past its count, then the margin


def load_sweep(path: Path = SWEEP) -> dict:
    """The committed measurement; a one-line error naming the command when it is missing."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"no sweep at {path}: run `python -m dg.bench.sweep --out {path}`")
    return json.loads(Path(path).read_text())


def _styled(fig: go.Figure, title: str, **layout) -> go.Figure:
    fig.update_layout(**PLOT_LAYOUT)
    fig.update_layout(title_text=title, legend=LEGEND_ON_TOP, **layout)
    fig.update_xaxes(**PLOT_AXES)
    fig.update_yaxes(**PLOT_AXES)
    return fig


def made_by(sweep: dict) -> str:
    """Where the numbers come from: the command, its date, the machine, n per skill."""
    m = sweep["machine"]
    return (f"`{sweep['command']}` · {sweep['date'][:10]} · {m['processor']}, {m['threads']} thread, torch "
            f"{m['torch']} · {sweep['n_per_skill']} held-out draws per skill · {sweep['model']}")


def latency_dial(sweep: dict) -> go.Figure:
    """Accuracy (left) and median wall time per reply (right) against max_denoising_steps, per skill."""
    fig = make_subplots(rows=1, cols=2, subplot_titles=("accuracy", "median wall time per reply (ms)"))
    for skill, row in sweep["skills"].items():
        caps = [int(c) for c in row["caps"]]
        color = SKILL_COLORS.get(skill)
        for col, key, scale in ((1, "accuracy", 100.0), (2, "wall_ms", 1.0)):
            fig.add_trace(go.Scatter(x=caps, y=[r[key] * scale for r in row["caps"].values()], name=skill,
                                     legendgroup=skill, showlegend=col == 1, mode="lines+markers",
                                     line=dict(color=color)), row=1, col=col)
    fig.update_xaxes(title_text="max_denoising_steps (step cap)", **log_axis(min(sweep["caps"]), max(sweep["caps"])))
    fig.update_yaxes(title_text="% right", range=[0, 105], row=1, col=1)
    return _styled(fig, "The latency dial: step cap → accuracy and time", height=380)


def steps_by_skill(sweep: dict) -> go.Figure:
    """How many steps each canvas took at the largest cap, per skill (adaptive computation)."""
    fig = go.Figure()
    full = str(max(sweep["caps"]))
    for skill, row in sweep["skills"].items():
        hist = {int(k): v for k, v in row["steps_histogram"].items()}
        total = sum(hist.values())
        fig.add_trace(go.Bar(x=list(hist), y=[100 * v / total for v in hist.values()], name=skill,
                             marker_color=SKILL_COLORS.get(skill),
                             hovertemplate=f"{skill}: %{{y:.0f}}% of canvases took %{{x}} steps<extra></extra>"))
        fig.add_annotation(text=f"{skill} {row['caps'][full]['steps_per_canvas']:.2f}", showarrow=False,
                           xref="paper", yref="paper", x=1.0, y=1.0 - 0.08 * len(fig.layout.annotations),
                           xanchor="right", font=dict(color=SKILL_COLORS.get(skill)))
    cap = max(sweep["caps"])  # the axis spans 1 step to the cap, a bar's width past the data on either side
    fig.update_xaxes(title_text=f"steps the canvas took (cap {cap}: it stops when stable and confident)",
                     **log_axis(1, max(cap, *data_span(fig, "x")), pad_decades=BAR_PAD_DECADES))
    fig.update_yaxes(title_text="% of canvases")
    return _styled(fig, "Steps per canvas by skill (mean on the right)", barmode="group", height=360)


def convergence(sweep: dict, skills=("json", "story", "arithmetic")) -> go.Figure:
    """Share of the committed tokens the argmax draft holds after each step, per skill."""
    fig = go.Figure()
    for i, skill in enumerate(skills):  # wider and solid first: equal curves (JSON, story) stay both visible
        curve = sweep["skills"][skill]["convergence"][:8]
        fig.add_trace(go.Scatter(x=list(range(1, len(curve) + 1)), y=[100 * c for c in curve], name=skill,
                                 mode="lines+markers", line=dict(color=SKILL_COLORS.get(skill), width=8 - 2.5 * i,
                                                                 dash="solid" if i == 0 else "dash")))
    fig.update_xaxes(title_text="step", dtick=1)
    fig.update_yaxes(title_text="% of committed tokens already in the draft")
    return _styled(fig, "Structured output converges first", height=340)


def dial_line(sweep: dict) -> str:
    """One Markdown line: each skill's accuracy and time at cap 1, at the cap where it first reaches
    its best accuracy, and at the largest cap."""
    parts, full = [], str(max(sweep["caps"]))
    for skill, row in sweep["skills"].items():
        rows = row["caps"]
        best = max(r["accuracy"] for r in rows.values())
        first = next(c for c, r in rows.items() if r["accuracy"] >= best)
        parts.append(f"**{skill}** {rows['1']['accuracy']:.0%} at 1 step ({rows['1']['wall_ms']:.0f} ms), "
                     f"{best:.0%} from cap {first} ({rows[first]['wall_ms']:.0f} ms), "
                     f"{rows[full]['steps_per_canvas']:.2f} steps/canvas at cap {full}")
    return "; ".join(parts) + "."
