"""Markdown lines and tables of finished runs: a run's summary, an A/B comparison, the race's two sides and its
verdict, each with the report's metric names (dg.trace computes them).

    python -m dg.engine.race   # prints a race's side tables and verdict
"""

from dg.prompts import decode_reply
from dg.trace import Trace
from dg.view.theme import plural


def summary(trace: Trace) -> str:
    """One Markdown line on a finished diffusion run, with the report's metric names."""
    m = trace.metrics()
    finish = trace.end.finish_reason if trace.end else "running"
    head = {"cancelled": "Stopped", "error": "Failed"}.get(finish, "Done")
    return (f"**{head}**: {plural(m['tokens'], 'token')}, {plural(m['total_steps'], 'step')} over "
            f"{plural(m['canvases'], 'canvas', 'canvases')} · "
            f"NFE {m['nfe']} · TPF {m['tpf']:.2f} · effective steps {m['effective_steps']:.1f} · "
            f"{m['wall_s']:.2f} s · finish: {finish}")


def compare_table(traces: dict) -> str:
    """Markdown table of several runs (title → trace) and whether their outputs match."""
    rows = ["| run | tokens | steps | canvases | NFE | TPF | wall (s) |", "|---|---|---|---|---|---|---|"]
    for title, trace in traces.items():
        m = trace.metrics()
        rows.append(f"| {title} | {m['tokens']} | {m['total_steps']} | {m['canvases']} | {m['nfe']} | "
                    f"{m['tpf']:.2f} | {m['wall_s']:.2f} |")
    outputs = {tuple(t.token_ids) for t in traces.values()}
    return "\n".join(rows) + f"\n\nThe outputs are **{'identical' if len(outputs) == 1 else 'different'}**."


def side_stats(trace: Trace) -> dict:
    """What each side of the race shows: forward passes, TTFT, effective tok/s, TPF (report §3.4). Both
    sides count tokens the same way: pad is never output (dg.trace)."""
    m = trace.metrics()
    return {"forward passes": m["nfe"], "tokens": m["tokens"],
            "TTFT (s)": "—" if m["ttft_s"] is None else round(m["ttft_s"], 3),
            "tok/s": round(m["effective_tok_s"], 1), "TPF": round(m["tpf"], 2), "wall (s)": round(m["wall_s"], 3),
            "finish": trace.end.finish_reason if trace.end else "running"}


def side_table(trace: Trace) -> str:
    """`side_stats` as a two-column markdown table."""
    rows = (f"| {k} | {v} |" for k, v in side_stats(trace).items())
    return "\n".join(["| metric | value |", "|---|---|", *rows])


def speedup(diffusion: Trace, ar: Trace) -> float | None:
    """Effective tok/s of diffusion over AR (both generated tokens / own wall time)."""
    d, a = diffusion.metrics()["effective_tok_s"], ar.metrics()["effective_tok_s"]
    return d / a if d > 0 and a > 0 else None


def verdict(diffusion: Trace, ar: Trace, checks: dict | None = None) -> str:
    """The race's end in one line: who won, by how much (effective tok/s), and, for a skill example,
    whether each side's answer matches the reference (`checks`: side name → dg.tiny.examples.Check)."""
    d, a = diffusion.metrics(), ar.metrics()
    x = speedup(diffusion, ar)
    if d["tokens"] == 0 and a["tokens"] == 0:
        head = "**No winner**: neither side produced a token."
    elif x is None:
        head = f"**{'Diffusion' if d['tokens'] else 'AR'} wins**: the other side produced no token."
    elif x >= 1:
        head = f"**Diffusion wins**: {x:.2f}× AR's rate."
    else:
        head = f"**AR wins**: {1 / x:.2f}× diffusion's rate."
    stopped = any(t.end is not None and t.end.finish_reason == "cancelled" for t in (diffusion, ar))
    line = [("Stopped before the end. " if stopped else "") + head,
            f"Speedup (effective tok/s, diffusion ÷ AR): {f'{x:.2f}×' if x else 'n/a'} — {d['effective_tok_s']:.1f} "
            f"vs {a['effective_tok_s']:.1f} tok/s; {d['tokens']} vs {a['tokens']} tokens in {d['wall_s']:.2f} s vs "
            f"{a['wall_s']:.2f} s."]
    checks = {side: c for side, c in (checks or {}).items() if c is not None}
    if checks:
        reference = next(iter(checks.values())).reference
        marks = ", ".join(f"{side} {'✓' if c.correct else '✗'}" for side, c in checks.items())
        line.append(f"Reference answer `{reference}`: {marks}.")
    return " ".join(line)


def side_text(trace: Trace, tokenizer) -> str:
    """Committed text of a side, thought and answer (an unclosed thought is shown as it is)."""
    reply = decode_reply(tokenizer, trace.token_ids)
    if reply.thinking:
        return f"[thought] {reply.thought}\n\n{reply.answer}".strip()
    return reply.answer
