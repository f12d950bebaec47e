"""Fixtures of the UI tests: those of the engine's tests (the in-process runner of the test checkpoint, a causal
LM to race, the app served on a free port)."""

from tests.engine.conftest import ar_model_dir, loaded, url  # noqa: F401  (pytest finds fixtures by name)
