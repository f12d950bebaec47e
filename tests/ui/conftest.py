"""Fixtures of the UI tests: those of the engine's tests (a causal LM to race, the app served on a free port)."""

from tests.engine.conftest import ar_model_dir, url  # noqa: F401  (pytest finds fixtures by name)
