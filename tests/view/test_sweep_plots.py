"""The latency-dial figures drawn from the committed sweep."""

import pytest

from dg.view import sweep_plots


def test_the_dial_has_accuracy_and_time_per_skill_at_every_cap():
    sweep = sweep_plots.load_sweep()
    fig = sweep_plots.latency_dial(sweep)
    assert len(fig.data) == 2 * len(sweep["skills"])
    json_acc = next(t for t in fig.data if t.name == "json" and t.showlegend)
    assert list(json_acc.x) == sweep["caps"]
    assert list(json_acc.y) == [100 * r["accuracy"] for r in sweep["skills"]["json"]["caps"].values()]


def test_steps_and_convergence_figures_read_the_sweep():
    sweep = sweep_plots.load_sweep()
    bars = sweep_plots.steps_by_skill(sweep)
    assert all(sum(t.y) == pytest.approx(100) for t in bars.data)
    lines = sweep_plots.convergence(sweep)
    assert [t.name for t in lines.data] == ["json", "story", "arithmetic"]
    assert sweep["command"] in sweep_plots.made_by(sweep) and "at 1 step" in sweep_plots.dial_line(sweep)


def test_a_missing_sweep_names_the_command_that_makes_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="python -m dg.bench.sweep"):
        sweep_plots.load_sweep(tmp_path / "none.json")
