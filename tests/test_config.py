"""Sampler settings: one dataclass validates every knob, and knows each knob's type for the CLI and the UI."""

import pytest

from dg.config import KNOBS, SamplerConfig, check_seed


def test_with_values_keeps_integers_integers():
    config = SamplerConfig().with_values({"max_denoising_steps": 12.0, "entropy_bound": 0.5, "t_min": None})
    assert config.max_denoising_steps == 12 and isinstance(config.max_denoising_steps, int)
    assert config.entropy_bound == 0.5 and config.t_min == SamplerConfig().t_min


@pytest.mark.parametrize("values, message", [
    ({"max_denoising_steps": 2.5}, "max_denoising_steps must be a whole number"),
    ({"entropy_bound": -1.0}, r"entropy_bound must be in \[0.01, 5.0\], got -1.0"),
    ({"t_min": 0.9, "t_max": 0.8}, "t_max must be > t_min"),
])
def test_with_values_refuses_bad_values_by_name(values, message):
    with pytest.raises(ValueError, match=message):
        SamplerConfig().with_values(values)


def test_every_knob_has_the_type_of_its_field_and_its_default_inside_its_range():
    defaults = SamplerConfig()
    for knob in KNOBS:
        assert knob.kind is type(getattr(defaults, knob.name))
        assert knob.low <= getattr(defaults, knob.name) <= knob.high


def test_a_generation_config_carries_the_release_defaults_and_the_given_ids():
    gen = SamplerConfig(max_new_tokens=64).generation_config(eos_token_id=[1, 6], pad_token_id=0, bos_token_id=2)
    assert SamplerConfig.from_generation_config(gen) == SamplerConfig(max_new_tokens=64)
    assert (gen.eos_token_id, gen.pad_token_id, gen.bos_token_id) == ([1, 6], 0, 2)


@pytest.mark.parametrize("values, message", [
    ({"max_new_tokens": 1e6}, r"max_new_tokens must be in \[1, 4096\]"),
    ({"max_new_tokens": float("inf")}, "max_new_tokens must be a finite number, got inf"),
    ({"t_max": float("nan")}, "t_max must be a finite number, got nan"),
    ({"max_denoising_steps": "12"}, "max_denoising_steps must be a number, got '12'"),
    ({"stability_threshold": True}, "stability_threshold must be a number"),
    ({"backend": "torch"}, "unknown knob 'backend'"),
])
def test_every_ui_value_is_held_to_its_knob_range_finite_and_numeric(values, message):
    with pytest.raises(ValueError, match=message):
        SamplerConfig().with_values(values)


def test_the_dataclass_refuses_infinite_and_nan_floats():
    for name in ("entropy_bound", "t_max", "confidence_threshold"):
        with pytest.raises(ValueError, match=f"{name} must be a finite number"):
            SamplerConfig(**{name: float("inf")})
    with pytest.raises(ValueError, match="t_min must be a finite number"):
        SamplerConfig(t_min=float("nan"))


@pytest.mark.parametrize("seed, expected", [(0, 0), (7.0, 7), (2**53 + 1, 2**53 + 1), (2**63 - 1, 2**63 - 1)])
def test_a_seed_is_an_exact_whole_number(seed, expected):
    assert check_seed(seed) == expected and isinstance(check_seed(seed), int)


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, float("nan"), float("inf"), -float("inf"), "3", None, True])
def test_a_seed_outside_zero_to_two_to_the_63_is_refused_by_name(seed):
    with pytest.raises(ValueError, match=r"seed must be a whole number in \[0, 2\^63\)"):
        check_seed(seed)
