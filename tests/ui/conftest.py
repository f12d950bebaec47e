"""Fixtures of the UI tests: those of the engine's tests (the in-process runner of the test checkpoint, the app
served on a free port)."""

from tests.engine.conftest import loaded, url  # noqa: F401  (pytest finds fixtures by name)
