"""The arithmetic probe: column diagnostics of sampler traces and the one-step repair of a sum digit."""

import pytest
import torch

from dg.loading import load
from dg.tiny import probe


@pytest.fixture(scope="module")
def embedded():
    """The embedded model: the probe reads its trace format and its digit tokens."""
    torch.set_num_threads(1)
    return load(None)


def test_every_reference_trace_parses_into_one_column_per_digit():
    for i in range(20):
        ex = probe.problem(i)
        a, b = (int(w) for w in ex.prompt.rstrip("?.").split() if w.isdigit())
        cols = probe.COLUMN.findall(ex.thought)
        assert len(cols) == max(len(str(a)), len(str(b)))
        assert all(int(ss) == int(x) + int(y) for x, y, ss in cols)
        carries, written = probe._digits(probe.CARRIES, ex.thought), probe._digits(probe.WRITTEN, ex.thought)
        assert len(carries) == len(cols) + 1 and len(written) == len(cols)


def test_the_probe_reports_shares_of_what_it_counted(embedded):
    cols = probe.columns(embedded, 2)
    assert cols["problems"] == 2 and cols["columns"] >= 1
    assert all(0 <= cols[k] <= 1 for k in ("operands", "sum_right", "carry_follows", "write_follows", "exact"))
    fix = probe.repair(embedded, 2)
    assert fix["positions"] == 4  # columns 2 and 3 of each problem lie inside the first canvas
    assert all(0 <= fix[k] <= 1 for k in ("noise", "digit"))


def test_the_noise_token_is_never_a_digit(embedded):
    assert not any(ch.isdigit() for ch in probe.NOT_A_DIGIT)
    assert embedded.tokenizer.convert_tokens_to_ids(probe.NOT_A_DIGIT) != embedded.tokenizer.unk_token_id
