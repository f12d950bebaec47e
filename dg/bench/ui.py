"""Quality bar of the app: first canvas frame latency, live frame rate, and what drawing costs generation.

Starts the real server (`python app.py`) on a free port, drives its Generate endpoint with
gradio_client, and times every streamed update as it arrives. The same run (same prompt, settings and
seed) also runs headless through dg.sampler in this process; the sampler's own wall time (RunEnd.t, from
the trace JSON the UI returns) is compared with the headless one. The headless runs come first and their
model is freed before the server loads its own, so one copy of the model is held at a time (two copies
of the 26B model do not fit one GPU). Bars: first canvas frame ≤ 0.5 s after submit, ≥ 10 frames/s, UI
run ≤ 10 % slower. The server runs the model in its worker process, as `python app.py` does
(dg.engine.worker); `--in-process` measures the server with the model in a thread of its own process.

    python -m dg.bench.ui [--model DIR] [--prompt "What is 2487 + 3356?"] [--thinking] [--repeats 3] [--browser]
                          [--in-process]

Prints a table, then one JSON line. gradio_client times updates as they arrive, not paint; `--browser`
also clicks Generate in Chromium and times each new step reaching the page (a MutationObserver). The
release-shaped rehearsal is `python -m dg.bench.release`.
"""

import argparse
import gc
import json
import os
import re
import statistics
import time
from urllib.parse import urljoin

import torch

from dg.bench.served import (DONE_JS, chromium_page, print_rows, start_server, stop_server,
                             streamed_generate, update_bytes, wire_bytes)
from dg.config import KNOBS
from dg.devices import share_cpu
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.trace import Trace
from dg.ui.app import free_port

CANVAS_FRAME = re.compile(r"step \d+ · showing")  # a drawn step, not the "waiting" placeholder
BARS = {"first_frame_s": 0.5, "frames_per_s": 10.0, "slowdown": 0.10}
LONG_PROMPT = "Write a Python function that checks whether a number is prime."


def ui_run(client, prompt: str, thinking: bool, seed: int, knobs: dict, poll_s: float = 0.02) -> dict:
    """One Generate through the server: arrival time of every streamed update, and the returned trace."""
    arrivals, trace, end = streamed_generate(client, prompt, thinking, seed, knobs, poll_s)
    sizes = wire_bytes(arrivals)
    drawn = [(t, out, size) for (t, out), size in zip(arrivals[:-1], sizes[:-1])
             if isinstance(out[0], list) and CANVAS_FRAME.search("".join(out[0]))]
    frames = [t for t, _, _ in drawn]
    span = frames[-1] - frames[0] if len(frames) > 1 else 0.0
    return {"first_frame_s": frames[0] if frames else None, "frames": len(frames),
            "wire_bytes": statistics.median(size for _, _, size in drawn) if drawn else None,
            "whole_frame_bytes": statistics.median(update_bytes(out) for _, out, _ in drawn) if drawn else None,
            "frames_per_s": (len(frames) - 1) / span if span > 0 else 0.0, "end_to_end_s": end,
            "sampler_wall_s": trace.end.t, "steps": len(trace.steps), "token_ids": trace.token_ids}


def headless_run(loaded, prompt: str, thinking: bool, seed: int, config) -> dict:
    t0 = time.perf_counter()
    inputs = build_inputs(loaded.processor, prompt, thinking=thinking, device=loaded.device)
    torch.manual_seed(seed)
    trace = generate_diffusion(loaded.model, inputs, config)
    return {"sampler_wall_s": trace.end.t, "end_to_end_s": time.perf_counter() - t0, "steps": len(trace.steps),
            "token_ids": trace.token_ids}


OBSERVE_JS = """() => {
  const canvas = document.querySelector('#dg-canvas');
  if (window.__dg) window.__dg.observer.disconnect();
  const state = {t0: null, frames: [], last: '', armed: false};
  state.observer = new MutationObserver(() => {
    const m = canvas.innerText.match(/canvas \\d+ · step \\d+ · showing/);
    if (!m) state.armed = true;  // the new run's "waiting" placeholder replaced the last run's canvas
    else if (state.armed && m[0] !== state.last) { state.last = m[0]; state.frames.push(performance.now()); }
  });
  state.observer.observe(canvas, {childList: true, subtree: true, characterData: true});
  window.__dg = state;
  state.t0 = performance.now();
  document.querySelector('#dg-go').click();
}"""
TRACE_LINK = "a[href*='trace.json']"  # the Generate tab's file of the shown run


def browser_run(page, prompt: str, thinking: bool) -> dict:
    """One Generate clicked in Chromium: when each new step's canvas reached the page's DOM."""
    page.get_by_label("Prompt").first.fill(prompt)
    page.get_by_label("Thinking").first.set_checked(thinking)
    old = page.locator(TRACE_LINK).first.get_attribute("href") if page.locator(TRACE_LINK).count() else None
    page.evaluate(OBSERVE_JS)
    page.wait_for_function(DONE_JS, timeout=600_000)
    t0, frames = page.evaluate("() => [window.__dg.t0, window.__dg.frames]")
    frames = [(f - t0) / 1000 for f in frames]
    span = frames[-1] - frames[0] if len(frames) > 1 else 0.0
    page.wait_for_function(f"(old) => {{ const a = document.querySelector(\"{TRACE_LINK}\"); "
                           "return a && a.getAttribute('href') !== old; }", arg=old, timeout=60_000)
    link = urljoin(page.url, page.locator(TRACE_LINK).first.get_attribute("href"))
    trace = Trace.from_json(page.request.get(link).text())  # the run's own record, not the status line
    return {"first_frame_s": frames[0] if frames else None, "frames": len(frames),
            "frames_per_s": (len(frames) - 1) / span if span > 0 else 0.0, "sampler_wall_s": trace.end.t}


def browser_runs(url: str, prompt: str, thinking: bool, repeats: int) -> list[dict]:
    with chromium_page(url) as page:
        return [browser_run(page, prompt, thinking) for _ in range(repeats + 1)][1:]  # the first warms up


def median(rows: list[dict], key: str):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None


def summarise(source: str, args, ui: list[dict], headless: list[dict], browser: list[dict]) -> dict:
    result = {
        "model": source, "prompt": args.prompt, "thinking": args.thinking, "seed": args.seed,
        "server": "in-process" if args.in_process else "worker process",
        "repeats": args.repeats, "steps": ui[0]["steps"],
        "first_frame_s": median(ui, "first_frame_s"), "frames_per_s": median(ui, "frames_per_s"),
        "frames": median(ui, "frames"), "ui_sampler_wall_s": median(ui, "sampler_wall_s"),
        "wire_bytes_per_frame": median(ui, "wire_bytes"), "whole_frame_bytes": median(ui, "whole_frame_bytes"),
        "headless_sampler_wall_s": median(headless, "sampler_wall_s"), "ui_end_to_end_s": median(ui, "end_to_end_s"),
        "headless_end_to_end_s": median(headless, "end_to_end_s"),
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "same_tokens": all(r["token_ids"] == headless[0]["token_ids"] for r in ui + headless),
    }
    result["slowdown"] = result["ui_sampler_wall_s"] / result["headless_sampler_wall_s"] - 1
    # the i-th UI run against the i-th headless run: the spread shows how noisy the machine is
    result["slowdown_per_pair"] = [round(u["sampler_wall_s"] / h["sampler_wall_s"] - 1, 3) for u, h in zip(ui, headless)]
    result["pass"] = {"first_frame": result["first_frame_s"] <= BARS["first_frame_s"],
                      "frames_per_s": result["frames_per_s"] >= BARS["frames_per_s"],
                      "slowdown": result["slowdown"] <= BARS["slowdown"]}
    if browser:
        result["browser"] = {"first_frame_s": median(browser, "first_frame_s"),
                             "frames_per_s": median(browser, "frames_per_s"),
                             "sampler_wall_s": median(browser, "sampler_wall_s")}
        result["browser"]["slowdown"] = result["browser"]["sampler_wall_s"] / result["headless_sampler_wall_s"] - 1
    return result


def print_table(result: dict) -> None:
    rows = [("first canvas frame (s)", result["first_frame_s"], f"≤ {BARS['first_frame_s']}"),
            ("frames/s received", result["frames_per_s"], f"≥ {BARS['frames_per_s']}"),
            ("steps in the run", result["steps"], ""),
            ("bytes on the wire per frame", float(result["wire_bytes_per_frame"]), "median"),
            ("a whole frame (bytes)", float(result["whole_frame_bytes"]), "median"),
            ("sampler wall, UI (s)", result["ui_sampler_wall_s"], ""),
            ("sampler wall, headless (s)", result["headless_sampler_wall_s"], ""),
            ("slowdown", result["slowdown"], f"≤ {BARS['slowdown']:.0%}"),
            ("slowdown, min / max pair", f"{min(result['slowdown_per_pair']):+.2f} / "
                                         f"{max(result['slowdown_per_pair']):+.2f}", ""),
            ("end to end, UI (s)", result["ui_end_to_end_s"], ""),
            ("end to end, headless (s)", result["headless_end_to_end_s"], ""),
            ("same tokens UI/headless", result["same_tokens"], "True"),
            ("load average (1 min)", result["load_average_1m"], f"{result['cpus']} CPUs")]
    if "browser" in result:
        b = result["browser"]
        rows += [("Chromium: first frame (s)", b["first_frame_s"], f"≤ {BARS['first_frame_s']}"),
                 ("Chromium: frames/s drawn", b["frames_per_s"], f"≥ {BARS['frames_per_s']}"),
                 ("Chromium: sampler wall (s)", b["sampler_wall_s"], ""),
                 ("Chromium: slowdown", b["slowdown"], f"≤ {BARS['slowdown']:.0%}")]
    print(f"server: the model {'in a thread' if result['server'] == 'in-process' else 'in a worker process'}")
    print_rows("metric", rows, 28, 12)


def headless_runs(args) -> tuple[str, dict, list[dict]]:
    """The model's source, its sampler knobs and `args.repeats` headless runs (after one that warms up); the
    model is freed when they end."""
    loaded = load(args.model)
    share_cpu(loaded.device)  # the server does the same
    runs = [headless_run(loaded, args.prompt, args.thinking, args.seed, loaded.sampler_config)
            for _ in range(args.repeats + 1)][1:]
    source, knobs = loaded.source, {k.name: getattr(loaded.sampler_config, k.name) for k in KNOBS}
    del loaded
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the server's worker loads the model next: one copy at a time
    return source, knobs, runs


def main() -> None:
    from gradio_client import Client

    parser = argparse.ArgumentParser(description="Benchmark the app's live canvas against a headless run.")
    parser.add_argument("--model", default=None, help="default: the embedded tiny model")
    # a long run on purpose, so the cost per step dominates: outside its skills the embedded model does
    # not settle early (50 steps over two canvases); its sums settle in 4-6 steps
    parser.add_argument("--prompt", default=LONG_PROMPT)
    parser.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=False,
                        help="thinking mode (default off)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time frames drawn in Chromium (/usr/bin/chromium)")
    parser.add_argument("--in-process", action="store_true", help="the server runs the model in a thread of its own "
                        "process (app.py --in-process), not in its worker process")
    args = parser.parse_args()
    source, knobs, headless = headless_runs(args)
    port = free_port()
    server = start_server(args.model, port, in_process=args.in_process)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        ui_run(client, args.prompt, args.thinking, args.seed, knobs)  # warm-up: first-call costs
        ui = [ui_run(client, args.prompt, args.thinking, args.seed, knobs) for _ in range(args.repeats)]
        browser = browser_runs(f"http://127.0.0.1:{port}/", args.prompt, args.thinking, args.repeats) \
            if args.browser else []
    finally:
        stop_server(server)
    result = summarise(source, args, ui, headless, browser)
    print_table(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
