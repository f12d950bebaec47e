"""Artefacts for slides and sharing: a trace as JSON, as an animated GIF, and as a replay HTML page.

The GIF draws one frame per denoising step (per token for an AR trace) with the colours of
`dg.view.theme`; the HTML page is a single self-contained file (no network, no external JS) that
replays the `canvas_html` frames with a slider and play/pause, with the theme's CSS once in its head.

    python -c "from dg.view.export import trace_html; help(trace_html)"
    python -m pytest tests/view/test_export.py -q
"""

import html
import json
import math
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from dg.trace import STOP_LABELS
from dg.view.render import canvas_cells, canvas_html, legend_html, step_panel_html, text_view_html
from dg.view.theme import COLUMNS, CSS, STATE_COLORS, THOUGHT_COLOR

CELL_W, CELL_H, GAP, MARGIN, HEADER_H = 58, 22, 3, 8, 24
FONT_FILES = ("DejaVuSansMono.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
BACKGROUND = (255, 255, 255)
INK = (30, 30, 40)


def trace_json(trace, path) -> Path:
    """Write the trace (every record plus its metrics) as JSON; `Trace.from_json` reads it back."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(trace.to_json())
    return path


def frame_indices(trace, max_frames: int | None = None) -> list[int]:
    """Steps (or AR tokens) to draw: all of them, or an even subsample that keeps the last one."""
    n = len(trace.tokens) if trace.mode == "ar" else len(trace.steps)
    if max_frames is None or n <= max_frames:
        return list(range(n))
    if max_frames < 1:
        raise ValueError(f"max_frames must be >= 1, got {max_frames}")
    stride = (n - 1) / max(max_frames - 1, 1)
    return sorted({round(j * stride) for j in range(max_frames)} | {n - 1})


def _font(size: int = 11):
    for name in FONT_FILES:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default()


def _blend(hex_color: str, alpha: float = 0.3) -> tuple[int, int, int]:
    rgb = tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(round(alpha * c + (1 - alpha) * b) for c, b in zip(rgb, BACKGROUND))


def _frame_content(trace, tokenizer, i: int | None) -> tuple[str, list[tuple[str, str, bool]]]:
    """Header line and (piece, state, is_thought) cells of one frame."""
    if i is None:
        n = trace.start.canvas_length if trace.start else COLUMNS
        return "waiting for first step", [("·", "noise", False)] * n
    cells = [(c["piece"], c["state"], c["channel"] == "thought") for c in canvas_cells(trace, tokenizer, i)]
    if trace.mode == "ar":
        return f"AR · token {i + 1}/{len(trace.tokens)} · H {trace.tokens[i].entropy:.3f}", cells
    rec = trace.steps[i]
    header = (f"canvas {rec.canvas + 1}/{trace.start.max_canvases} · step {rec.step}"
              f"/{trace.start.config.get('max_denoising_steps', '?')} · τ {rec.temperature:.3f}"
              f" · accepted {rec.n_accepted}/{len(rec.accepted)}")
    if rec.stop_reason:
        header += f" · {STOP_LABELS.get(rec.stop_reason, rec.stop_reason)}"
    return header, cells


def _draw_frame(header: str, cells, rows: int, font) -> Image.Image:
    width = 2 * MARGIN + COLUMNS * (CELL_W + GAP) - GAP
    height = HEADER_H + 2 * MARGIN + rows * (CELL_H + GAP) - GAP
    img = Image.new("RGB", (width, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    draw.text((MARGIN, MARGIN), header, fill=INK, font=font)
    max_chars = max(1, (CELL_W - 4) // max(1, round(font.getlength("M"))))
    for pos, (piece, state, thought) in enumerate(cells):
        x = MARGIN + (pos % COLUMNS) * (CELL_W + GAP)
        y = MARGIN + HEADER_H + (pos // COLUMNS) * (CELL_H + GAP)
        color = STATE_COLORS[state]
        draw.rounded_rectangle((x, y, x + CELL_W, y + CELL_H), radius=3, fill=_blend(color), outline=color, width=1)
        if thought:
            draw.polygon([(x, y), (x + 7, y), (x, y + 7)], fill=THOUGHT_COLOR)
        text = piece if len(piece) <= max_chars else piece[:max_chars - 1] + "…"
        draw.text((x + CELL_W / 2, y + CELL_H / 2), text, fill=INK, font=font, anchor="mm")
    return img


def trace_gif(trace, tokenizer, path, *, fps: int = 8, max_frames: int = 400) -> Path:
    """Animated GIF, one frame per step (subsampled to `max_frames`), coloured like `canvas_html`."""
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    font = _font()
    indices = frame_indices(trace, max_frames) or [None]
    contents = [_frame_content(trace, tokenizer, i) for i in indices]
    rows = max(1, max(math.ceil(len(cells) / COLUMNS) for _, cells in contents))
    frames = [_draw_frame(header, cells, rows, font) for header, cells in contents]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=round(1000 / fps), loop=0,
                   optimize=False)
    return path


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:24px;background:#fff;color:#111}}
@media (prefers-color-scheme:dark){{body{{background:#111827;color:#e5e7eb}}}}
.controls{{display:flex;gap:12px;align-items:center;margin:12px 0}}
#slider{{flex:1}}
</style>{css}</head><body>
<h2>{title}</h2>
{legend}
<div class="controls"><button id="play">▶ play</button>
<input id="slider" type="range" min="0" max="{last}" value="0"><span id="label"></span></div>
<div id="frame"></div>
<h3>Text</h3>{text}
<script id="frames" type="application/json">{frames}</script>
<script>
const frames = JSON.parse(document.getElementById("frames").textContent);
const slider = document.getElementById("slider"), play = document.getElementById("play");
const label = document.getElementById("label"), view = document.getElementById("frame");
let timer = null;
function show(i) {{
  slider.value = i; view.innerHTML = frames[i] || "";
  label.textContent = "frame " + (Number(i) + 1) + " / " + frames.length;
}}
slider.addEventListener("input", () => show(slider.value));
play.addEventListener("click", () => {{
  if (timer) {{ clearInterval(timer); timer = null; play.textContent = "▶ play"; return; }}
  play.textContent = "❚❚ pause";
  timer = setInterval(() => show((Number(slider.value) + 1) % frames.length), {interval});
}});
show(0);
</script></body></html>
"""


def replay_frames(trace, tokenizer) -> list[str]:
    """One HTML fragment per step (per token for AR): step panel above the canvas."""
    indices = frame_indices(trace) or [None]
    return [step_panel_html(trace, i) + canvas_html(trace, tokenizer, i) for i in indices]


def trace_html(trace, tokenizer, path, *, fps: int = 4, title: str = "DiffusionGemma denoising replay") -> Path:
    """A single self-contained HTML file that replays every step with a slider and play/pause."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frames = replay_frames(trace, tokenizer)
    payload = json.dumps(frames).replace("</", "<\\/").replace("<!--", "<\\!--")
    page = PAGE.format(title=html.escape(title), css=CSS, legend=legend_html(),
                       last=len(frames) - 1, text=text_view_html(trace, tokenizer),
                       frames=payload, interval=round(1000 / max(fps, 1)))
    path.write_text(page, encoding="utf-8")
    return path
