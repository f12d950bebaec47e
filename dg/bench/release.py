"""The release-shaped rehearsal: the app serving a random-weights checkpoint shaped like the release where the
UI feels it, measured on a CPU.

The checkpoint has the release's vocabulary (262,144, every id decoding to a word-like piece), canvas (256)
and EOS ids [1, 106, 50], and is small elsewhere (hidden size, layers). A step there costs seconds on a CPU
(sampling over 256 × 262,144 logits), so instead of live frames/s it reports what the UI adds to each step:
each frame's arrival after its step ended (bar ≤ 0.5 s), every step shown, the server's cost to draw a frame
(bar: ≥ 10 frames/s of drawing), and the bytes a frame puts on the wire (Gradio streams the diff of each
output against the last; a canvas is a list of cells, so only changed cells travel). With `--browser` it
also checks in Chromium that the 256 cells are all on the page, inside the canvas, none overlapping, and
saves a screenshot. The headless run comes first and its model is freed before the server loads its own.

    python -m dg.bench.release [--browser] [--release-steps 8] [--screenshot runs/release-shaped-canvas.png]

Prints a table, then one JSON line.
"""

import argparse
import gc
import json
import os
import re
import statistics
import tempfile
import time
from pathlib import Path

from dg.bench.served import (DONE_JS, chromium_page, print_rows, start_server, stop_server,
                             streamed_generate, update_bytes, wire_bytes)
from dg.bench.ui import BARS, headless_run
from dg.config import KNOBS, SamplerConfig
from dg.devices import share_cpu
from dg.loading import EMBEDDED_MODEL, load
from dg.testing import tiny_model_for
from dg.tiny.tokenizer import CHAT_TEMPLATE, wrap_tokenizer
from dg.trace import Trace
from dg.ui.app import free_port

RUN_STEP = re.compile(r"run step (\d+) of \d+")
# a frame on the wire of at most this many bytes per canvas position (a random model moves every cell each
# step, the worst case; a whole frame of the previous page format took ~200 B per cell)
WIRE_BYTES_PER_POSITION = 160
PROMPT = "Write a Python function that checks whether a number is prime."


# --- the checkpoint ----------------------------------------------------------------------------------
RELEASE_VOCAB = 262_144  # google/diffusiongemma-26B-A4B-it's vocabulary, canvas and EOS ids
RELEASE_CANVAS = 256
RELEASE_EOS = (1, 106, 50)
_ONSETS = ("", "b", "c", "d", "f", "g", "h", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "st", "tr",
           "ch", "sh", "br", "pl")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ou", "ea")
_CODAS = ("", "", "n", "r", "s", "t", "l", "m", "nd", "ng")


def pseudo_words(n: int, seed: int = 0) -> list[str]:
    """n distinct word-like pieces (half start a word with `▁`, as SentencePiece pieces do), 1–3 syllables:
    a canvas of random ids from a release-sized vocabulary reads like text of real widths, not like ids."""
    import random

    rng, words, seen = random.Random(seed), [], set()
    while len(words) < n:
        word = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
                       for _ in range(rng.choice((1, 1, 2, 2, 2, 3))))
        piece = ("▁" if rng.random() < 0.5 else "") + word
        if piece not in seen:
            seen.add(piece)
            words.append(piece)
    return words


def release_vocab_processor(processor, vocab_size: int = RELEASE_VOCAB):
    """`processor` with its tokenizer's vocabulary filled up to `vocab_size` by pseudo-words: encoding is
    unchanged (no merges reach them), every id a release-sized model can sample decodes to a readable piece."""
    import json

    from tokenizers import Tokenizer
    from transformers import Gemma4Processor

    spec = json.loads(processor.tokenizer.backend_tokenizer.to_str())
    vocab = spec["model"]["vocab"]
    if len(processor.tokenizer) > vocab_size:
        raise ValueError(f"the tokenizer already has {len(processor.tokenizer)} tokens, more than {vocab_size}")
    fresh = (w for w in pseudo_words(vocab_size) if w not in vocab)
    while len(vocab) < vocab_size - len(spec["added_tokens"]) + sum(t["id"] < len(vocab) for t in spec["added_tokens"]):
        vocab[next(fresh)] = len(vocab)
    tokenizer = wrap_tokenizer(Tokenizer.from_str(json.dumps(spec)))
    if len(tokenizer) != vocab_size:
        raise ValueError(f"built {len(tokenizer)} tokens, wanted {vocab_size}")
    return Gemma4Processor(feature_extractor=processor.feature_extractor, image_processor=processor.image_processor,
                           tokenizer=tokenizer, video_processor=processor.video_processor,
                           chat_template=CHAT_TEMPLATE, image_seq_length=processor.image_seq_length)


def release_shaped_checkpoint(path, processor, *, vocab_size: int = RELEASE_VOCAB, canvas_length: int = RELEASE_CANVAS,
                              hidden_size: int = 64, sharpen: float = 1.0, max_new_tokens: int | None = None,
                              max_denoising_steps: int | None = None):
    """A random-weights checkpoint shaped like the release where the UI feels it (vocabulary, canvas,
    EOS ids [1, 106, 50]) and small where only compute would (hidden size, layers), saved with a
    processor whose vocabulary matches. `sharpen` > 1 makes canvases settle as a trained model's do."""
    big = release_vocab_processor(processor, vocab_size)
    model = tiny_model_for(big, sharpen=sharpen, vocab_size=vocab_size, canvas_length=canvas_length,
                           hidden_size=hidden_size)
    changes = {"max_new_tokens": max_new_tokens or canvas_length}
    if max_denoising_steps is not None:
        changes["max_denoising_steps"] = max_denoising_steps
    model.generation_config = SamplerConfig(**changes).generation_config(
        eos_token_id=list(RELEASE_EOS), pad_token_id=0, bos_token_id=2)
    model.save_pretrained(path, safe_serialization=True)
    model.generation_config.save_pretrained(path)
    big.save_pretrained(path)
    return model


# --- the rehearsal ------------------------------------------------------------------------------------
def release_run(client, prompt: str, thinking: bool, seed: int, knobs: dict) -> dict:
    """One Generate on the release-shaped checkpoint: per frame, its lag behind its step and its bytes."""
    arrivals, trace, _ = streamed_generate(client, prompt, thinking, seed, knobs)
    sizes = wire_bytes(arrivals)
    # The run's clock starts between submit and the first update (its "waiting" canvas), so a frame's
    # lag behind its step lies between these two bounds
    first_update = arrivals[0][0]
    lags, low, frame_bytes, whole_bytes, shown = [], [], [], [], set()
    for (t, out), size in zip(arrivals[:-1], sizes[:-1]):
        label = RUN_STEP.search("".join(out[0])) if isinstance(out[0], list) else None
        if label is None or int(label.group(1)) in shown:
            continue
        step = int(label.group(1))
        shown.add(step)
        lags.append(t - trace.steps[step - 1].t)
        low.append(t - first_update - trace.steps[step - 1].t)
        frame_bytes.append(size)
        whole_bytes.append(update_bytes(out))
    return {"trace": trace, "steps": len(trace.steps), "steps_shown": len(shown), "lag_s": lags, "lag_low_s": low,
            "frame_bytes": frame_bytes, "whole_frame_bytes": whole_bytes}


def draw_cost_ms(trace: Trace, tokenizer) -> list[float]:
    """The server's work for one live frame at each step of `trace`: the three views, the diff against
    the frame before and its JSON (what `python app.py` does per frame, without the network)."""
    from gradio.utils import diff

    from dg.ui.generate_tab import live_views
    from dg.view.render import trace_until

    costs, before = [], None
    for i in range(len(trace.steps)):
        t = time.perf_counter()
        views = list(live_views(trace_until(trace, i), tokenizer))
        json.dumps(views if before is None else [diff(b, v) for b, v in zip(before, views)])
        costs.append((time.perf_counter() - t) * 1000)
        before = views
    return costs


READABLE_JS = """() => {
  const grid = document.querySelector('#dg-canvas .dg-grid');
  const cells = [...grid.querySelectorAll('.dg-cell')].map(c => c.getBoundingClientRect());
  const box = grid.getBoundingClientRect();
  let overlaps = 0;
  for (let i = 1; i < cells.length; i++) {
    const a = cells[i - 1], b = cells[i];
    if (a.top === b.top && b.left < a.right - 0.5) overlaps++;
  }
  return {cells: cells.length, empty: cells.filter(r => r.width < 4 || r.height < 4).length, overlaps,
          outside: cells.filter(r => r.left < box.left - 0.5 || r.right > box.right + 0.5).length,
          rows: new Set(cells.map(r => Math.round(r.top))).size, height_px: Math.round(box.height)};
}"""


def release_browser_check(url: str, prompt: str, screenshot: Path) -> dict:
    """Generate in Chromium with the page's settings (the checkpoint's), then measure the drawn canvas."""
    with chromium_page(url) as page:
        page.get_by_label("Prompt").first.fill(prompt)
        page.locator("#dg-go").click()
        page.wait_for_function(DONE_JS, timeout=900_000)
        result = page.evaluate(READABLE_JS)
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        page.locator("#dg-canvas").screenshot(path=str(screenshot))
    return {**result, "screenshot": str(screenshot)}


def release_shaped(args) -> dict:
    """Build the release-shaped checkpoint, serve it, run one Generate (and one headless run) on it."""
    from gradio_client import Client
    from transformers import AutoProcessor

    folder = Path(tempfile.mkdtemp(prefix="dg-release-shaped-"))
    release_shaped_checkpoint(folder, AutoProcessor.from_pretrained(EMBEDDED_MODEL),
                              max_denoising_steps=args.release_steps)
    loaded = load(str(folder))
    share_cpu(loaded.device)
    config, tokenizer, model_config = loaded.sampler_config, loaded.tokenizer, loaded.model.config
    eos = loaded.model.generation_config.eos_token_id
    knobs = {k.name: getattr(config, k.name) for k in KNOBS}
    headless = headless_run(loaded, args.prompt, args.thinking, args.seed, config)
    del loaded
    gc.collect()  # the server loads the model next: one copy at a time
    port = free_port()
    server = start_server(str(folder), port)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        release_run(client, args.prompt, args.thinking, args.seed, knobs | {"max_denoising_steps": 1})  # warm-up
        ui = release_run(client, args.prompt, args.thinking, args.seed, knobs)
        browser = release_browser_check(f"http://127.0.0.1:{port}/", args.prompt, args.screenshot) \
            if args.browser else None
    finally:
        stop_server(server)
    trace = ui.pop("trace")
    costs = draw_cost_ms(trace, tokenizer)
    canvas = model_config.canvas_length
    result = {
        "model": "release-shaped random weights", "vocab_size": len(tokenizer), "canvas_length": canvas,
        "eos_token_id": eos, "steps": ui["steps"],
        "steps_shown": ui["steps_shown"], "sampler_s_per_step": trace.end.t / max(len(trace.steps), 1),
        "lag_after_step_s": {"median": statistics.median(ui["lag_s"]), "max": max(ui["lag_s"]),
                             "lower_bound_max": max(ui["lag_low_s"])},
        "finish_reason": trace.end.finish_reason,
        "draw_ms": {"median": statistics.median(costs), "max": max(costs)},
        "draw_frames_per_s": 1000 / statistics.median(costs),
        "wire_bytes_per_frame": {"median": statistics.median(ui["frame_bytes"]), "max": max(ui["frame_bytes"])},
        "whole_frame_bytes": statistics.median(ui["whole_frame_bytes"]),
        "slowdown": trace.end.t / headless["sampler_wall_s"] - 1,
        "same_tokens": trace.token_ids == headless["token_ids"],
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
    }
    result["pass"] = {
        "first_frame": result["lag_after_step_s"]["max"] <= BARS["first_frame_s"],
        "every_step_shown": ui["steps_shown"] == ui["steps"],
        "frames_per_s": result["draw_frames_per_s"] >= BARS["frames_per_s"],
        "wire_bytes": result["wire_bytes_per_frame"]["max"] <= WIRE_BYTES_PER_POSITION * canvas,
        "canvas_length": canvas == RELEASE_CANVAS,
    }
    if browser is not None:
        result["browser"] = browser
        result["pass"]["readable"] = (browser["cells"] == canvas and not browser["empty"] and not browser["overlaps"]
                                      and not browser["outside"])
    return result


def print_release(result: dict) -> None:
    lag, draw, wire = result["lag_after_step_s"], result["draw_ms"], result["wire_bytes_per_frame"]
    canvas = result["canvas_length"]
    rows = [("vocabulary / canvas", f"{result['vocab_size']} / {canvas}", ""),
            ("EOS ids", str(result["eos_token_id"]), ""),
            ("sampler s per step (CPU)", result["sampler_s_per_step"], ""),
            ("steps shown / run", f"{result['steps_shown']} / {result['steps']}", "all"),
            ("frame after its step, max (s)", lag["max"], f"≤ {BARS['first_frame_s']}"),
            ("frame after its step, median (s)", lag["median"], ""),
            ("  lower bound of the max (s)", lag["lower_bound_max"], ""),
            ("run finished by", result["finish_reason"], ""),
            ("draw a frame, median (ms)", draw["median"], ""),
            ("frames/s the server can draw", result["draw_frames_per_s"], f"≥ {BARS['frames_per_s']}"),
            ("bytes on the wire per frame, max", float(wire["max"]), f"≤ {WIRE_BYTES_PER_POSITION * canvas}"),
            ("bytes on the wire per frame, median", float(wire["median"]), ""),
            ("a whole frame (bytes)", float(result["whole_frame_bytes"]), ""),
            ("slowdown vs headless", result["slowdown"], ""),
            ("same tokens UI/headless", result["same_tokens"], "True")]
    if "browser" in result:
        b = result["browser"]
        rows += [("Chromium: cells drawn", b["cells"], str(canvas)),
                 ("Chromium: empty / overlapping / outside", f"{b['empty']} / {b['overlaps']} / {b['outside']}", "0 / 0 / 0"),
                 ("Chromium: rows, canvas height (px)", f"{b['rows']}, {b['height_px']}", "")]
    print_rows("release-shaped rehearsal", rows, 40, 16)


def main() -> None:
    parser = argparse.ArgumentParser(description="Rehearse the release's vocabulary, canvas and EOS ids with "
                                                 "random weights, served by the app.")
    parser.add_argument("--prompt", default=PROMPT)
    parser.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=False,
                        help="thinking mode (default off)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--browser", action="store_true", help="also check the drawn canvas in Chromium")
    parser.add_argument("--release-steps", type=int, default=8, help="denoising steps per canvas (random weights "
                        "never settle; at seconds a step on a CPU, 8 keep the run inside the app's 60 s budget per run)")
    parser.add_argument("--screenshot", type=Path, default=Path("runs/release-shaped-canvas.png"),
                        help="--browser: where the canvas screenshot goes")
    args = parser.parse_args()
    result = release_shaped(args)
    print_release(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
