"""Fixtures of the benchmark tests."""

import math

import pytest


@pytest.fixture
def positive_finite():
    """A check that a reported figure is a real, positive number."""
    return lambda value: isinstance(value, (int, float)) and math.isfinite(value) and value > 0
