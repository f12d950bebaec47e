"""The server gives freed heap pages back to the system, at most every few seconds."""

from dg.engine import memory


def test_trim_hands_freed_pages_back_at_most_every_few_seconds(monkeypatch):
    monkeypatch.setattr(memory, "_last_trim", 0.0)
    if not hasattr(memory._libc, "malloc_trim"):
        assert not memory.trim()  # not glibc: nothing to do
        return
    assert memory.trim() and not memory.trim()  # the second call within TRIM_EVERY_S does nothing
