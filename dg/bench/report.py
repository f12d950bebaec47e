"""The plotly HTML report of `python -m dg.bench`: the same figures as the printed tables.

    python -m dg.bench --report runs/bench.html

Pure: the benchmark result dict in, one self-contained HTML file out (plotly.js embedded once, so
the file opens offline).
"""

import html
import json
from pathlib import Path

import plotly.graph_objects as go

MODE_ORDER = ("dg diffusion", "generate()", "dg AR")


def model_figures(models: dict) -> list[go.Figure]:
    rows = models["rows"]
    skills = list(dict.fromkeys(r["skill"] for r in rows))
    figures = []
    for key, title in (("wall_s", "Wall time per prompt (s, median over repeats)"),
                       ("effective_tok_s", "Effective tok/s per prompt")):
        fig = go.Figure()
        for mode in MODE_ORDER:
            values = {r["skill"]: r[key] for r in rows if r["mode"] == mode}
            fig.add_bar(name=mode, x=skills, y=[values.get(s) for s in skills])
        fig.update_layout(title=title, barmode="group", height=360)
        figures.append(fig)
    s = models["summary"]
    fig = go.Figure(go.Bar(
        x=["dg / generate() time", "diffusion vs AR speedup", "TPF", "step cost / AR token cost"],
        y=[s["dg_vs_reference_time_ratio"], s["diffusion_vs_ar_speedup"], s["tpf"], s["decoder_step_vs_ar_token_cost"]],
        text=[f"{v:.3g}" for v in (s["dg_vs_reference_time_ratio"], s["diffusion_vs_ar_speedup"], s["tpf"],
                                   s["decoder_step_vs_ar_token_cost"])]))
    fig.update_layout(title="Headline ratios (speedup ≈ TPF / step-cost ratio)", height=360)
    figures.append(fig)
    return figures


def step_figure(step: dict) -> go.Figure:
    names = list(step["paths"])
    fig = go.Figure(go.Bar(x=names, y=[step["paths"][n]["gb_s"] for n in names],
                           text=[f"{step['paths'][n]['ms']:.2f} ms" for n in names], name="sampling step"))
    fig.add_hline(y=step["bandwidth_gb_s"], line_dash="dash",
                  annotation_text=f"measured copy bandwidth {step['bandwidth_gb_s']:.0f} GB/s")
    fig.update_layout(title=f"Sampling step alone: (B, C, V) = {tuple(step['shape'])} on {step['device']} (GB/s)",
                      height=360)
    return fig


def device_figure(check: dict) -> go.Figure:
    names = [f"diffusion ({r['backend']})" for r in check["diffusion"]] + ["AR"]
    tps = [r["tps"] for r in check["diffusion"]] + [check["ar"]["tps"]]
    ms = [r["ms_per_step"] for r in check["diffusion"]] + [check["ar"]["ms_per_token"]]
    fig = go.Figure(go.Bar(x=names, y=tps, text=[f"{m:.1f} ms/step" if i < len(ms) - 1 else f"{m:.1f} ms/token"
                                                  for i, m in enumerate(ms)]))
    fig.update_layout(title=f"Device check on {check['device']}: TPS (prefill {check['prefill_ms']:.0f} ms)",
                      height=360)
    return fig


def write_report(result: dict, path) -> Path:
    """Write every figure the result has, and the raw JSON, to `path`; return the path."""
    figures = []
    if "models" in result:
        figures += model_figures(result["models"])
    if "step" in result:
        figures.append(step_figure(result["step"]))
    if "device_check" in result:
        figures.append(device_figure(result["device_check"]))
    parts = [fig.to_html(full_html=False, include_plotlyjs=(i == 0)) for i, fig in enumerate(figures)]
    raw = html.escape(json.dumps(result, indent=1, default=str))
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>dg bench</title></head><body>"
            "<h1>dg benchmark</h1>" + "".join(parts) + f"<h2>Raw result</h2><pre>{raw}</pre></body></html>")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path
