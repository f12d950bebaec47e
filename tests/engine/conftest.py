"""Fixtures of the engine and UI tests: the in-process runner of the test checkpoint, and the app served on a
free port (the engine's runs and files as a client meets them)."""

import pytest

from dg.engine.runner import InProcess
from dg.prompts import build_inputs

PROMPT = "What is 12 + 30?"  # a short sum: the engine tests' prompt


@pytest.fixture(scope="session")
def loaded(loaded):
    """The shared test checkpoint as the engine runs it: the in-process runner (dg.engine.runner)."""
    return InProcess.of(loaded)


@pytest.fixture(scope="module")
def inputs(loaded):
    """`PROMPT`'s chat inputs for the test checkpoint."""
    return build_inputs(loaded.processor, PROMPT)


@pytest.fixture(scope="module")
def url(loaded):
    """The whole app on the random test checkpoint, served in this process."""
    from dg.ui.app import serve

    with serve(loaded) as address:
        yield address
