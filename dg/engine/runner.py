"""The model runner: one protocol for every place the model lives.

Every caller (live runs, races, the app's tabs) holds a `Runner` and never asks which kind: the model's
description for the UI (a `dg.loading.Loaded`: processor, config, sampler defaults), and a run of a
decoding mode streamed as records. Each runner ends in `dg.modes.stream_mode` (the one branch on the mode)
on the model where it lives, on the path it was loaded on: in this process (`InProcess`), in the worker
process (`dg.engine.worker.InWorker`) or in a Ray Serve replica (`dg.engine.replicas.InReplicas`). A new
place for the model is one more class with the five methods of `Runner`.

    python -m pytest tests/engine/test_runner.py -q
"""

import threading
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Protocol

from dg import modes
from dg.config import SamplerConfig
from dg.drafts import Draft
from dg.loading import Loaded
from dg.denoise import denoise_once


class Runner(Protocol):
    """Where the model runs. Besides what `dg.loading.Loaded` holds for the UI (`processor`, `tokenizer`,
    `model` with at least its config and generation config, `sampler_config`, `source`, `device` to build
    inputs on, `eos_token_ids`, `pad_token_id`):"""

    def stream(self, mode: str, inputs: dict, settings: SamplerConfig, seed: int | None,
               cancel: threading.Event, draft: Draft | None = None) -> Iterator:
        """A run's records, as `dg.modes.stream_mode` gives them: RunStart, the mode's records, RunEnd
        ("cancelled" once `cancel` is set) (`draft`: a diffusion run's warm start and pins, which
        travel with the run wherever the model lives). `seed`: the run's seed (None: it draws no random
        numbers); a runner whose model lives in another process keeps the run's RNG there as
        dg.engine.turns does here (seeded before its first record, its state kept between records)."""

    def denoise(self, prompt: str, canvas_ids: list[int]) -> dict:
        """Learn's one decoder pass (dg.denoise.denoise_once) on `canvas_ids` after `prompt`."""

    def describe(self) -> str:
        """The model's title line: source, size, vocabulary, canvas, dtype, where it runs."""

    def yield_cpu(self) -> None:
        """Let the model's own threads win the CPU over this process's drawing (where they are apart)."""

    def close(self) -> None:
        """Free what the runner holds (a process, a replica); runs it served end."""


@dataclass
class InProcess(Loaded):
    """The model in this process: a run's records come from its generator in the calling thread, whose RNG
    the turns in this process seed (dg.engine.turns), so `seed` needs nothing more here."""

    @classmethod
    def of(cls, loaded: Loaded) -> "InProcess":
        """The runner of a model loaded here (`dg.loading.load`)."""
        return cls(**{f.name: getattr(loaded, f.name) for f in fields(Loaded)})

    def stream(self, mode, inputs, settings, seed, cancel, draft=None):
        return modes.stream_mode(self.model, mode, inputs, settings, cancel=cancel, draft=draft, path=self.path)

    def denoise(self, prompt, canvas_ids):
        return denoise_once(self.model, self.processor, prompt, canvas_ids)

    def yield_cpu(self) -> None:
        pass  # the sampler's thread and the drawing share this process: nothing to yield to

    def close(self) -> None:
        pass  # the weights go with the last reference


@dataclass
class Hosted(Loaded):
    """A runner whose model lives elsewhere (a worker process, Ray Serve replicas) and is reached through
    `host`: `model` here is a weightless meta-device skeleton (config and generation config) and `device` is
    where the app builds inputs. The subclasses say how they describe themselves and share the CPU."""

    host: object = None  # stream(mode, inputs, settings, seed, cancel, draft), denoise(prompt, ids), close()

    def stream(self, mode, inputs, settings, seed, cancel, draft=None):
        return self.host.stream(mode, inputs, settings, seed, cancel, draft)

    def denoise(self, prompt, canvas_ids):
        return self.host.denoise(prompt, canvas_ids)

    def close(self) -> None:
        self.host.close()
