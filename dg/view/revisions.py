"""Self-correction, drawn: one revision (`dg.revisions.Revision`) of a recorded run, step by step.

For each step of the revision's canvas: the tokens around the revised position as the step's argmax
draft (the revised position outlined), and one table row with what that position held, its argmax, its
sample, whether the entropy bound accepted it, and its entropy (report §9: self-correction).

    python -m pytest tests/view/test_revisions.py -q
"""

from dg.revisions import Revision
from dg.view.theme import STATE_COLORS, esc, fill, piece_html, plural, token_piece

WINDOW = 6  # canvas positions shown on each side of the revised one
HOW = {"renoised": "not accepted again, so renoised to a random token",
       "resampled": "accepted again with a different sample",
       "argmax": "held to the end, but the committed argmax is another token"}


def summary(revisions: list[Revision]) -> str:
    """One line: how many revisions a run holds, and of which kinds."""
    if not revisions:
        return "No accepted token was changed before its canvas was committed in this run."
    kinds = {how: sum(r.how == how for r in revisions) for how in HOW}
    parts = ", ".join(f"{n} {how}" for how, n in kinds.items() if n)
    final = sum(not r.kept_in_the_end for r in revisions)
    return (f"{plural(len(revisions), 'accepted token')} changed before commit ({parts}); "
            f"{final} of them committed as a different token.")


def _piece(tokenizer, token_id: int) -> str:
    return piece_html(token_piece(tokenizer, token_id))


def _window_row(tokenizer, rec, revision: Revision) -> str:
    """The step's argmax draft around the revised position; accepted cells green, the position outlined."""
    lo, hi = max(0, revision.position - WINDOW), min(len(rec.argmax), revision.position + WINDOW + 1)
    cells = []
    for p in range(lo, hi):
        color = STATE_COLORS["accepted"] if rec.accepted[p] else STATE_COLORS["noise"]
        ring = "outline:3px solid #dc2626;outline-offset:1px;" if p == revision.position else ""
        cells.append(f'<span class="dg-cell" style="display:inline-block;{fill(color)}{ring}" '
                     f'title="#{p}">{_piece(tokenizer, int(rec.argmax[p]))}</span>')
    return f'<div class="dg-grid">{"".join(cells)}</div>'


def _mark(rec, revision: Revision) -> str:
    if rec.step == revision.accepted_step:
        return "accepted here"
    if rec.step == revision.revised_step:
        return "changed here"
    return ""


def revision_html(trace, tokenizer, revision: Revision) -> str:
    """The revision's canvas, step by step: the draft around the position and the position's numbers."""
    steps = trace.steps_of(revision.canvas)
    p = revision.position
    head = (f"<p>Canvas {revision.canvas + 1}, position {p}: "
            f"<b>{_piece(tokenizer, revision.accepted_token)}</b> accepted at step {revision.accepted_step}, "
            f"changed at step {revision.revised_step} ({esc(HOW[revision.how])}); committed "
            f"<b>{_piece(tokenizer, revision.committed_token)}</b>"
            f"{' — the token first accepted' if revision.kept_in_the_end else ''}.</p>")
    rows = []
    for rec in steps:
        accepted = "✓" if rec.accepted[p] else ""
        rows.append(f"<tr><td>{rec.step}</td><td>{_piece(tokenizer, int(rec.noisy[p]))}</td>"
                    f"<td>{_piece(tokenizer, int(rec.argmax[p]))}</td><td>{_piece(tokenizer, int(rec.sampled[p]))}</td>"
                    f"<td>{accepted}</td><td>{float(rec.entropy[p]):.3f}</td><td>{_mark(rec, revision)}</td>"
                    f"<td>{_window_row(tokenizer, rec, revision)}</td></tr>")
    table = ("<div class='dg-scroll'><table class='dg-bars'><tr><th>step</th><th>canvas held</th><th>argmax</th>"
             "<th>sampled</th><th>accepted</th><th>entropy</th><th></th><th>argmax draft around it "
             "(green: accepted this step)</th></tr>" + "".join(rows) + "</table></div>")
    return f'<div class="dg-view dg-revision">{head}{table}</div>'
