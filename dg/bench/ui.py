"""Quality bar of the app: first canvas frame latency, live frame rate, and what drawing costs generation.

Starts the real server (`python app.py`) on a free port, drives its Generate endpoint with
gradio_client, and times every streamed update as it arrives. The same run (same prompt, settings and
seed) also runs headless through dg.sampler in this process, alternating with the UI runs; the
sampler's own wall time (RunEnd.t, from the trace JSON the UI returns) is compared with the headless
one. Bars: first canvas frame ≤ 0.5 s after submit, ≥ 10 frames/s, UI run ≤ 10 % slower. The server
runs the model in its worker process, as `python app.py` does (dg.ui.host); `--in-process` measures the
server with the model in a thread of its own process instead.

    python -m dg.bench.ui [--model DIR] [--prompt "What is 487 + 356?"] [--no-thinking] [--repeats 3] [--browser]
                          [--in-process]

Prints a table, then one JSON line. gradio_client times updates as they arrive, not paint; `--browser`
also clicks Generate in Chromium and times each new step reaching the page (a MutationObserver).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin

import torch

from dg.config import KNOBS
from dg.loading import load
from dg.prompts import build_inputs
from dg.sampler import generate_diffusion
from dg.trace import Trace
from dg.ui.app import free_port
from dg.ui.runs import share_cpu

APP = Path(__file__).resolve().parents[2] / "app.py"
CANVAS_FRAME = re.compile(r"step \d+ · showing")  # a drawn step, not the "waiting" placeholder
BARS = {"first_frame_s": 0.5, "frames_per_s": 10.0, "slowdown": 0.10}


def start_server(model: str | None, port: int, timeout: float = 180.0, in_process: bool = False) -> subprocess.Popen:
    """`python app.py` in a subprocess; returns once it answers HTTP."""
    import httpx

    cmd = [sys.executable, str(APP), "--port", str(port)] + (["--model", str(model)] if model else [])
    cmd += ["--in-process"] if in_process else []
    # its own session, as a deployed server has: on Linux each session is a scheduling group, and a
    # server sharing ours would have its sampler's CPU share split with this client's
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"app.py exited with {proc.returncode}:\n{proc.stdout.read()}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=1.0).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    proc.kill()
    raise TimeoutError(f"app.py did not answer on port {port} within {timeout:.0f} s")


def ui_run(client, prompt: str, thinking: bool, seed: int, knobs: dict, poll_s: float = 0.02) -> dict:
    """One Generate through the server: arrival time of every streamed update, and the returned trace."""
    t0 = time.perf_counter()
    job = client.submit(prompt=prompt, image=None, thinking=thinking, seed=seed, api_name="/generate", **knobs)
    arrivals, seen = [], 0
    while not job.done() or len(job.outputs()) > seen:
        outputs = job.outputs()
        now = time.perf_counter() - t0
        for out in outputs[seen:]:
            arrivals.append((now, out))
        seen = len(outputs)
        time.sleep(poll_s)
    final = job.result()
    end = time.perf_counter() - t0
    trace_path = next(out for out in final if isinstance(out, str) and out.endswith("trace.json"))
    trace = Trace.from_json(Path(trace_path).read_text())
    frames = [t for t, out in arrivals[:-1] if isinstance(out[0], list) and CANVAS_FRAME.search("".join(out[0]))]
    span = frames[-1] - frames[0] if len(frames) > 1 else 0.0
    return {"first_frame_s": frames[0] if frames else None, "frames": len(frames),
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
    page.wait_for_function("() => /^(Done|Stopped|Failed)/.test(document.querySelector('#dg-status').innerText)",
                           timeout=600_000)
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
    import tempfile

    from playwright.sync_api import sync_playwright

    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path="/usr/bin/chromium", headless=True,
                                                       args=flags, viewport={"width": 1400, "height": 1200})
        page = context.new_page()
        page.goto(url)
        runs = [browser_run(page, prompt, thinking) for _ in range(repeats + 1)][1:]  # the first warms up
        context.close()
    return runs


def median(rows: list[dict], key: str):
    values = [r[key] for r in rows if r[key] is not None]
    return statistics.median(values) if values else None


def summarise(loaded, args, ui: list[dict], headless: list[dict], browser: list[dict]) -> dict:
    result = {
        "model": loaded.source, "prompt": args.prompt, "thinking": args.thinking, "seed": args.seed,
        "server": "in-process" if args.in_process else "worker process",
        "repeats": args.repeats, "steps": ui[0]["steps"],
        "first_frame_s": median(ui, "first_frame_s"), "frames_per_s": median(ui, "frames_per_s"),
        "frames": median(ui, "frames"), "ui_sampler_wall_s": median(ui, "sampler_wall_s"),
        "headless_sampler_wall_s": median(headless, "sampler_wall_s"), "ui_end_to_end_s": median(ui, "end_to_end_s"),
        "headless_end_to_end_s": median(headless, "end_to_end_s"),
        "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
        "same_tokens": all(r["token_ids"] == headless[0]["token_ids"] for r in ui + headless),
    }
    result["slowdown"] = result["ui_sampler_wall_s"] / result["headless_sampler_wall_s"] - 1
    # each UI run against the headless run just before it: the spread shows how noisy the machine is
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
    print(f"{'metric':<28}{'value':>12}  bar")
    for name, value, bar in rows:
        print(f"{name:<28}{value:>12.3f}  {bar}" if isinstance(value, float) else f"{name:<28}{value!s:>12}  {bar}")


def main() -> None:
    from gradio_client import Client

    parser = argparse.ArgumentParser(description="Benchmark the app's live canvas against a headless run.")
    parser.add_argument("--model", default=None, help="default: the embedded tiny model")
    parser.add_argument("--prompt", default="What is 487 + 356?")
    parser.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=True,
                        help="thinking mode (default on: a thought canvas, then the answer)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--browser", action="store_true", help="also time frames drawn in Chromium (/usr/bin/chromium)")
    parser.add_argument("--in-process", action="store_true", help="the server runs the model in a thread of its own "
                        "process (app.py --in-process), not in its worker process")
    args = parser.parse_args()

    loaded = load(args.model)
    share_cpu(loaded.device)  # the server does the same
    config = loaded.sampler_config
    knobs = {k.name: getattr(config, k.name) for k in KNOBS}
    port = free_port()
    server = start_server(args.model, port, in_process=args.in_process)
    try:
        client = Client(f"http://127.0.0.1:{port}/", verbose=False)
        ui_run(client, args.prompt, args.thinking, args.seed, knobs)  # warm-up: first-call costs on both sides
        headless_run(loaded, args.prompt, args.thinking, args.seed, config)
        ui, headless = [], []
        for _ in range(args.repeats):
            headless.append(headless_run(loaded, args.prompt, args.thinking, args.seed, config))
            ui.append(ui_run(client, args.prompt, args.thinking, args.seed, knobs))
        browser = browser_runs(f"http://127.0.0.1:{port}/", args.prompt, args.thinking, args.repeats) \
            if args.browser else []
    finally:
        server.terminate()
        server.wait(timeout=30)
    result = summarise(loaded, args, ui, headless, browser)
    print_table(result)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
