"""The roofline, drawn: where an AR token and a canvas step sit under a device's roofs (dg.roofline).

Pure functions: a model shape, a device and the settings in; a plotly figure or Markdown out. The roofline
figure puts each pass at its arithmetic intensity (FLOPs per byte of weights read) under the two roofs
(bandwidth × intensity, and peak FLOP/s), and each measured figure at the FLOP/s it achieved (its pass's
FLOPs / its measured time); the second figure is the tokens/s bound of both modes against concurrent users.

    python -m pytest tests/view/test_roofline.py -q
"""

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import plotly.graph_objects as go

from dg import roofline
from dg.roofline import Bound, Device, ModelShape
from dg.view.axes import data_span, log_axis
from dg.view.theme import AR_COLOR, INK, PLOT_AXES, PLOT_LAYOUT, STATE_COLORS

DIFFUSION_COLOR = STATE_COLORS["committed"]
REPORT_COLOR = "#dc2626"  # the report's measured crossover, against the bounds' own
LEGEND_ON_TOP = dict(orientation="h", yanchor="bottom", y=1.04, xanchor="left", x=0)
MEASUREMENTS = Path(__file__).resolve().parents[2] / "assets" / "measurements"  # gpu-check-*.json: on a GPU
LEGEND_BELOW = dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0)  # many entries: clear of the title


@dataclass(frozen=True)
class Measured:
    """A measured pass of one user (batch 1): `mode` "ar" (one token) or "step" (one canvas step), its
    seconds, where from. It is placed against the one-user bound, whatever the setting's users."""

    label: str
    mode: str
    seconds: float


@dataclass(frozen=True)
class Setting:
    model: ModelShape
    device: Device
    dtype: str
    tpf: float
    users: int = 1
    canvas: int | None = None
    experts_per_canvas: float | None = None

    def bounds(self) -> dict:
        return roofline.tok_s_bounds(self.model, self.device, self.dtype, self.tpf, self.users, canvas=self.canvas,
                                     experts_per_canvas=self.experts_per_canvas)


def _one_user(setting: Setting) -> dict:
    """The bounds a batch-1 measurement is placed against."""
    return replace(setting, users=1).bounds()


def _styled(fig: go.Figure, title: str, legend: dict = LEGEND_ON_TOP, **layout) -> go.Figure:
    fig.update_layout(**PLOT_LAYOUT)
    fig.update_layout(title_text=title, legend=legend, **layout)
    fig.update_xaxes(**PLOT_AXES)
    fig.update_yaxes(**PLOT_AXES)
    return fig


def roofline_figure(setting: Setting, measured: list[Measured] = ()) -> go.Figure:
    """Attainable TFLOP/s against FLOPs per byte, the two passes' bounds and the measured figures."""
    b = setting.bounds()
    passes = {"ar": ("AR token", b["ar_bound"], AR_COLOR), "step": ("canvas step", b["step_bound"], DIFFUSION_COLOR)}
    peak, bw = setting.device.peak_tflop_s(setting.dtype), setting.device.bandwidth_gb_s
    lo = min(p[1].intensity for p in passes.values()) / 4
    hi = max(max(p[1].intensity for p in passes.values()) * 4, 4e3 * peak / bw)
    x = np.geomspace(lo, hi, 200)
    fig = go.Figure(go.Scatter(x=x, y=np.minimum(peak, bw * x / 1e3), name=f"{setting.device.name} roof",
                               mode="lines", line=dict(color="#94a3b8", width=3)))
    for mode, (name, bound, color) in passes.items():
        fig.add_trace(go.Scatter(x=[bound.intensity], y=[bound.flops / bound.seconds / 1e12], mode="markers",
                                 name=f"{name} bound ({bound.binds})", marker=dict(color=color, size=14)))
    one = _one_user(setting)
    for m in measured if setting.users == 1 else ():  # batch-1 figures sit on the batch-1 roofline only
        name, bound, color = passes[m.mode][0], one[f"{m.mode}_bound"], passes[m.mode][2]
        fig.add_trace(go.Scatter(x=[bound.intensity], y=[bound.flops / m.seconds / 1e12], mode="markers",
                                 name=f"{m.label}: {roofline.fraction(m.seconds, bound):.0%} of bound",
                                 marker=dict(color=color, size=12, symbol="x")))
    fig.update_xaxes(title_text="arithmetic intensity (FLOPs per byte of weights)", **log_axis(*data_span(fig, "x")))
    fig.update_yaxes(title_text="TFLOP/s", **log_axis(*data_span(fig, "y")))
    return _styled(fig, f"Roofline: {setting.model.name} on {setting.device.name}, {setting.dtype}", LEGEND_BELOW,
                   height=520, margin=dict(b=170))


def _users_line(fig: go.Figure, users: int, text: str, dash: str, color: str, end: str, span: list) -> None:
    """A vertical line at `users` (data units: plotly places a shape on a log axis by its value), labelled at its
    top ("end") or bottom ("start") end, the label part of the shape so it sits on the line: on the line's right
    in the left half of the axis `span` (log10 units), on its left in the right half, so it is never cut."""
    right_half = math.log10(users) > (span[0] + span[1]) / 2
    fig.add_shape(type="line", x0=users, x1=users, xref="x", y0=0, y1=1, yref="y domain",
                  line=dict(dash=dash, color=color, width=2),
                  label=dict(text=text, textposition=end, textangle=0, xanchor="right" if right_half else "left",
                             font=dict(color=color)))


def users_figure(setting: Setting, report_crossover: int | None = None, most: int = 512) -> go.Figure:
    """Tokens/s bounds of AR and diffusion against concurrent users, the bounds' crossover marked."""
    users = sorted({int(u) for u in np.geomspace(1, most, 40)})
    rows = [roofline.tok_s_bounds(setting.model, setting.device, setting.dtype, setting.tpf, u,
                                  canvas=setting.canvas, experts_per_canvas=setting.experts_per_canvas) for u in users]
    fig = go.Figure([go.Scatter(x=users, y=[r["ar"] for r in rows], name="AR bound", line=dict(color=AR_COLOR)),
                     go.Scatter(x=users, y=[r["diffusion"] for r in rows], line=dict(color=DIFFUSION_COLOR),
                                name=f"diffusion bound (TPF {setting.tpf:g})")])
    cross = roofline.crossover_users(setting.model, setting.device, setting.dtype, setting.tpf, most,
                                     canvas=setting.canvas, experts_per_canvas=setting.experts_per_canvas)
    x_axis = log_axis(users[0], users[-1])
    if cross:
        _users_line(fig, cross, f"bounds cross at {cross} users", "dot", INK, "end", x_axis["range"])
    if report_crossover:
        _users_line(fig, report_crossover, f"report, measured: {report_crossover}", "dash", REPORT_COLOR, "start",
                    x_axis["range"])
    fig.update_xaxes(title_text="concurrent users", **x_axis)
    fig.update_yaxes(title_text="tokens/s, all users (bound)", **log_axis(*data_span(fig, "y")))
    return _styled(fig, "Throughput bound against concurrency", height=380)


def _count(n: float) -> str:
    return f"{n / 1e9:.3g} B" if n >= 1e9 else f"{n / 1e6:.3g} M"


def _row(name: str, bound: Bound, tok_s: float) -> str:
    return (f"| {name} | {bound.bytes / 1e9:.4g} GB | {bound.flops / 1e9:.4g} GFLOP | {1e3 * bound.memory_s:.4g} ms | "
            f"{1e3 * bound.compute_s:.4g} ms | **{bound.binds}** | {tok_s:,.0f} |")


def bounds_table(setting: Setting, measured: list[Measured] = ()) -> str:
    """Markdown: each pass's bytes, FLOPs, both times, which binds, its tok/s bound; the measured figures
    as fractions of their bounds."""
    b, s = setting.bounds(), setting
    fits = "" if s.device.memory_gb is None else (
        f" The weights take {s.model.total * roofline.BYTES_PER_PARAM[s.dtype] / 1e9:.1f} GB of the device's "
        f"{s.device.memory_gb:g} GB.")
    lines = [f"{s.model.name}: {_count(s.model.total)} parameters, {_count(s.model.active)} active per token; "
             f"{s.dtype}, {s.users} user(s), canvas {s.canvas or s.model.canvas}, "
             f"{s.experts_per_canvas or s.model.experts_per_canvas:g} experts per canvas vs {s.model.top_k} per token."
             + fits, "",
             "| pass | bytes read | FLOPs | memory bound | compute bound | binds | tok/s bound |",
             "|---|---|---|---|---|---|---|",
             _row("AR token", b["ar_bound"], b["ar"]), _row("canvas step", b["step_bound"], b["diffusion"])]
    one = _one_user(setting)
    if measured:
        lines.append("\nMeasured with one user (batch 1), against the one-user bounds:")
    for m in measured:
        bound = one[f"{m.mode}_bound"]
        lines.append(f"\n- {m.label}: {1e3 * m.seconds:.3g} ms per {'token' if m.mode == 'ar' else 'step'} = "
                     f"**{roofline.fraction(m.seconds, bound):.0%}** of the bound ({1e3 * bound.seconds:.3g} ms)")
    return "\n".join(lines)


def report_measured() -> list[Measured]:
    """The report's H100 figures (§1, §6) as passes: AR's token, the canvas step, its decoder forward alone."""
    r = roofline.REPORT
    return [Measured(f"report AR {r['ar_tok_s']:g} tok/s", "ar", 1.0 / r["ar_tok_s"]),
            Measured(f"report step {r['step_ms']:g} ms ({r['diffusion_tok_s']:,.0f} tok/s)", "step",
                     r["step_ms"] / 1e3),
            Measured(f"report step without sampling ({r['step_ms'] - r['sampling_ms']:.2f} ms)", "step",
                     (r["step_ms"] - r["sampling_ms"]) / 1e3)]


def gpu_checks(folder: Path = MEASUREMENTS) -> dict[str, dict]:
    """The committed GPU checks (`gpu-check-*.json`, written by `bash scripts/gpu-check.sh` on a GPU) by the
    dg.roofline device each ran on; a smoke check, an unknown device or a graphs part that did not pass is left
    out (the newest file wins for a device)."""
    checks = {}
    for path in sorted(Path(folder).glob("gpu-check-*.json")):
        check = json.loads(path.read_text())
        device = roofline.device_named(check.get("device", {}).get("name", ""))
        if check.get("mode") == "gpu" and device and check.get("parts", {}).get("graphs", {}).get("status") == "ok":
            checks[device] = check
    return checks


def check_measured(check: dict) -> list[Measured]:
    """A GPU check's passes as dg ran them (its graphs part: the release's shape, random weights, bf16, batch 1):
    an AR token and a canvas step per path (eager, graphs, fused)."""
    result = check["parts"]["graphs"]["result"]
    return [Measured(f"dg {path}: {result[f'{path}_{kind}_ms']:.3g} ms per {kind}", mode,
                     result[f"{path}_{kind}_ms"] / 1e3)
            for path in result["paths"] for kind, mode in (("token", "ar"), ("step", "step"))]


def check_note(check: dict) -> str:
    """Where and when a GPU check measured its figures, for the table under them."""
    result = check["parts"]["graphs"]["result"]
    commit = check.get("versions", {}).get("commit")
    return (f"\n\nMeasured by `bash scripts/gpu-check.sh` on {check['device']['name']}, {check['started'][:10]}"
            + (f" (commit {commit})" if commit else "") + f": the release's shape with random weights, bf16, batch "
            f"1, prompt {result['prompt_tokens']}, {result['steps']} decoder steps and {result['tokens']} AR tokens "
            "per round.")


def cpu_measured(sweep: dict) -> list[Measured]:
    """The embedded model's figures on this CPU from the sweep: median AR token and canvas step over skills."""
    rows = sweep["skills"].values()
    ar = float(np.median([r["ar_token_ms"] for r in rows]))
    step = float(np.median([r["step_ms"] for r in rows]))
    return [Measured(f"embedded AR, this CPU ({ar:.2f} ms)", "ar", ar / 1e3),
            Measured(f"embedded step, this CPU ({step:.2f} ms)", "step", step / 1e3)]
