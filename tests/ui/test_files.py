"""Files the app hands out: a private folder no planted link can redirect, bounded (oldest first) with
the app's copies in Gradio's cache, and removed when the process ends, on SIGTERM too."""

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from gradio_client import Client

from dg.ui import files

ROOT = Path(__file__).resolve().parents[2]


def test_the_scratch_folder_is_private_and_a_planted_link_is_never_followed(tmp_path):
    victim = tmp_path / "victim"
    (victim / "keep-me").mkdir(parents=True)
    planted = Path(tempfile.gettempdir()) / f"dg-app-{os.getpid()}"  # the name the app once used
    made_link = not planted.exists()
    if made_link:
        planted.symlink_to(victim)
    try:
        folders = [files.scratch_dir() for _ in range(3)]
    finally:
        if made_link:
            planted.unlink()
    assert sorted(p.name for p in victim.iterdir()) == ["keep-me"]  # nothing written into the link's target
    assert all(f.parent == files.base() and not f.is_symlink() for f in folders)
    assert stat.S_IMODE(files.base().stat().st_mode) == 0o700 and files.base().name != planted.name


def test_handed_out_folders_stay_within_the_count_and_the_bytes(monkeypatch):
    monkeypatch.setattr(files, "MAX_FOLDERS", 5)
    made = []
    for i in range(12):
        folder = files.scratch_dir()
        (folder / "trace.json").write_text("x" * 1000)
        os.utime(folder, (time.time() + i, time.time() + i))  # a strict age order, whatever the clock's grain
        made.append(folder)
    left = sorted(p for p in files.base().iterdir() if p.name != files.CACHE)
    assert len(left) <= 5 and made[-1] in left and made[0] not in left
    monkeypatch.setattr(files, "MAX_BYTES", 2500)
    newest = files.scratch_dir()
    scratch = [f for p in files.base().iterdir() if p.name != files.CACHE for f in p.rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in scratch) <= 2500 and newest.exists()


def test_gradio_s_copies_and_uploads_stay_in_the_private_folder_within_the_bounds(url, tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_FOLDERS", 4)
    cache = files.base() / files.CACHE
    assert os.environ["GRADIO_TEMP_DIR"] == str(cache)
    pinned = set().union(*files._apps.values())  # the examples, cached as the app was built
    client = Client(url, verbose=False, download_files=str(tmp_path))
    for seed in range(8):  # each run hands out its trace: a scratch folder, and Gradio's copy in its cache
        client.predict(prompt="What is 12 + 30?", image=None, thinking=False, seed=seed, api_name="/generate",
                       max_denoising_steps=4, max_new_tokens=16)
    copies = [f for f in cache.rglob("trace*.json")]
    assert 1 <= len(copies) <= 4 + 1  # one copy may follow the last prune
    assert pinned and all(f.exists() for f in pinned)  # the examples' pictures stay
    assert len(list(files.base().iterdir())) <= 4 + 1  # + the cache folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_sigterm_ends_the_app_and_removes_every_file_it_handed_out(tmp_path, checkpoint_dir):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != "GRADIO_TEMP_DIR"}
    env |= {"TMPDIR": str(tmp_path), "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    app = subprocess.Popen([sys.executable, "app.py", "--model", str(checkpoint_dir), "--port", str(port)],
                           cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while True:
            try:
                client = Client(f"http://127.0.0.1:{port}/", verbose=False, download_files=False)
                break
            except Exception:
                assert app.poll() is None and time.time() < deadline, app.stderr.read() if app.poll() else "no server"
                time.sleep(0.5)
        client.predict(prompt="What is 12 + 30?", image=None, thinking=False, seed=0, api_name="/generate",
                       max_denoising_steps=4, max_new_tokens=16)
        handed_out = list(tmp_path.glob("dg-app-*/**/trace*.json"))
        assert len(handed_out) >= 2  # the scratch file and Gradio's copy, both in the private folder
        app.send_signal(signal.SIGTERM)
        assert app.wait(60) is not None
    finally:
        if app.poll() is None:
            app.kill()
    assert not list(tmp_path.glob("dg-app-*")) and not list(tmp_path.rglob("trace*.json"))
