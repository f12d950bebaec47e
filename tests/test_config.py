"""Sampler settings: one dataclass validates every knob, and knows each knob's type for the CLI and the UI."""

import pytest

from dg.config import KNOBS, SamplerConfig


def test_with_values_keeps_integers_integers():
    config = SamplerConfig().with_values({"max_denoising_steps": 12.0, "entropy_bound": 0.5, "t_min": None})
    assert config.max_denoising_steps == 12 and isinstance(config.max_denoising_steps, int)
    assert config.entropy_bound == 0.5 and config.t_min == SamplerConfig().t_min


@pytest.mark.parametrize("values, message", [
    ({"max_denoising_steps": 2.5}, "max_denoising_steps must be a whole number"),
    ({"entropy_bound": -1.0}, "entropy_bound must be > 0"),
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
