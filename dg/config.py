"""Sampler settings: the one source of defaults, ranges and validation for every knob.

Defaults are the release's `generation_config.json` (report Algorithm 1); a checkpoint's own
generation config overrides them through `SamplerConfig.from_generation_config`, and
`SamplerConfig().generation_config(...)` writes them for a new checkpoint (the tiny model, test models).
The CLI flags and the app's sliders read their defaults, ranges and types from here (`KNOBS`).

    python -c "from dg.config import SamplerConfig; print(SamplerConfig())"
"""

import math
from dataclasses import asdict, dataclass, fields, replace

from dg.kernels.sampling import BACKENDS

MODES = ("diffusion", "ar", "hybrid")  # the decoding modes (dg.modes.stream_mode runs each)


def whole_canvases(tokens: int, canvas_length: int) -> int:
    """How many canvases `tokens` take: a diffusion budget is spent a whole canvas at a time."""
    return -(-tokens // canvas_length)

@dataclass(frozen=True)
class Knob:
    """A UI/CLI description of one setting: its range, step and a one-line help text."""

    name: str
    low: float
    high: float
    step: float
    help: str

    @property
    def kind(self) -> type:
        """`int` or `float`: the type of the `SamplerConfig` field this knob sets."""
        return {f.name: f.type for f in fields(SamplerConfig)}[self.name]

    def check(self, value) -> int | float:
        """`value` (a slider's or an API client's) as this knob's type, inside its range; else a ValueError
        naming it. Whole numbers become `int` where the field is one (a slider sends 12.0)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{self.name} must be a number, got {value!r}")
        if not math.isfinite(value):
            raise ValueError(f"{self.name} must be a finite number, got {value}")
        if not self.low <= value <= self.high:
            raise ValueError(f"{self.name} must be in [{self.low}, {self.high}], got {value}")
        if self.kind is int:
            if value != int(value):
                raise ValueError(f"{self.name} must be a whole number, got {value}")
            return int(value)
        return float(value)


# The ranges every UI and API value is held to (`SamplerConfig.with_values`); the dataclass itself
# accepts anything meaningful (a checkpoint's defaults, the CLI), bounded by the model's context.
KNOBS = (
    Knob("max_denoising_steps", 1, 128, 1, "Step cap per canvas (N); τ is scheduled over N steps"),
    Knob("entropy_bound", 0.01, 5.0, 0.01, "Accept the lowest-entropy tokens while Σ H − max H ≤ bound"),
    Knob("t_min", 0.05, 2.0, 0.05, "Temperature τ at the last possible step"),
    Knob("t_max", 0.1, 3.0, 0.05, "Temperature τ at the first step"),
    Knob("stability_threshold", 0, 8, 1, "Stop only after the argmax canvas repeats this many steps"),
    Knob("confidence_threshold", 0.0001, 1.0, 0.0001, "Stop only when mean entropy is below this"),
    Knob("max_new_tokens", 1, 4096, 1, "Token budget; rounded up to whole canvases"),
)


SEED_LIMIT = 2**63  # torch.manual_seed takes [0, 2^63) without wrapping


def check_seed(value) -> int:
    """A seed from a UI, an API client or the CLI as an int in [0, 2^63); else a ValueError. Ints stay
    exact (2^53 + 1 is not a float)."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < SEED_LIMIT:
        raise ValueError(f"seed must be a whole number in [0, 2^63), got {value!r}")
    return value


@dataclass(frozen=True)
class SamplerConfig:
    """Every knob of the entropy-bound sampler, with the release's defaults."""

    max_denoising_steps: int = 48
    entropy_bound: float = 0.1
    t_min: float = 0.4
    t_max: float = 0.8
    stability_threshold: int = 1
    confidence_threshold: float = 0.005
    max_new_tokens: int = 256
    backend: str = "auto"
    end_on_pad_canvas: bool = True  # dg's rule (dg.sampler): an all-pad canvas ends the run; False = generate()

    def __post_init__(self):
        if not isinstance(self.max_denoising_steps, int) or self.max_denoising_steps <= 0:
            raise ValueError(f"max_denoising_steps must be an integer > 0, got {self.max_denoising_steps!r}")
        for name in ("entropy_bound", "t_min", "t_max", "confidence_threshold"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if not self.entropy_bound > 0:
            raise ValueError(f"entropy_bound must be > 0, got {self.entropy_bound!r}")
        if not self.t_min >= 0:
            raise ValueError(f"t_min must be >= 0, got {self.t_min!r}")
        if not self.t_max > self.t_min:
            raise ValueError(f"t_max must be > t_min, got t_max={self.t_max!r}, t_min={self.t_min!r}")
        if not isinstance(self.stability_threshold, int) or self.stability_threshold < 0:
            raise ValueError(f"stability_threshold must be an integer >= 0, got {self.stability_threshold!r}")
        if not self.confidence_threshold > 0:
            raise ValueError(f"confidence_threshold must be > 0, got {self.confidence_threshold!r}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens <= 0:
            raise ValueError(f"max_new_tokens must be an integer > 0, got {self.max_new_tokens!r}")
        if not isinstance(self.end_on_pad_canvas, bool):
            raise ValueError(f"end_on_pad_canvas must be True or False, got {self.end_on_pad_canvas!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")

    @classmethod
    def from_generation_config(cls, generation_config, **overrides) -> "SamplerConfig":
        """Take the checkpoint's defaults (unset fields keep the release's), then apply overrides."""
        values = {}
        for field in fields(cls):
            value = getattr(generation_config, field.name, None)
            if value is not None:
                values[field.name] = value
        sampler_config = getattr(generation_config, "sampler_config", None)
        if sampler_config is not None:
            values["entropy_bound"] = sampler_config.entropy_bound
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def replace(self, **changes) -> "SamplerConfig":
        return replace(self, **changes)

    def with_values(self, values: dict) -> "SamplerConfig":
        """This config with a UI's (or API client's) knob values applied, each held to its `KNOBS` range
        (None keeps a value). Raises ValueError naming the offending knob or value."""
        knobs = {k.name: k for k in KNOBS}
        changes = {}
        for name, value in values.items():
            if name not in knobs:
                raise ValueError(f"unknown knob {name!r}: one of {', '.join(knobs)}")
            if value is not None:
                changes[name] = knobs[name].check(value)
        return self.replace(**changes)

    def to_dict(self) -> dict:
        return asdict(self)

    def temperature(self, steps_remaining) -> float:
        """τ at a step, linear from t_max (first step) towards t_min (report §3.2).

        `steps_remaining` counts down N..1 as in `generate()`, so the last possible step gets
        t_min + (t_max − t_min)/N, not t_min itself.
        """
        return self.t_min + (self.t_max - self.t_min) * (steps_remaining / self.max_denoising_steps)

    def generate_kwargs(self) -> dict:
        """The same knobs, spelled for transformers' `model.generate()`."""
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import EntropyBoundSamplerConfig

        return dict(
            max_denoising_steps=self.max_denoising_steps,
            sampler_config=EntropyBoundSamplerConfig(entropy_bound=float(self.entropy_bound)),
            t_min=float(self.t_min),
            t_max=float(self.t_max),
            stability_threshold=self.stability_threshold,
            confidence_threshold=float(self.confidence_threshold),
            max_new_tokens=self.max_new_tokens,
        )

    def generation_config(self, *, eos_token_id: list[int], pad_token_id: int, bos_token_id: int):
        """A transformers `DiffusionGemmaGenerationConfig` with these knobs and the given token ids."""
        from transformers.models.diffusion_gemma.generation_diffusion_gemma import DiffusionGemmaGenerationConfig

        return DiffusionGemmaGenerationConfig(**self.generate_kwargs(), eos_token_id=list(eos_token_id),
                                              pad_token_id=pad_token_id, bos_token_id=bos_token_id)
