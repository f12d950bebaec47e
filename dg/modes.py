"""The decoding modes behind one signature, and the one place a run's mode is chosen.

Every mode is a generator `stream_<mode>(model, inputs, config, *, cancel=None, draft=None, path="eager")`
yielding the shared records (dg.trace): RunStart, the mode's steps / tokens / rounds, RunEnd. `stream_mode`
picks one by name, so the CLI, the benches and the engine's runners never branch on the mode themselves:

- "diffusion": the entropy-bound sampler (dg.sampler), warm-started from a draft's canvases with its pinned
  positions held (dg.drafts);
- "ar": one token per forward on the same weights (dg.ar), up to the config's token budget;
- "hybrid": the sampler drafting and AR verifying (dg.hybrid): greedy AR's tokens.

    python -c "from dg.modes import MODES; print(MODES)"
"""

import threading
from collections.abc import Iterator

from dg.ar import stream_ar
from dg.config import MODES, SamplerConfig
from dg.drafts import Draft
from dg.hybrid import stream_hybrid
from dg.paths import mode_path
from dg.sampler import stream_diffusion

STREAMS = dict(zip(MODES, (stream_diffusion, stream_ar, stream_hybrid)))


def stream_mode(model, mode: str, inputs: dict, config: SamplerConfig, *, cancel: threading.Event | None = None,
                draft: Draft | None = None, path: str = "eager", **options) -> Iterator:
    """The records of one run of `mode` on `model` (`inputs` on its device), its passes on the path a model
    loaded on `path` gives that mode (`dg.paths.mode_path`). `options` are the mode's own (AR's `greedy`,
    `temperature`); a draft for a mode other than diffusion is refused there, in one line."""
    if mode not in STREAMS:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if draft is not None and mode != "diffusion":
        raise ValueError(f"a draft seeds the diffusion canvas; it does not apply to mode {mode!r}")
    draft = None if draft is None else draft.on(model.device)
    return STREAMS[mode](model, inputs, config, cancel=cancel, draft=draft, path=mode_path(path, mode), **options)
