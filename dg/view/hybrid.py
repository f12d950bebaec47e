"""Views of a hybrid run (dg.hybrid): each verify round's verdict on the draft, and one round in pictures.

A hybrid trace holds the sampler's step records (the draft, with every verified token pinned), a
`RoundRecord` per verify round and the verified tokens. A round is `draft_steps` run steps followed by
one causal encoder pass: its draft's cells are then *verified* (pinned from earlier rounds), *agreed*
(equal to greedy AR's token), AR's own *bonus* token at the first disagreement, and the *rejected*
suffix after it (colours and words: `dg.view.theme`). `round_states` overlays that verdict on the
sampler's own states (which `dg.view.render` computes); `verify_round` draws one round in four pictures
for the Learn tab: the draft → AR's argmax under it → the accepted prefix → the bonus token.

    python -m pytest tests/view/test_hybrid.py -q
"""

import numpy as np

from dg.trace import Trace
from dg.view.theme import STATE_COLORS, STATE_SHORT, esc, plural, token_piece
from dg.view.walkthrough import cells_row

VERIFY_STAGES = ("draft", "ar_argmax", "accepted", "bonus")


def draft_steps(trace) -> int:
    """Run steps per verify round (the run's `draft_steps` setting)."""
    return int(trace.start.config.get("draft_steps", 1)) if trace.start else 1


def round_index(trace, step_index: int) -> int | None:
    """The 0-based verify round whose draft run step `step_index` made, once that round has verified it
    (None while the draft waits for its verify pass, or for a draft step before a round's last)."""
    j, within = divmod(step_index, draft_steps(trace))
    return j if within == draft_steps(trace) - 1 and j < len(trace.rounds) else None


def tokens_verified(trace, rounds_done: int) -> int:
    """Verified tokens once the first `rounds_done` rounds have ended (the first comes before any round)."""
    if rounds_done < len(trace.rounds):
        following = trace.rounds[rounds_done]
        return following.canvas * trace.start.canvas_length + following.held
    return len(trace.tokens)


def verdict(trace, j: int) -> dict:
    """Round j's verdict on its canvas: positions `held` … as `agreed`, the `bonus` position (None when
    the whole draft agreed, or the run ended first) and where the run's tokens end in this canvas."""
    rnd, length = trace.rounds[j], trace.start.canvas_length
    verified_here = tokens_verified(trace, j + 1) - rnd.canvas * length
    agreed_end = min(rnd.held + rnd.accepted, verified_here, length)
    bonus = agreed_end if rnd.bonus is not None and agreed_end < length and agreed_end < verified_here else None
    return {"round": rnd, "agreed": range(rnd.held, agreed_end), "bonus": bonus, "end": min(verified_here, length)}


def round_states(trace, step_index: int, states: list[str]) -> list[str]:
    """The sampler's `states` of run step `step_index` with the hybrid verdict laid over them: pinned cells
    are verified; once the round's verify pass has run, its agreed run, AR's bonus and the rejected rest."""
    rec = trace.steps[step_index]
    out = ["verified" if rec.pinned is not None and rec.pinned[p] else s for p, s in enumerate(states)]
    j = round_index(trace, step_index)
    if j is None:
        return out
    v = verdict(trace, j)
    ended = trace.end is not None and j == len(trace.rounds) - 1
    for pos in range(v["round"].held, len(out)):
        if pos in v["agreed"]:
            out[pos] = "agreed"
        elif pos == v["bonus"]:
            out[pos] = "bonus"
        else:
            out[pos] = "pad" if ended and pos >= v["end"] else "rejected"
    return out


def shown_ids(trace, step_index: int, ids: np.ndarray) -> np.ndarray:
    """The draft's ids with AR's bonus token in its cell once the round has verified it."""
    j = round_index(trace, step_index)
    bonus = verdict(trace, j)["bonus"] if j is not None else None
    if bonus is None:
        return ids
    ids = np.array(ids)
    ids[bonus] = trace.rounds[j].bonus
    return ids


def verified_rows(trace, before: int) -> list[tuple[int, list[int]]]:
    """(canvas, verified token ids) of every canvas before canvas `before`: hybrid's committed rows."""
    length = trace.start.canvas_length
    ids = [r.token_id for r in trace.tokens]
    return [(k, ids[k * length:(k + 1) * length]) for k in range(before) if ids[k * length:(k + 1) * length]]


def _own_token(v: dict) -> str:
    """Where the round's own AR token went: into this canvas, to the next one, or nowhere (the run ended)."""
    if v["bonus"] is not None:
        return "+ AR's own token"
    return "AR's own token starts the next canvas" if v["round"].bonus is not None else "the run ended"


def round_summary(trace, j: int) -> str:
    """'AR kept n draft tokens, + AR's own token': what round j gained."""
    v = verdict(trace, j)
    return f"AR kept {plural(len(v['agreed']), 'draft token')}, {_own_token(v)}"


def round_label(trace, step_index: int) -> str:
    """' · verify round r: AR kept n draft tokens, + AR's own token', once the step's round has verified it."""
    j = round_index(trace, step_index)
    if j is None:
        return " · drafting: AR has not verified this draft yet"
    return f" · verify round {j + 1}: {round_summary(trace, j)}"


def round_facts(trace, step_index: int) -> dict:
    """The step panel's facts of the round run step `step_index` belongs to (empty before its verify pass)."""
    j = round_index(trace, step_index)
    if j is None:
        return {}
    v = verdict(trace, j)
    return {"round": f"{j + 1}/{len(trace.rounds)}", "verified before": v["round"].held,
            "draft = AR": len(v["agreed"]), "then": _own_token(v)}


def trace_until(trace, step_index: int) -> Trace:
    """The hybrid run as it stood after run step `step_index`: its steps, the rounds verified by then and
    their tokens."""
    rounds_done = (step_index + 1) // draft_steps(trace)
    rounds = trace.rounds[:rounds_done]
    n = tokens_verified(trace, rounds_done)
    return Trace(start=trace.start, steps=trace.steps[:step_index + 1], tokens=trace.tokens[:n], rounds=rounds)


def instructive_round(trace) -> int:
    """The round to explain first: one where AR kept some of the draft and gained its own token after it,
    the most kept first; 0 for a trace without such."""
    def score(j):
        v = verdict(trace, j)
        return (v["bonus"] is not None and len(v["agreed"]) > 0, len(v["agreed"]), -j)

    return max(range(len(trace.rounds)), key=score, default=0)


def _colors(states) -> list[str]:
    return [STATE_COLORS[s] for s in states]


def verify_round(trace, tokenizer, j: int) -> list[dict]:
    """Round j of a hybrid trace in four pictures (`VERIFY_STAGES`), each with a title, its HTML and its
    numbers: the draft, AR's argmax under it, the accepted prefix, and AR's bonus token."""
    if trace.mode != "hybrid":
        raise ValueError(f"verify_round explains a hybrid round; this is a {trace.mode} trace")
    if not 0 <= j < len(trace.rounds):
        raise ValueError(f"round must be in [0, {len(trace.rounds) - 1}], got {j}")
    v = verdict(trace, j)
    rnd, draft = v["round"], [int(t) for t in v["round"].draft]
    held, agreed, bonus = rnd.held, v["agreed"], v["bonus"]
    first = held + len(agreed)  # the first disagreement (or the canvas's end)
    pieces = [token_piece(tokenizer, t) for t in draft]

    def states(upto_bonus: bool, rest: str) -> list[str]:
        return ["verified" if p < held else "agreed" if p in agreed else
                "bonus" if upto_bonus and p == bonus else rest for p in range(len(draft))]

    draft_states = ["verified" if p < held else "noise" for p in range(len(draft))]
    stages = [("draft", f"The draft: {plural(held, 'token')} pinned, {len(draft) - held} drafted by the sampler",
               cells_row(tokenizer, draft, _colors(draft_states),
                         [STATE_SHORT["verified"] if p < held else "drafted this round" for p in range(len(draft))],
                         f"canvas {rnd.canvas + 1} · round {j + 1}: the decoder's argmax, pinned tokens held"),
               f"Blue: tokens AR verified in earlier rounds, pinned. Grey: {len(draft) - held} tokens the sampler "
               "drafted in one denoising step.")]
    ar_ids = [draft[p] if p < first else (rnd.bonus if p == bonus else draft[p]) for p in range(len(draft))]
    ar_states = states(True, "noise")
    tips = [f"AR: {pieces[p]} = draft" if p in agreed else
            f"AR: {token_piece(tokenizer, rnd.bonus)}, the draft had {pieces[p]}" if p == bonus else
            "verified" if p < held else "not compared: past the first disagreement" for p in range(len(draft))]
    stages.append(("ar_argmax", "AR's argmax under the draft: one causal encoder pass over the whole canvas",
                   cells_row(tokenizer, ar_ids, _colors(ar_states), tips, "greedy AR's next token at each position"),
                   f"Teal: AR's token equals the draft's ({len(agreed)} in a row). Orange: the first disagreement, "
                   "AR's own token. Grey after it: AR read a draft it disagrees with there, so nothing is compared."))
    stages.append(("accepted", f"The accepted prefix: {plural(len(agreed), 'draft token')} kept",
                   cells_row(tokenizer, draft, _colors(states(False, "rejected")), label="kept (teal), rejected (red)"),
                   f"The longest run of draft tokens equal to AR's ({len(agreed)}) is kept; the "
                   f"{max(len(draft) - first, 0)} after it are rejected and drafted again next round."))
    gained = len(agreed) + (bonus is not None)
    after = states(True, "rejected")
    stages.append(("bonus", "AR's own token at the first disagreement" if bonus is not None else
                   "No bonus in this canvas: the whole draft agreed, AR's next token starts the next canvas",
                   cells_row(tokenizer, ar_ids, _colors(after), label=f"this round gained {plural(gained, 'token')}"),
                   f"The round ends with {plural(held + gained, 'verified token')} in this canvas: they are pinned "
                   "in the next round's draft. The output is greedy AR's, token for token."))
    numbers = {"round": j + 1, "canvas": rnd.canvas + 1, "held": held, "accepted": len(agreed),
               "bonus": rnd.bonus, "first_disagreement": first if first < len(draft) else None,
               "ar_topk": [[token_piece(tokenizer, t), round(float(p), 4)]
                           for t, p in zip(rnd.topk_ids, rnd.topk_probs)]}
    return [{"stage": name, "title": title, "numbers": numbers,
             "html": f'<div class="dg-view">{picture}<div class="dg-muted">{esc(caption)}</div></div>'}
            for name, title, picture, caption in stages]
