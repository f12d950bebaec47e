"""Race: diffusion, AR and hybrid decoding started together on the same prompt, all three streamed live.

By default the three lanes use the same DiffusionGemma weights: the entropy-bound sampler, AR mode
(report §5.3: the encoder decoding one token per forward) and hybrid (dg.hybrid: the sampler drafts, AR
verifies; greedy AR's tokens). With `--ar-model` the AR lane is a separate causal LM (e.g. Gemma 4) run
by transformers' own `generate()`; a `BaseStreamer` records each token it pushes, with a timestamp, as a
`TokenRecord`, so every lane gives the same kind of trace. Hybrid still verifies with the diffusion
model's own weights then (its guarantee is that model's greedy AR, not the separate one's).
The three threads wait at a barrier and start together; on one device they share it, as a user would.
A separate AR model is loaded by dg.loading.load_ar_model (sized from its safetensors headers before it
loads, on the diffusion model's GPU when it fits there, else on another GPU with room, else refused).

    python -m dg race                    # the embedded tiny model on a three-term sum, thinking on
    python -m dg race --ar-model google/gemma-4-E2B-it --prompt "Write a haiku about rain."
"""

import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import torch
from transformers.generation.streamers import BaseStreamer

from dg.config import SamplerConfig
from dg.loading import ARModel
from dg.passes import token_record
from dg.prompts import build_inputs
from dg.trace import RunEnd, RunStart, TokenRecord
from dg.engine.runs import DEFAULT_FPS, LiveRun, watch


class ScoreRecorder:
    """A logits processor that keeps the last distribution, so the streamer can record entropy and top-k."""

    def __init__(self):
        self.last = None

    def __call__(self, input_ids, scores):
        self.last = scores[0].detach().float()
        return scores


class TraceStreamer(BaseStreamer):
    """`generate()` streamer: every pushed token becomes a TokenRecord stamped with the run's clock."""

    def __init__(self, emit, clock: float, scores: ScoreRecorder | None = None):
        self.emit, self.clock, self.scores = emit, clock, scores
        self.count = 0
        self.last_token: int | None = None
        self._prompt_seen = False

    def put(self, value):
        if not self._prompt_seen:  # generate() pushes the prompt first
            self._prompt_seen = True
            return
        for token_id in value.reshape(-1).tolist():
            t, forwards = time.perf_counter() - self.clock, (self.count, 0)  # a forward per token, as dg.ar's
            if self.scores is not None and self.scores.last is not None:
                self.emit(token_record(self.count, token_id, self.scores.last, t, forwards))
            else:  # no distribution recorded: the token alone
                self.emit(TokenRecord(self.count, int(token_id), math.nan, np.zeros(0, np.int64),
                                      np.zeros(0, np.float32), t, forwards))
            self.count += 1
            self.last_token = int(token_id)

    def end(self):
        pass


class CancelCriteria:
    """Stopping criterion that ends `generate()` once the run's cancel event is set."""

    def __init__(self, cancel: threading.Event):
        self.cancel = cancel

    def __call__(self, input_ids, scores, **kwargs):
        return torch.full((input_ids.shape[0],), self.cancel.is_set(), dtype=torch.bool, device=input_ids.device)


def hf_ar_run(ar: ARModel, inputs: dict, max_new_tokens: int, *, label: str = "",
              start_gate: threading.Barrier | None = None) -> LiveRun:
    """Greedy `generate()` of a separate causal LM, recorded token by token."""
    from transformers import LogitsProcessorList, StoppingCriteriaList

    def body(emit, cancel):
        clock = time.perf_counter()
        vocab = ar.model.config.get_text_config().vocab_size
        pad = ar.model.generation_config.pad_token_id
        emit(RunStart("ar", inputs["input_ids"].shape[1], 1, vocab, max_new_tokens,
                      {"greedy": True, "model": ar.source}, ar.eos_token_ids, pad))
        recorder = ScoreRecorder()
        streamer = TraceStreamer(emit, clock, recorder)
        with torch.no_grad():
            ar.model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False, streamer=streamer,
                              logits_processor=LogitsProcessorList([recorder]),
                              stopping_criteria=StoppingCriteriaList([CancelCriteria(cancel)]),
                              pad_token_id=pad if pad is not None else ar.eos_token_ids[0])
        finish = ("cancelled" if cancel.is_set() else
                  "eos" if streamer.last_token in ar.eos_token_ids else "max_new_tokens")
        emit(RunEnd(finish, streamer.count, 0, time.perf_counter() - clock))

    return LiveRun(body, label=label, start_gate=start_gate)


LANES = ("diffusion", "AR", "hybrid")  # the lanes' names, in the order every view lists them
HYBRID_ON_DIFFUSION = "hybrid, the diffusion model's own weights (a separate --ar-model does not verify)"


@dataclass
class Race:
    diffusion: LiveRun
    ar: LiveRun
    hybrid: LiveRun
    ar_tokenizer: object  # decodes the AR lane (the diffusion tokenizer unless --ar-model)
    hybrid_label: str = "hybrid, same weights"

    @property
    def lanes(self) -> dict[str, LiveRun]:
        """The lanes by name, in `LANES` order."""
        return dict(zip(LANES, (self.diffusion, self.ar, self.hybrid)))

    def start(self) -> "Race":
        for lane in self.lanes.values():
            lane.start()
        return self

    def stop(self) -> None:
        for lane in self.lanes.values():
            lane.stop()

    def frames(self, fps: float = DEFAULT_FPS):
        """(diffusion, ar, hybrid) snapshots while any lane runs; the last triple is final."""
        return watch(list(self.lanes.values()), fps)


def start_race(runner, prompt: str, *, inputs: dict | None = None, image=None, thinking: bool = False,
               config: SamplerConfig | None = None, seed: int = 0, ar_model: ARModel | None = None) -> Race:
    """Build every lane's inputs (errors raise before any thread starts), then start them together."""
    config = config or runner.sampler_config
    if inputs is None:
        inputs = build_inputs(runner.processor, prompt, images=image, thinking=thinking, device=runner.device)
    gate = threading.Barrier(3)
    diffusion = LiveRun.of(runner, "diffusion", inputs, config, seed, label="diffusion", start_gate=gate)
    hybrid = LiveRun.of(runner, "hybrid", inputs, config, seed, label="hybrid", start_gate=gate)
    if ar_model is None:  # greedy: no seed; the budget is the one knob AR reads
        ar_settings = runner.sampler_config.replace(max_new_tokens=config.max_new_tokens)
        ar = LiveRun.of(runner, "ar", inputs, ar_settings, label="AR", start_gate=gate)
        return Race(diffusion, ar, hybrid, runner.tokenizer).start()
    ar = hf_ar_run(ar_model, ar_model.inputs(prompt, thinking), config.max_new_tokens, label="AR", start_gate=gate)
    return Race(diffusion, ar, hybrid, ar_model.tokenizer, HYBRID_ON_DIFFUSION).start()
