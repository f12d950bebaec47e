"""What the app's benchmarks share: `python app.py` in a subprocess, one Generate streamed and timed as it
arrives, the bytes each update puts on the wire, a Chromium page on the app, and the result table.

    python -m dg.bench.ui          # the live canvas against a headless run (uses this module)
    python -m dg.bench.release     # the release-shaped rehearsal (uses this module)
"""

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from dg.trace import Trace

APP = Path(__file__).resolve().parents[2] / "app.py"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"]
DONE_JS = "() => /^(Done|Stopped|Failed)/.test(document.querySelector('#dg-status').innerText)"


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


def stop_server(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=30)


def streamed_generate(client, prompt: str, thinking: bool, seed: int, knobs: dict,
                      poll_s: float = 0.02) -> tuple[list[tuple[float, tuple]], Trace, float]:
    """One Generate through the server: (seconds after submit, update) for every streamed update as it
    arrived, the run's trace (the JSON file it returns), and the seconds until its result."""
    t0 = time.perf_counter()
    job = client.submit(prompt=prompt, image=None, thinking=thinking, seed=seed, api_name="/generate", **knobs)
    arrivals, seen = [], 0
    while not job.done() or len(job.outputs()) > seen:
        outputs = job.outputs()
        arrivals += [(time.perf_counter() - t0, out) for out in outputs[seen:]]
        seen = len(outputs)
        time.sleep(poll_s)
    final = job.result()
    end = time.perf_counter() - t0
    trace_path = next(out for out in final if isinstance(out, str) and out.endswith("trace.json"))
    return arrivals, Trace.from_json(Path(trace_path).read_text()), end


def wire_bytes(arrivals: list[tuple[float, tuple]]) -> list[int]:
    """Bytes each streamed update put on the wire: Gradio sends every output as its diff against the
    output before (`gradio.utils.diff`), JSON-encoded; the first update goes whole."""
    from gradio.utils import diff

    sizes, before = [], None
    for _, out in arrivals:
        sent = out if before is None else [diff(b, o) for b, o in zip(before, out)]
        sizes.append(len(json.dumps(sent, ensure_ascii=False).encode()))
        before = out
    return sizes


def update_bytes(out) -> int:
    """Bytes of a whole update, as if it were sent without the diff."""
    return len(json.dumps(out, ensure_ascii=False).encode())


@contextmanager
def chromium_page(url: str):
    """A page of Debian's Chromium (headless, a fresh profile) open on `url`."""
    import tempfile

    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                       args=CHROMIUM_FLAGS, viewport={"width": 1400, "height": 1200})
        try:
            page = context.new_page()
            page.goto(url)
            yield page
        finally:
            context.close()


def print_rows(title: str, rows: list[tuple], name_width: int, value_width: int) -> None:
    """The result table: one (name, value, bar) per row, floats to three decimals."""
    print(f"{title:<{name_width}}{'value':>{value_width}}  bar")
    for name, value, bar in rows:
        shown = f"{value:>{value_width}.3f}" if isinstance(value, float) else f"{value!s:>{value_width}}"
        print(f"{name:<{name_width}}{shown}  {bar}")
