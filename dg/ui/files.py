"""The files the app hands out (trace JSON, GIF, HTML replay), Gradio's copies of them and uploads:
private, bounded, and gone when the process ends.

Everything lives in one base folder per process made by `tempfile.mkdtemp` (mode 0700, an
unpredictable name: nothing planted in the temp folder can redirect it). `scratch_dir()` gives a
fresh folder in it for each hand-out; `private_cache()` puts Gradio's cache there too (unless
GRADIO_TEMP_DIR names another). Past `MAX_FOLDERS` folders or `MAX_BYTES` the oldest give way, in
the scratch folders and in the cache alike (the files an app cached as it was built, its examples,
stay: `watch`). The base is removed at exit, on SIGTERM too (`remove_on_exit`).

    python -m pytest tests/ui/test_files.py -q
"""

import atexit
import os
import shutil
import signal
import tempfile
import threading
import weakref
from pathlib import Path

MAX_FOLDERS = 256  # handed-out folders (one per export or finished run) kept at once
MAX_BYTES = 256 * 2**20  # and their bytes; the same bounds hold for Gradio's cache

_lock = threading.Lock()
_base: Path | None = None
_apps: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # watched gr.Blocks → their pinned files
CACHE = "gradio"  # Gradio's cache, inside the base
_before_build: frozenset = frozenset()  # the cache's files when the app being built started


def base() -> Path:
    """This process's private folder (created on first use, removed at exit)."""
    global _base
    if _base is None:
        _base = Path(tempfile.mkdtemp(prefix="dg-app-"))
        atexit.register(shutil.rmtree, _base, ignore_errors=True)
    return _base


def scratch_dir() -> Path:
    """A fresh private folder for files handed out now; the oldest folders and cache files give way."""
    with _lock:
        folder = Path(tempfile.mkdtemp(dir=base()))
        folders = sorted((p for p in base().iterdir() if p != folder and p.name != CACHE), key=_mtime)
        _drop_oldest(folders, shutil.rmtree)
        _bound_cache()
    return folder


def private_cache() -> None:
    """Gradio's cache for this process in the private base (call before building the app), unless the
    operator chose one with GRADIO_TEMP_DIR."""
    global _before_build
    os.environ.setdefault("GRADIO_TEMP_DIR", str(base() / CACHE))
    _before_build = _cached()


def _cached() -> frozenset:
    cache = Path(os.environ.get("GRADIO_TEMP_DIR", base() / CACHE))
    return frozenset(f for f in cache.rglob("*") if f.is_file()) if cache.is_dir() else frozenset()


def _bound_cache() -> None:
    """Hold the private Gradio cache to MAX_FOLDERS files and MAX_BYTES, oldest first; the files the
    watched apps cached while they were built stay."""
    cache = base() / CACHE
    if os.environ.get("GRADIO_TEMP_DIR") != str(cache) or not cache.is_dir():
        return
    pinned = set().union(*_apps.values())
    cached = sorted((f for f in cache.rglob("*") if f.is_file() and f not in pinned), key=_mtime)

    def remove(path: Path) -> None:
        path.unlink(missing_ok=True)
        try:
            path.parent.rmdir()  # Gradio keeps each file in a folder named by its hash
        except OSError:
            pass

    _drop_oldest(cached, remove)


def _drop_oldest(paths: list[Path], remove) -> None:
    sizes = [_size(p) for p in paths]
    total = sum(sizes)
    for i, path in enumerate(paths):
        if len(paths) - i < MAX_FOLDERS and total <= MAX_BYTES:
            break
        remove(path)
        total -= sizes[i]


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def watch(app):
    """Keep the files `app` (a gr.Blocks built since `private_cache()`) cached as it was built, such as its
    examples, from pruning."""
    _apps[app] = _cached() - _before_build
    return app


def remove_on_exit() -> None:
    """SIGTERM ends the process as Ctrl-C does (Gradio closes its server), so the exit handlers that
    remove these files run; the default SIGTERM would skip them."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)
