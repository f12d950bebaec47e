"""Bounded memory for the runs sessions keep for replay: per session and in total, oldest first.

A session's history keeps at most `SESSION_BYTES` of traces (`newest_within` drops its oldest runs past it).
Across all sessions `KEPT` tracks every kept trace, weakly, so a run that leaves a history or a
session that Gradio dropped frees its share at once; past `TOTAL_BYTES` the oldest kept runs lose
their per-step records (their text, canvases and metrics stay; their replay is gone). `trim` gives the
heap's freed pages back to the system after runs.

    python -m pytest tests/engine/test_memory.py -q
"""

import ctypes
import ctypes.util
import threading
import time
import weakref
from collections import OrderedDict

from dg.trace import record_nbytes

MAX_SESSIONS = 256  # sessions whose state Gradio keeps, the least recently used dropped first: each costs
# ~1 MB of RSS (its copy of every component's config, measured), so Gradio's default of 10,000 grew ~10 GB
SESSION_BYTES = 64 * 2**20  # one session's kept traces
TOTAL_BYTES = 512 * 2**20  # every session's kept traces together
RECORD_BYTES = 200  # a record's own overhead besides its arrays (measured: ~150–250 B)


def nbytes(trace) -> int:
    """The memory a trace's records hold: their arrays plus a per-record overhead."""
    records = trace.records
    return sum(record_nbytes(r) for r in records) + RECORD_BYTES * len(records)


def newest_within(runs: tuple, budget: int | None = None) -> tuple:
    """The newest of `runs` (objects with a `.trace`, oldest first) that fit in `budget` bytes; the
    newest run always stays."""
    budget = SESSION_BYTES if budget is None else budget
    sizes = [nbytes(r.trace) for r in runs]
    start = 0
    while start < len(runs) - 1 and sum(sizes[start:]) > budget:
        start += 1
    return runs[start:]


class KeptTraces:
    """Every kept trace of the process, oldest first, with their bytes; past `limit` the oldest shed
    their steps."""

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self._traces: OrderedDict[int, tuple[weakref.ref, int]] = OrderedDict()
        self._bytes = 0  # the sum of the sizes in `_traces`
        self._lock = threading.RLock()  # a weakref callback can fire while `add` holds it

    def add(self, trace) -> None:
        key = id(trace)
        size = nbytes(trace)
        with self._lock:
            if key in self._traces:
                return
            self._traces[key] = (weakref.ref(trace, lambda _, k=key: self._forget(k)), size)
            self._bytes += size
            limit = TOTAL_BYTES if self.limit is None else self.limit
            while self._bytes > limit and len(self._traces) > 1:
                _, (ref, old_size) = self._traces.popitem(last=False)
                self._bytes -= old_size
                if (old := ref()) is not None:
                    old.steps = []  # rebound, not cleared: a reader holding the old list keeps it

    def _forget(self, key: int) -> None:
        with self._lock:
            if (entry := self._traces.pop(key, None)) is not None:
                self._bytes -= entry[1]

    @property
    def total(self) -> int:
        """Bytes of the kept traces still whole."""
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._traces)


KEPT = KeptTraces()

TRIM_EVERY_S = 2.0  # at most this often
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None) if hasattr(ctypes, "CDLL") else None
_last_trim = 0.0


def trim() -> bool:
    """Hand the heap's free pages back to the system (glibc `malloc_trim`), at most every TRIM_EVERY_S.

    A run frees what it allocated, but glibc keeps freed pages in its per-thread arenas: measured on the
    served embedded model, the server's RSS grew ~2 MB a run without this, and fell below its start
    after one `malloc_trim(0)`. Elsewhere (no glibc) it does nothing."""
    global _last_trim
    now = time.monotonic()
    if now - _last_trim < TRIM_EVERY_S or not hasattr(_libc, "malloc_trim"):
        return False
    _last_trim = now
    _libc.malloc_trim(0)
    return True
