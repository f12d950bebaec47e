"""Traces of a run: the records the sampler streams, and the metrics computed from them.

A diffusion run streams `RunStart`, then one `StepRecord` per denoising step and one `CanvasRecord`
per committed canvas, then `RunEnd`. An AR run streams `RunStart`, one `TokenRecord` per token, then
`RunEnd`. `Trace` collects them (live, with `add`) and exports to JSON and back.

Metrics (report §3.4; see ../README.md):
- NFE: decoder forwards + encoder forwards actually run.
- TPF = generated tokens / (total denoising steps + K − 1) for K canvases; transformers'
  `tokens_per_forward` omits the K − 1 (kept here as `tpf_transformers`).
- Effective steps: token-weighted mean of steps per canvas.
- Effective tok/s = generated tokens / wall time; TTFT = time to the first committed token.
- Generated tokens never count pad, in either mode (a committed canvas's pad after EOS, an AR pad).

    python -m pytest tests/test_trace.py -q
"""

import json
from dataclasses import dataclass, field, fields

import numpy as np

from dg.config import whole_canvases


@dataclass
class RunStart:
    mode: str  # "diffusion" | "ar" | "hybrid"
    prompt_length: int
    canvas_length: int
    vocab_size: int
    max_new_tokens: int
    config: dict
    eos_token_ids: list
    pad_token_id: int | None
    kind: str = "start"

    @property
    def max_canvases(self) -> int:
        """Canvases the token budget allows (the budget is rounded up to whole canvases)."""
        return whole_canvases(self.max_new_tokens, self.canvas_length)


@dataclass
class StepRecord:
    """Everything one denoising step did; arrays are per canvas position, length C."""

    canvas: int  # canvas index k, 0-based
    step: int  # 1-based step within the canvas
    temperature: float
    noisy: np.ndarray  # the canvas fed to the decoder at this step
    argmax: np.ndarray  # x̂: argmax of softmax(logits / τ)
    sampled: np.ndarray  # candidate drawn per position
    accepted: np.ndarray  # bool: kept by the entropy bound this step
    entropy: np.ndarray  # float32 entropy of softmax(logits / τ)
    accepted_entropy: float  # Σ H − max H over the accepted positions (compared with the bound)
    entropy_bound: float
    mean_entropy: float
    stable: bool  # x̂ equal to the previous `stability_threshold` steps' x̂
    confident: bool  # mean entropy below the confidence threshold
    stop_reason: str | None  # "stable_confident" | "step_cap" on a canvas's last step, else None
    topk_ids: np.ndarray  # (C, k) most likely tokens at this step
    topk_probs: np.ndarray  # (C, k) their probabilities under softmax(logits / τ)
    t: float  # seconds since the run started, when the step finished
    pinned: np.ndarray | None = None  # bool: held at the given draft's token (infill), never renoised
    forwards: tuple | None = None  # (encoder, decoder) passes made by a run stopped just before this record
    kind: str = "step"

    @property
    def n_accepted(self) -> int:
        return int(self.accepted.sum())


@dataclass
class CanvasRecord:
    canvas: int
    steps: int
    stop_reason: str  # "stable_confident" | "step_cap"
    committed: np.ndarray  # final argmax canvas, everything after the first EOS set to pad
    tokens: int  # non-pad tokens committed
    eos: bool  # an EOS token ended generation inside this canvas
    t: float
    kind: str = "canvas"


@dataclass
class TokenRecord:
    index: int
    token_id: int
    entropy: float
    topk_ids: np.ndarray  # (k,)
    topk_probs: np.ndarray  # (k,)
    t: float
    forwards: tuple | None = None  # (encoder, decoder) passes made by a run stopped just before this record
    kind: str = "token"


@dataclass
class RoundRecord:
    """One verify round of hybrid decoding (dg.hybrid): the draft, how much of it AR kept, AR's token."""

    round: int  # 1-based over the run
    canvas: int
    held: int  # canvas positions already verified (pinned in the draft)
    draft: np.ndarray  # the drafter's argmax canvas that was verified
    accepted: int  # draft tokens after `held` equal to greedy AR's
    bonus: int | None  # AR's own token after them (None when EOS or the budget ended the run first)
    topk_ids: np.ndarray  # (k,) AR's most likely tokens at the first disagreement
    topk_probs: np.ndarray  # (k,)
    t_start: float
    t: float
    forwards: tuple | None = None  # (encoder, decoder) passes made by a run stopped just before this record
    kind: str = "round"


@dataclass
class RunEnd:
    finish_reason: str  # one of FINISH_REASONS
    encoder_forwards: int
    decoder_forwards: int
    t: float
    kind: str = "end"

    @classmethod
    def before(cls, record, t: float) -> "RunEnd":
        """The "cancelled" end of a run stopped just before `record`'s own pass: the forwards it carries, which
        the mode counted where it made it, so a run stopped in another process reports what one stopped here
        does (dg.engine.worker, dg.engine.replicas)."""
        if record.forwards is None:
            raise ValueError(f"a {record.kind} record without its forward counts cannot say where its run stopped")
        encoder, decoder = record.forwards
        return cls("cancelled", encoder, decoder, t)


# Why a canvas stopped (StepRecord / CanvasRecord.stop_reason) or a run ended (RunEnd.finish_reason):
# "error" is a live run whose thread raised (dg.engine.runs); its partial trace is kept. "pad_canvas": a
# committed canvas held only pad, which ends a run in dg (not in generate(); see dg.sampler).
FINISH_REASONS = ("eos", "max_new_tokens", "pad_canvas", "cancelled", "error")
STOP_LABELS = {"stable_confident": "stable + confident", "step_cap": "step cap", "eos": "EOS",
               "pad_canvas": "all-pad canvas: the run ends"}

RECORD_TYPES = {cls.kind: cls for cls in (RunStart, StepRecord, CanvasRecord, TokenRecord, RoundRecord, RunEnd)}
_ARRAY_DTYPES = {"noisy": np.int64, "argmax": np.int64, "sampled": np.int64, "accepted": bool,
                 "entropy": np.float32, "committed": np.int64, "pinned": bool, "topk_ids": np.int64, "topk_probs": np.float32,
                 "draft": np.int64}


def record_to_dict(record) -> dict:
    out = {}
    for f in fields(record):
        value = getattr(record, f.name)
        out[f.name] = value.tolist() if isinstance(value, np.ndarray) else value
    return out


def record_from_dict(data: dict):
    cls = RECORD_TYPES[data["kind"]]
    if isinstance(data.get("forwards"), list):
        data = {**data, "forwards": tuple(data["forwards"])}
    # arrays by field name, lists only: a scalar of the same name stays a scalar (RoundRecord.accepted is a count,
    # StepRecord.accepted a mask; TokenRecord.entropy a float)
    values = {k: np.asarray(v, dtype=_ARRAY_DTYPES[k]) if k in _ARRAY_DTYPES and isinstance(v, list) else v
              for k, v in data.items()}
    return cls(**values)


@dataclass
class Trace:
    """All records of one run, in order, plus the views and metrics the UI and CLI need."""

    start: RunStart | None = None
    steps: list = field(default_factory=list)  # StepRecord
    canvases: list = field(default_factory=list)  # CanvasRecord
    tokens: list = field(default_factory=list)  # TokenRecord (AR mode; hybrid's verified tokens)
    end: RunEnd | None = None
    rounds: list = field(default_factory=list)  # RoundRecord (hybrid mode)

    def add(self, record):
        kind = record.kind
        if kind == "start":
            self.start = record
        elif kind == "step":
            self.steps.append(record)
        elif kind == "canvas":
            self.canvases.append(record)
        elif kind == "token":
            self.tokens.append(record)
        elif kind == "round":
            self.rounds.append(record)
        elif kind == "end":
            self.end = record
        else:
            raise ValueError(f"unknown record kind {kind!r}")
        return record

    @property
    def mode(self) -> str:
        return self.start.mode if self.start else "diffusion"

    @property
    def done(self) -> bool:
        return self.end is not None

    @property
    def cancelled(self) -> bool:
        """The run was stopped before its end (Stop, its budget, a page that went away): what it made stays."""
        return self.end is not None and self.end.finish_reason == "cancelled"

    @property
    def token_ids(self) -> list[int]:
        """Generated ids: committed canvases with trailing pad removed (diffusion) or AR tokens."""
        if self.mode in ("ar", "hybrid"):
            return [r.token_id for r in self.tokens]
        ids = [int(i) for c in self.canvases for i in c.committed]
        pad = self.start.pad_token_id if self.start else None
        while ids and pad is not None and ids[-1] == pad:
            ids.pop()
        return ids

    @classmethod
    def collect(cls, records) -> "Trace":
        """A whole run: every record of a mode's stream (`dg.modes.stream_mode`), in order."""
        trace = cls()
        for record in records:
            trace.add(record)
        return trace

    @property
    def records(self) -> list:
        """Every record held, the start first and the end last (for sizing, exports and wall times)."""
        return [r for r in (self.start, *self.steps, *self.canvases, *self.tokens, *self.rounds, self.end)
                if r is not None]

    def last_t(self) -> float:
        """Seconds since the run started at its latest record held (0.0 before any)."""
        return max((r.t for r in self.records if r.kind != "start"), default=0.0)

    def at(self, seconds: float) -> "Trace":
        """The run as it stood `seconds` after its start: the records it had made by then (a slowed replay)."""
        if self.last_t() <= seconds:
            return self
        made = lambda records: [r for r in records if r.t <= seconds]  # noqa: E731
        return Trace(self.start, made(self.steps), made(self.canvases), made(self.tokens), None, made(self.rounds))

    def steps_of(self, canvas: int) -> list:
        return [r for r in self.steps if r.canvas == canvas]

    def metrics(self) -> dict:
        return compute_metrics(self)

    def to_dict(self) -> dict:
        return {"records": [record_to_dict(r) for r in self.records], "metrics": self.metrics()}

    @classmethod
    def from_dict(cls, data: dict) -> "Trace":
        trace = cls()
        for record in data["records"]:
            trace.add(record_from_dict(record))
        return trace

    @classmethod
    def from_json(cls, text: str) -> "Trace":
        return cls.from_dict(json.loads(text))


def compute_metrics(trace: Trace) -> dict:
    """NFE, TPF (report §3.4), effective steps, TTFT and throughputs of a (possibly partial) run."""
    wall = trace.end.t if trace.end else trace.last_t()
    if trace.mode == "ar":
        pad = trace.start.pad_token_id if trace.start else None
        output = [r for r in trace.tokens if r.token_id != pad]  # pad is no output, as in a committed canvas
        n = len(output)
        nfe = trace.end.encoder_forwards if trace.end else len(trace.tokens)
        ttft = output[0].t if output else None
        return _rates(tokens=n, nfe=nfe, tpf=n / nfe if nfe else 0.0, tpf_transformers=n / nfe if nfe else 0.0,
                      effective_steps=1.0 if n else 0.0, total_steps=len(trace.tokens), canvases=0, wall=wall,
                      ttft=ttft, parallel=None)
    if trace.mode == "hybrid":
        return _hybrid_metrics(trace, wall)
    total_steps = len(trace.steps)
    k = len(trace.canvases)
    tokens = sum(c.tokens for c in trace.canvases)
    weighted = sum(c.tokens * c.steps for c in trace.canvases)
    canvas_length = trace.start.canvas_length if trace.start else 0
    encoder = trace.end.encoder_forwards if trace.end else k + (1 if trace.steps else 0)
    ttft = next((c.t for c in trace.canvases if c.tokens > 0), None)
    return _rates(
        tokens=tokens,
        nfe=total_steps + encoder,
        tpf=tokens / (total_steps + k - 1) if total_steps + k - 1 > 0 else 0.0,
        tpf_transformers=tokens / total_steps if total_steps else 0.0,
        effective_steps=weighted / tokens if tokens else 0.0,
        total_steps=total_steps,
        canvases=k,
        wall=wall,
        ttft=ttft,
        parallel=canvas_length * total_steps / wall if wall > 0 else 0.0,
    )


def _hybrid_metrics(trace: Trace, wall: float) -> dict:
    """Hybrid counts every forward it ran: TPF = tokens / (decoder steps + encoder passes), which is NFE;
    rounds and the mean draft tokens AR accepted per round come beside it."""
    pad = trace.start.pad_token_id if trace.start else None
    output = [r for r in trace.tokens if r.token_id != pad]
    n, total_steps = len(output), len(trace.steps)
    nfe = (trace.end.encoder_forwards + trace.end.decoder_forwards) if trace.end else total_steps + len(trace.rounds) + 1
    rounds = len(trace.rounds)
    metrics = _rates(tokens=n, nfe=nfe, tpf=n / nfe if nfe else 0.0, tpf_transformers=n / total_steps if total_steps else 0.0,
                     effective_steps=total_steps / n if n else 0.0, total_steps=total_steps,
                     canvases=len({r.canvas for r in trace.rounds}), wall=wall, ttft=output[0].t if output else None,
                     parallel=None)
    metrics.update(rounds=rounds, accepted_per_round=sum(r.accepted for r in trace.rounds) / rounds if rounds else 0.0,
                   tokens_per_round=n / rounds if rounds else 0.0)
    return metrics


def _rates(*, tokens, nfe, tpf, tpf_transformers, effective_steps, total_steps, canvases, wall, ttft, parallel):
    return {
        "tokens": tokens,
        "nfe": nfe,
        "tpf": tpf,
        "tpf_transformers": tpf_transformers,
        "effective_steps": effective_steps,
        "total_steps": total_steps,
        "canvases": canvases,
        "wall_s": wall,
        "ttft_s": ttft,
        "effective_tok_s": tokens / wall if wall > 0 else 0.0,
        "parallel_tok_s": parallel,
    }


def record_nbytes(record) -> int:
    """Bytes held by a record's arrays (what a per-step record costs in memory)."""
    return sum(v.nbytes for v in vars(record).values() if isinstance(v, np.ndarray))  # asdict would copy them
