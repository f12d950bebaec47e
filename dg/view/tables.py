"""Markdown lines and tables of finished runs: a run's summary, an A/B comparison, the race's lanes (diffusion, AR,
hybrid) and its verdict, each with the report's metric names (dg.trace computes them).

    python -m dg race   # prints a race's side tables and verdict
"""

from dg.prompts import decode_reply
from dg.trace import Trace
from dg.view.theme import plural


def summary(trace: Trace) -> str:
    """One Markdown line on a finished run of any mode, with the report's metric names (and the Ray Serve replica
    that served it, dg.engine.replicas)."""
    m = trace.metrics()
    finish = trace.end.finish_reason if trace.end else "running"
    head = {"cancelled": "Stopped", "error": "Failed"}.get(finish, "Done")
    if trace.mode == "ar":
        how = f"AR, one per forward · NFE {m['nfe']}"
    elif trace.mode == "hybrid":
        how = (f"hybrid, {plural(m['rounds'], 'verify round')} ({m['tokens_per_round']:.1f} tokens a round, "
               f"{m['accepted_per_round']:.1f} of them drafted) · NFE {m['nfe']} · TPF {m['tpf']:.2f} (tokens / NFE)")
    else:
        how = (f"{plural(m['total_steps'], 'step')} over {plural(m['canvases'], 'canvas', 'canvases')} · "
               f"NFE {m['nfe']} · TPF {m['tpf']:.2f} · effective steps {m['effective_steps']:.1f}")
    served = f" · {trace.start.config['replica']}" if trace.start and "replica" in trace.start.config else ""
    return f"**{head}**: {plural(m['tokens'], 'token')}, {how} · {m['wall_s']:.2f} s · finish: {finish}{served}"


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
    rounds = {}
    if trace.mode == "hybrid":
        rounds = {"verify rounds": m["rounds"], "tokens / round": round(m["tokens_per_round"], 1)}
    return {"forward passes": m["nfe"], "tokens": m["tokens"],
            "TTFT (s)": "—" if m["ttft_s"] is None else round(m["ttft_s"], 3),
            "tok/s": round(m["effective_tok_s"], 1), "TPF": round(m["tpf"], 2), **rounds,
            "wall (s)": round(m["wall_s"], 3), "finish": trace.end.finish_reason if trace.end else "running"}


def side_table(trace: Trace) -> str:
    """`side_stats` as a two-column markdown table."""
    rows = (f"| {k} | {v} |" for k, v in side_stats(trace).items())
    return "\n".join(["| metric | value |", "|---|---|", *rows])


def lane_mark(trace: Trace, check) -> str:
    """A race lane's own verdict under its heading once it has ended: ✓ or ✗ against the example's reference
    answer (`check`: dg.examples.Check, None for a prompt without one); nothing while it runs."""
    if not trace.done:
        return ""
    if trace.cancelled:
        return "stopped before its end: no verdict"
    if check is None:
        return "finished · no reference answer to check"
    return f"**{'✓ right' if check.correct else '✗ wrong'}** · reference answer `{check.reference}`"


def speedup(diffusion: Trace, ar: Trace) -> float | None:
    """Effective tok/s of diffusion over AR (both generated tokens / own wall time)."""
    d, a = diffusion.metrics()["effective_tok_s"], ar.metrics()["effective_tok_s"]
    return d / a if d > 0 and a > 0 else None


def verdict(lanes: dict, checks: dict | None = None) -> str:
    """The race's end in one line: the fastest *correct* lane (effective tok/s) when a reference checks the
    answers (`checks`: lane name → dg.examples.Check or None), else the fastest lane; every lane's
    rate and its speed over AR's; each lane's ✓/✗ against the reference."""
    rates = {name: trace.metrics()["effective_tok_s"] for name, trace in lanes.items()}
    checks = {name: c for name, c in (checks or {}).items() if c is not None}
    correct = [name for name in lanes if name in checks and checks[name].correct and rates[name] > 0]
    fastest = max(correct or [n for n in lanes if rates[n] > 0], key=rates.get, default=None)
    ar = rates.get("AR", 0.0)
    if fastest is None:
        head = "**No winner**: no lane produced a token."
    elif checks and not correct:
        head = f"**No lane is right**: {fastest} was fastest, with a wrong answer."
    else:
        over = f", {rates[fastest] / ar:.2f}× AR's rate" if fastest != "AR" and ar > 0 else ""
        what = "the fastest correct lane" if checks else "the fastest lane (no reference answer to check)"
        head = f"**{fastest[0].upper() + fastest[1:]} wins**: {what}{over}."
    stopped = any(t.cancelled for t in lanes.values())
    speeds = ", ".join(f"{name} {rates[name]:.1f}" for name in lanes)
    ratios = ", ".join(f"{name} {rates[name] / ar:.2f}×" for name in lanes
                       if name != "AR" and ar > 0 and rates[name] > 0)
    line = [("Stopped before the end. " if stopped else "") + head,
            f"Speed (effective tok/s): {speeds}" + (f"; over AR: {ratios}." if ratios else ".")]
    if checks:
        reference = next(iter(checks.values())).reference
        marks = ", ".join(f"{name} {'✓' if checks[name].correct else '✗'}" for name in lanes if name in checks)
        line.append(f"Reference answer `{reference}`: {marks}.")
    return " ".join(line)


def side_text(trace: Trace, tokenizer) -> str:
    """Committed text of a side, thought and answer (an unclosed thought is shown as it is)."""
    reply = decode_reply(tokenizer, trace.token_ids)
    if reply.thinking:
        return f"[thought] {reply.thought}\n\n{reply.answer}".strip()
    return reply.answer
