"""What one browser session keeps: its finished runs for the replay, and the files handed out to it
(the Markdown lines under a run are views: dg.view.tables).

`History` is the typed run history behind the run picker: immutable (Gradio state is replaced, not
mutated), newest run last, each run under a unique label such as '#3 A What is 487 + 356? · 24 steps'.

    python -m pytest tests/engine/test_session.py -q
"""

from dataclasses import dataclass, field
from pathlib import Path

from dg.trace import Trace
from dg.engine import files
from dg.engine.memory import KEPT, newest_within
from dg.view.theme import plural

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
    """A session's finished runs, oldest first; at most `limit` of them, within dg.engine.memory's bounds."""

    runs: tuple[KeptRun, ...] = ()
    limit: int = MAX_RUNS

    def keep(self, prompt: str, trace: Trace, tag: str = "", meta: dict | None = None) -> "History":
        """A new history with this run appended under a new label; only the newest `limit` runs stay.
        `meta` says what produced the run (the prompt at least)."""
        n = self.runs[-1].n + 1 if self.runs else 1
        stopped = " (stopped)" if trace.end is not None and trace.end.finish_reason == "cancelled" else ""
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


def scratch_dir() -> Path:
    """A fresh private folder for files the UI hands out (trace JSON, GIF, HTML replay): dg.engine.files,
    bounded, removed at exit."""
    return files.scratch_dir()
