"""Exported artefacts: JSON that reads back, a GIF with a frame per step, a replay page with no network."""

import json
import re

from PIL import Image

from dg.trace import Trace
from dg.view import export


META = {"prompt": "What is 12 + 30?", "seed": 7, "model": "tiny-test", "thinking": True}


def test_trace_json_reads_back_to_the_same_trace(diffusion_trace, tmp_path):
    path = export.trace_json(diffusion_trace, tmp_path / "out" / "trace.json")
    again = Trace.from_json(path.read_text())
    assert again.token_ids == diffusion_trace.token_ids
    assert again.metrics() == diffusion_trace.metrics()


def test_every_export_says_what_produced_the_run(diffusion_trace, processor, tmp_path):
    run = json.loads(export.trace_json(diffusion_trace, tmp_path / "t.json", META).read_text())["run"]
    assert run["prompt"] == META["prompt"] and run["seed"] == 7 and run["model"] == "tiny-test"
    assert run["entropy_bound"] == diffusion_trace.start.config["entropy_bound"]  # and every setting
    page, _ = replay(export.trace_html(diffusion_trace, processor.tokenizer, tmp_path / "r.html", meta=META))
    assert "What is 12 + 30?" in page and "tiny-test" in page and "max_denoising_steps" in page
    with Image.open(export.trace_gif(diffusion_trace, processor.tokenizer, tmp_path / "g.gif", meta=META)) as gif:
        assert json.loads(gif.info["comment"])["prompt"] == META["prompt"]


def test_the_gif_marks_thought_tokens_dashed_as_the_app_does(processor):
    font = export._font()
    cells = [("abc", "noise", False), ("abc", "noise", True)]
    img = export._draw_frame(["caption"], ["header"], [("", cells)], 160, font)
    (x0, y0, w0), (x1, y1, w1) = export._layout(cells, font)
    top = 8 + 2 * export.LINE_H + export.GAP  # caption line, header line
    solid = [img.getpixel((x, top + y0)) for x in range(x0 + 4, x0 + w0 - 4)]
    dashed = [img.getpixel((x, top + y1)) for x in range(x1 + 4, x1 + w1 - 4)]
    assert len(set(solid)) == 1 and len(set(dashed)) > 1


def test_a_gif_frame_keeps_every_committed_canvas_above_the_one_being_denoised(diffusion_trace, processor):
    steps = diffusion_trace.steps
    assert len({s.canvas for s in steps}) >= 2  # the fixture spans canvases
    first = next(j for j, s in enumerate(steps) if s.canvas == 1)
    header, blocks = export._frame_content(diffusion_trace, processor.tokenizer, first)
    assert [label for label, _ in blocks] == ["canvas 1", "canvas 2"]
    last_of_first = max(j for j, s in enumerate(steps) if s.canvas == 0)
    assert blocks[0][1] == export._frame_content(diffusion_trace, processor.tokenizer, last_of_first)[1][0][1]
    assert [label for label, _ in export._frame_content(diffusion_trace, processor.tokenizer, 0)[1]] == [""]


def test_a_gif_header_wraps_between_its_parts_and_never_runs_past_the_frame():
    font = export._font()
    header = " · ".join(f"part {i} of a long header" for i in range(12))
    lines = export._wrap(header, font)
    assert len(lines) > 1 and all(font.getlength(line) <= export.WIDTH - 2 * export.MARGIN for line in lines)
    assert " · ".join(lines) == header  # broken only between parts, nothing lost
    (alone,) = export._wrap("x" * 400, font)
    assert alone.endswith("…") and font.getlength(alone) <= export.WIDTH - 2 * export.MARGIN


def test_gif_has_one_frame_per_step_and_opens_with_pil(diffusion_trace, processor, tmp_path):
    path = export.trace_gif(diffusion_trace, processor.tokenizer, tmp_path / "steps.gif", fps=5)
    with Image.open(path) as gif:
        assert gif.format == "GIF" and gif.n_frames == len(diffusion_trace.steps)
        assert gif.info["duration"] == 200


def test_gif_subsamples_long_traces_but_keeps_the_last_step(diffusion_trace, processor, tmp_path):
    assert export.frame_indices(diffusion_trace, 3)[-1] == len(diffusion_trace.steps) - 1
    path = export.trace_gif(diffusion_trace, processor.tokenizer, tmp_path / "short.gif", max_frames=3)
    with Image.open(path) as gif:
        assert gif.n_frames == 3


def test_gif_of_an_ar_trace_grows_a_token_per_frame_and_an_empty_trace_still_writes(ar_trace, processor, tmp_path):
    with Image.open(export.trace_gif(ar_trace, processor.tokenizer, tmp_path / "ar.gif")) as gif:
        assert gif.n_frames == len(ar_trace.tokens)
    with Image.open(export.trace_gif(Trace(), processor.tokenizer, tmp_path / "empty.gif")) as gif:
        assert gif.n_frames == 1


def replay(path) -> tuple[str, list]:
    page = path.read_text(encoding="utf-8")
    payload = re.search(r'<script id="frames" type="application/json">(.*?)</script>', page, re.S).group(1)
    return page, json.loads(payload)


def test_html_replay_is_self_contained_with_one_frame_per_step(diffusion_trace, processor, tmp_path):
    page, frames = replay(export.trace_html(diffusion_trace, processor.tokenizer, tmp_path / "replay.html"))
    assert len(frames) == len(diffusion_trace.steps)
    assert not re.search(r"https?://", page) and " src=" not in page and "<link" not in page
    assert all(frame.count('data-pos="') == diffusion_trace.start.canvas_length for frame in frames)
    assert 'type="range"' in page and 'id="play"' in page


def test_html_replay_of_an_ar_trace_has_a_frame_per_token(ar_trace, processor, tmp_path):
    _, frames = replay(export.trace_html(ar_trace, processor.tokenizer, tmp_path / "ar.html"))
    assert len(frames) == len(ar_trace.tokens)
