"""`python app.py` follows Gradio's conventions: GRADIO_SERVER_PORT / GRADIO_SERVER_NAME choose where it
listens when --port / --host are not given, the URL is printed, and a taken port is a one-line error."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from dg.ui.app import free_port

APP = Path(__file__).resolve().parents[2] / "app.py"


def start(checkpoint_dir, *args, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(APP), "--model", str(checkpoint_dir), *args], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1", **env})


def test_the_app_listens_where_gradios_environment_variables_say_and_prints_the_url(checkpoint_dir):
    port = free_port()
    proc = start(checkpoint_dir, GRADIO_SERVER_PORT=str(port), GRADIO_SERVER_NAME="127.0.0.1")
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if httpx.get(f"http://127.0.0.1:{port}/", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        else:
            raise AssertionError(f"nothing answered on port {port}")
    finally:
        proc.terminate()
        out, _ = proc.communicate(timeout=30)
    assert f"http://127.0.0.1:{port}" in out


def test_a_taken_port_is_a_one_line_error_that_says_what_to_do(checkpoint_dir):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = start(checkpoint_dir, "--port", str(port))
        out, _ = proc.communicate(timeout=120)
    assert proc.returncode != 0 and "Traceback" not in out
    assert out.strip().splitlines()[-1] == (f"app.py: port {port} is taken; pass another --port N, or leave --port "
                                            "out to take the next free one")
