"""Self-correction in a recorded run: tokens the sampler accepted at one step and changed before commit.

The entropy-bound sampler never freezes a token (report Algorithm 1, §9): a position accepted at step n
carries its sampled token into step n + 1's canvas, but at every later step it competes again. If it is
not accepted again it is renoised to a random token, or it is accepted with a different sample; and the
committed canvas is the last step's argmax, which may differ from the token once accepted. Each of these
is a revision; `find_revisions` scans a `Trace` for them, with no position or step chosen by hand.

    python -c "from dg.revisions import find_revisions; help(find_revisions)"
"""

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice

from dg.trace import Trace


@dataclass(frozen=True)
class Revision:
    """Position `position` of canvas `canvas` held `accepted_token` from step `accepted_step`; at step
    `revised_step` it held something else (`how`), and the canvas committed `committed_token` there."""

    canvas: int
    position: int
    accepted_step: int  # 1-based step whose entropy bound accepted the token
    accepted_token: int
    revised_step: int  # 1-based step at which the position first no longer held it
    how: str  # "renoised" | "resampled" | "argmax"
    new_token: int  # what the position held at `revised_step` (a random token when renoised)
    committed_token: int

    @property
    def kept_in_the_end(self) -> bool:
        """The committed token is the one first accepted: the model doubted it and came back."""
        return self.committed_token == self.accepted_token


def _revisions_of_canvas(steps: list, committed) -> list[Revision]:
    """Every (first) revision of every acceptance in one canvas's steps."""
    found = []
    for i, step in enumerate(steps):
        for p in step.accepted.nonzero()[0]:
            token = int(step.sampled[p])
            revision = _first_change(steps, i, int(p), token)
            if revision is not None:
                n, how, new = revision
                found.append(Revision(step.canvas, int(p), step.step, token, n, how, new, int(committed[p])))
    return found


def _first_change(steps: list, i: int, p: int, token: int):
    """(step, how, new token) of the first later step where position p no longer holds `token`, or None.

    After step i the position holds `token` in step i + 1's canvas; step j's own decision (accepted or
    not, its sample) decides step j + 1's canvas, and the last step's argmax is what is committed."""
    for j in range(i + 1, len(steps)):
        previous, current = steps[j - 1], steps[j]
        if int(current.noisy[p]) != token:  # step j - 1 did not keep it: renoised or a new sample accepted
            how = "resampled" if previous.accepted[p] else "renoised"
            return current.step, how, int(current.noisy[p])
    last = steps[-1]
    if int(last.argmax[p]) != token:  # held to the end, but the committed argmax is another token
        return last.step, "argmax", int(last.argmax[p])
    return None


def find_revisions(trace: Trace) -> list[Revision]:
    """Every token accepted at a step and changed later in the same canvas, in run order.

    Counted once per acceptance: a token accepted at step 2 and renoised at step 3 is one revision, a
    token accepted again at step 4 and changed at step 6 another. Canvases still being denoised (a live
    or cancelled run) are skipped: nothing was committed there yet."""
    if trace.mode != "diffusion":
        return []
    found = []
    for canvas in trace.canvases:
        steps = trace.steps_of(canvas.canvas)
        if steps:
            found += _revisions_of_canvas(steps, canvas.committed)
    return found


def best_revision(revisions: list[Revision]) -> Revision | None:
    """The revision worth showing first: one whose committed token differs from the accepted one (a real
    change of mind), then one the canvas itself changed (renoised or resampled, not only its final argmax),
    then the longest-lived acceptance, then the earliest."""
    if not revisions:
        return None
    return min(revisions, key=lambda r: (r.kept_in_the_end, r.how == "argmax", -(r.revised_step - r.accepted_step),
                                         r.canvas, r.accepted_step, r.position))


def first_with_revision(runs: Iterable[tuple[str, Trace]], limit: int) -> tuple[str, Trace, list[Revision], int] | None:
    """The first of at most `limit` (label, trace) runs that holds a revision, as (label, trace, its
    revisions, runs tried); None when none of them does. `runs` is lazy: a run is made only when reached."""
    if limit < 1:
        raise ValueError(f"limit must be >= 1, got {limit}")
    for tried, (label, trace) in enumerate(islice(runs, limit), start=1):
        found = find_revisions(trace)
        if found:
            return label, trace, found, tried
    return None
