"""What one browser session keeps: its finished runs for the replay, bounded per session and in total.

`History` is the typed run history behind the run picker: immutable (Gradio state is replaced, not
mutated), newest run last, each run under a unique label such as '#3 A What is 487 + 356? · 24 steps'.
A session's history keeps at most `SESSION_BYTES` of traces (`newest_within` drops its oldest runs past
it). Across all sessions `KEPT` tracks every kept trace, weakly, so a run that leaves a history or a
session that Gradio dropped frees its share at once; past `TOTAL_BYTES` the oldest kept runs lose their
per-step records (their text, canvases and metrics stay; their replay is gone). The Markdown lines under
a run are views (dg.view.tables); the files handed out are dg.ui.files'.

    python -m pytest tests/ui/test_kept.py -q
"""

import threading
import weakref
from collections import OrderedDict
from dataclasses import dataclass, field

from dg.trace import Trace, record_nbytes
from dg.view.theme import plural

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


MAX_RUNS = 20  # finished runs a session keeps for replay
LABEL_PROMPT_CHARS = 32  # a longer prompt is cut in the run's label


@dataclass(frozen=True, eq=False)
class KeptRun:
    n: int  # 1-based run number within the session
    label: str
    trace: Trace
    meta: dict = field(default_factory=dict)  # what produced it (prompt, image, thinking, seed, model): exports say it


@dataclass(frozen=True, eq=False)  # eq=False: Gradio tells a changed state by identity, never compares traces
class History:
    """A session's finished runs, oldest first; at most `limit` of them, within this module's bounds."""

    runs: tuple[KeptRun, ...] = ()
    limit: int = MAX_RUNS

    def keep(self, prompt: str, trace: Trace, tag: str = "", meta: dict | None = None) -> "History":
        """A new history with this run appended under a new label; only the newest `limit` runs stay.
        `meta` says what produced the run (the prompt at least)."""
        n = self.runs[-1].n + 1 if self.runs else 1
        stopped = " (stopped)" if trace.cancelled else ""
        short = prompt if len(prompt) <= LABEL_PROMPT_CHARS else prompt[:LABEL_PROMPT_CHARS - 1] + "…"
        label = f"#{n}{tag} {short} · {plural(len(trace.steps or trace.tokens), 'step')}{stopped}"
        kept = KeptRun(n, label, trace, {"prompt": prompt, **(meta or {})})
        KEPT.add(trace)  # the bound over every session's kept runs
        return History(newest_within((*self.runs, kept)[-self.limit:]), self.limit)

    def run(self, label: str | None) -> KeptRun | None:
        """The run with this label, else the newest one, else None."""
        return next((r for r in reversed(self.runs) if r.label == label), self.runs[-1] if self.runs else None)

    def find(self, label: str | None) -> Trace | None:
        """The trace of `run(label)`."""
        match = self.run(label)
        return match.trace if match is not None else None

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.runs]

    def __len__(self) -> int:
        return len(self.runs)
