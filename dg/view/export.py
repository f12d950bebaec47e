"""Artefacts for slides and sharing: a trace as JSON, as an animated GIF, and as a replay HTML page.

Every file says what produced it (`run_facts`: prompt, image, thinking, seed, model and every sampler
setting). The GIF draws one frame per denoising step (per token for an AR trace) with the colours and
thought marks of `dg.view.theme` and the app's legend; the HTML page is a single self-contained file
(no network, no external JS) that replays the `canvas_html` frames with a slider and play/pause, with
the theme's CSS once in its head.

    python -c "from dg.view.export import trace_html; help(trace_html)"
    python -m pytest tests/view/test_export.py -q
"""

import json
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from dg.trace import STOP_LABELS
from dg.view import hybrid
from dg.view.render import canvas_cells, canvas_html, legend_html, step_panel_html, text_view_html
from dg.view.theme import CSS, STATE_COLORS, STATES, esc

WIDTH, CELL_H, GAP, PAD, MARGIN, LINE_H = 960, 22, 3, 4, 8, 16  # GIF geometry (pixels)
FONT_FILES = ("DejaVuSansMono.ttf", "/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf")
BACKGROUND = (255, 255, 255)
INK = (30, 30, 40)
MUTED = (100, 110, 125)
CAPTION_CHARS = 150  # a longer prompt is cut in the GIF's caption (the JSON and HTML keep it whole)


def run_facts(trace, meta: dict | None = None) -> dict:
    """What produced a run, for a shared file to say: prompt, image, thinking, seed, model (from `meta`,
    which the app and CLI know) and every sampler setting the trace recorded."""
    facts = {k: v for k, v in (meta or {}).items() if v is not None}
    if trace.start is not None:
        facts["mode"] = trace.start.mode
        facts |= {k: v for k, v in trace.start.config.items() if v is not None}
    return facts


def trace_json(trace, path, meta: dict | None = None) -> Path:
    """Write the trace (every record plus its metrics) and `run_facts` as JSON; `Trace.from_json` reads
    it back (the facts are under "run")."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"run": run_facts(trace, meta), **trace.to_dict()}))
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


def _font(size: int = 12):
    for name in FONT_FILES:
        try:
            return ImageFont.truetype(name, size)
        except OSError:
            continue
    return ImageFont.load_default()


def _blend(hex_color: str, alpha: float = 0.3) -> tuple[int, int, int]:
    rgb = tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(round(alpha * c + (1 - alpha) * b) for c, b in zip(rgb, BACKGROUND))


def _frame_content(trace, tokenizer, i: int | None) -> tuple[str, list[tuple[str, list]]]:
    """Header line and the frame's canvases: (label, [(piece, state, is_thought)]) for every canvas committed
    before step `i`'s (at its last step, so a multi-canvas answer keeps its start) and then step `i`'s own."""
    if i is None:
        n = trace.start.canvas_length if trace.start else 16
        return "waiting for first step", [("", [("·", "noise", False)] * n)]
    cells = lambda j: [(c["piece"], c["state"], c["channel"] == "thought")  # noqa: E731
                       for c in canvas_cells(trace, tokenizer, j)]
    if trace.mode == "ar":
        return f"AR · token {i + 1}/{len(trace.tokens)} · H {trace.tokens[i].entropy:.3f}", [("", cells(i))]
    rec = trace.steps[i]
    last_step = {s.canvas: j for j, s in enumerate(trace.steps[:i])}  # each earlier canvas's last step
    blocks = [(f"canvas {c + 1}", cells(last_step[c])) for c in sorted(last_step) if c < rec.canvas]
    blocks.append((f"canvas {rec.canvas + 1}" if blocks else "", cells(i)))
    header = (f"run step {i + 1}/{len(trace.steps)} · canvas {rec.canvas + 1}/{trace.start.max_canvases} · step "
              f"{rec.step}/{trace.start.config.get('max_denoising_steps', '?')} · τ {rec.temperature:.3f}"
              f" · accepted {rec.n_accepted}/{len(rec.accepted)}")
    if rec.stop_reason:
        header += f" · {STOP_LABELS.get(rec.stop_reason, rec.stop_reason)}"
    if trace.mode == "hybrid":
        header += hybrid.round_label(trace, i)
    return header, blocks


def _wrap(text: str, font, sep: str = " · ") -> list[str]:
    """`text` in lines that fit the frame's width, broken between its ` · ` parts (a part too long alone is
    cut with an ellipsis)."""
    room = WIDTH - 2 * MARGIN
    lines = []
    for part in text.split(sep):
        while font.getlength(part) > room:
            part = part[:-2] + "…"
        if lines and font.getlength(lines[-1] + sep + part) <= room:
            lines[-1] += sep + part
        else:
            lines.append(part)
    return lines


def _blocks_height(blocks, font) -> int:
    """Pixels the canvases of one frame take: per canvas its label line (when labelled) and its rows."""
    return sum((LINE_H if label else 0) + max((y for _, y, _ in _layout(cells, font)), default=0) + CELL_H + GAP
               for label, cells in blocks)


def _layout(cells, font) -> list[tuple[int, int, int]]:
    """(x, y, width) of each cell, laid out like text: as wide as its token, wrapping at the frame's width."""
    boxes, x, y = [], MARGIN, 0
    for piece, _, _ in cells:
        w = max(CELL_H - 4, round(font.getlength(piece)) + 2 * PAD)
        if x + w > WIDTH - MARGIN and x > MARGIN:
            x, y = MARGIN, y + CELL_H + GAP
        boxes.append((x, y, w))
        x += w + GAP
    return boxes


def _dashed_box(draw, box, color, dash: int = 4) -> None:
    """A dashed outline: how the app marks a thought token (theme.THOUGHT_MARK)."""
    x0, y0, x1, y1 = box
    for a, b, horizontal, fixed in ((x0, x1, True, y0), (x0, x1, True, y1), (y0, y1, False, x0), (y0, y1, False, x1)):
        for start in range(a, b, 2 * dash):
            end = min(start + dash, b)
            draw.line((start, fixed, end, fixed) if horizontal else (fixed, start, fixed, end), fill=color, width=1)


def _draw_cell(draw, box, piece, state, thought, font) -> None:
    color = STATE_COLORS[state]
    if thought:
        draw.rectangle(box, fill=_blend(color))
        _dashed_box(draw, box, color)
    else:
        draw.rounded_rectangle(box, radius=3, fill=_blend(color), outline=color, width=1)
    draw.text(((box[0] + box[2]) / 2, (box[1] + box[3]) / 2), piece, fill=INK, font=font, anchor="mm")


def _legend(draw, y, font) -> None:
    """The app's legend under every frame: the token states, then a dashed thought cell."""
    x = MARGIN
    for name, state, thought in [*((s, s, False) for s in STATES), ("thought", "noise", True)]:
        w = round(font.getlength(name)) + 2 * PAD
        _draw_cell(draw, (x, y, x + w, y + CELL_H), name, state, thought, font)
        x += w + 2 * GAP


def _draw_frame(caption: list[str], header: list[str], blocks, height: int, font) -> Image.Image:
    img = Image.new("RGB", (WIDTH, height), BACKGROUND)
    draw = ImageDraw.Draw(img)
    y = MARGIN
    for line in caption:
        draw.text((MARGIN, y), line, fill=MUTED, font=font)
        y += LINE_H
    for line in header:
        draw.text((MARGIN, y), line, fill=INK, font=font)
        y += LINE_H
    top = y + GAP
    for label, cells in blocks:
        if label:
            draw.text((MARGIN, top), label, fill=MUTED, font=font)
            top += LINE_H
        boxes = _layout(cells, font)
        for (piece, state, thought), (x, dy, w) in zip(cells, boxes):
            _draw_cell(draw, (x, top + dy, x + w, top + dy + CELL_H), piece, state, thought, font)
        top += max((dy for _, dy, _ in boxes), default=0) + CELL_H + GAP
    _legend(draw, height - MARGIN - CELL_H, font)
    return img


def _caption(trace, meta: dict | None) -> list[str]:
    """Two lines saying what produced the run: the prompt, then seed, model and settings."""
    facts = run_facts(trace, meta)
    prompt = str(facts.pop("prompt", ""))
    prompt = prompt if len(prompt) <= CAPTION_CHARS else prompt[:CAPTION_CHARS - 1] + "…"
    rest = " · ".join(f"{k} {v}" for k, v in facts.items())
    return [f"prompt: {prompt}" if prompt else "prompt: (not recorded)", rest[:CAPTION_CHARS * 2]]


def trace_gif(trace, tokenizer, path, *, fps: int = 8, max_frames: int = 400, meta: dict | None = None) -> Path:
    """Animated GIF, one frame per step (subsampled to `max_frames`), coloured and marked like the app
    (thought tokens dashed), with what produced the run on top, the step's header wrapped to the frame's
    width, every canvas committed so far above the one being denoised, and the legend below every frame."""
    if fps <= 0:
        raise ValueError(f"fps must be > 0, got {fps}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    font = _font()
    indices = frame_indices(trace, max_frames) or [None]
    contents = [(_wrap(header, font), blocks) for header, blocks in (_frame_content(trace, tokenizer, i)
                                                                     for i in indices)]
    caption = [line for part in _caption(trace, meta) for line in _wrap(part, font)]
    body_h = max(LINE_H * len(header) + _blocks_height(blocks, font) for header, blocks in contents)
    height = MARGIN + LINE_H * len(caption) + GAP + body_h + 2 * GAP + CELL_H + MARGIN
    frames = [_draw_frame(caption, header, blocks, height, font) for header, blocks in contents]
    frames[0].save(path, save_all=True, append_images=frames[1:], duration=round(1000 / fps), loop=0,
                   optimize=False, comment=json.dumps(run_facts(trace, meta)).encode())
    return path


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body{{font-family:system-ui,sans-serif;margin:24px;background:#fff;color:#111}}
@media (prefers-color-scheme:dark){{body{{background:#111827;color:#e5e7eb}}}}
.controls{{display:flex;gap:12px;align-items:center;margin:12px 0}}
#slider{{flex:1}}
.run td{{padding:1px 10px 1px 0;vertical-align:top}}
</style>{css}</head><body>
<h2>{title}</h2>
<details open><summary>What produced this run</summary><table class="run">{facts}</table></details>
{legend}
<div class="controls"><button id="play">▶ Play</button>
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
  label.textContent = "{unit} " + (Number(i) + 1) + " of " + frames.length;
}}
slider.addEventListener("input", () => show(slider.value));
play.addEventListener("click", () => {{
  if (timer) {{ clearInterval(timer); timer = null; play.textContent = "▶ Play"; return; }}
  play.textContent = "❚❚ Pause";
  timer = setInterval(() => show((Number(slider.value) + 1) % frames.length), {interval});
}});
show(0);
</script></body></html>
"""


def replay_frames(trace, tokenizer) -> list[str]:
    """One HTML fragment per step (per token for AR): step panel above the canvas."""
    indices = frame_indices(trace) or [None]
    return [step_panel_html(trace, i) + canvas_html(trace, tokenizer, i) for i in indices]


def trace_html(trace, tokenizer, path, *, fps: int = 4, title: str = "DiffusionGemma denoising replay",
               meta: dict | None = None) -> Path:
    """A single self-contained HTML file that replays every step with a slider and play/pause, headed by
    what produced the run."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frames = replay_frames(trace, tokenizer)
    payload = json.dumps(frames).replace("</", "<\\/").replace("<!--", "<\\!--")
    facts = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in run_facts(trace, meta).items())
    page = PAGE.format(title=esc(title), css=CSS, legend=legend_html(), facts=facts, last=len(frames) - 1,
                       unit="AR token" if trace.mode == "ar" else "run step", text=text_view_html(trace, tokenizer),
                       frames=payload, interval=round(1000 / max(fps, 1)))
    path.write_text(page, encoding="utf-8")
    return path
