"""The roofline's figures and table: the bounds of dg.roofline drawn, the measured figures as fractions."""

import math

import pytest

from dg import roofline
from dg.view import roofline as view
from dg.view.sweep_plots import load_sweep

H100 = view.Setting(roofline.RELEASE, roofline.DEVICES["H100 SXM"], "fp8", roofline.REPORT["tpf"])


def test_the_table_names_what_binds_and_places_the_reports_figures_against_their_bounds():
    table = view.bounds_table(H100, view.report_measured())
    step = roofline.canvas_step(roofline.RELEASE, roofline.DEVICES["H100 SXM"], "fp8")
    assert "| canvas step | 17.4 GB |" in table and "**memory**" in table
    assert f"**{step.seconds / 13.56e-3:.0%}** of the bound" in table
    assert "25.3 B parameters, 3.82 B active" in table and "of the device's 80 GB" in table


def test_the_roofline_figure_puts_each_measured_pass_at_its_achieved_flops():
    fig = view.roofline_figure(H100, view.report_measured())
    ar = roofline.ar_token(roofline.RELEASE, roofline.DEVICES["H100 SXM"], "fp8")
    measured = next(t for t in fig.data if t.name.startswith("report AR"))
    assert measured.x[0] == pytest.approx(ar.intensity) and measured.y[0] == pytest.approx(ar.flops * 204 / 1e12)
    roof = fig.data[0]
    assert max(roof.y) == pytest.approx(1978.9)  # the fp8 peak caps the roof


def test_batch_one_figures_are_placed_against_the_one_user_bound_at_any_concurrency():
    crowded = view.Setting(H100.model, H100.device, "fp8", H100.tpf, users=64)
    assert view.bounds_table(crowded, view.report_measured()).count("**23%**") == 1  # AR as at one user
    assert not any(t.name.startswith("report") for t in view.roofline_figure(crowded, view.report_measured()).data)


def test_more_users_raise_the_bounds():
    fig = view.users_figure(H100, report_crossover=32)
    ar, diffusion = fig.data[0].y, fig.data[1].y
    for ys in (ar, diffusion):  # non-decreasing: flat once compute binds (to rounding)
        assert all(b >= a * (1 - 1e-9) for a, b in zip(ys, ys[1:]))
    assert diffusion[-1] == pytest.approx(diffusion[-2])  # many users: compute-bound, flat


def test_the_crossover_markers_stand_where_the_bounds_cross_and_at_the_reports_32_users():
    fig = view.users_figure(H100, report_crossover=32)
    cross = roofline.crossover_users(H100.model, H100.device, "fp8", H100.tpf)
    lines = {shape.label.text: shape for shape in fig.layout.shapes}
    assert set(lines) == {f"bounds cross at {cross} users", "report, measured: 32"}
    for shape, users in ((lines[f"bounds cross at {cross} users"], cross), (lines["report, measured: 32"], 32)):
        assert shape.xref == "x" and shape.x0 == shape.x1 == users  # data units: plotly's convention for shapes
    lo, hi = (10 ** end for end in fig.layout.xaxis.range)  # an axis range on a log axis is in log10 units
    assert lo < 32 < cross < hi
    middle = (fig.layout.xaxis.range[0] + fig.layout.xaxis.range[1]) / 2  # each label reaches into the plot
    assert lines[f"bounds cross at {cross} users"].label.xanchor == ("right" if math.log10(cross) > middle else "left")
    assert lines["report, measured: 32"].label.xanchor == ("right" if math.log10(32) > middle else "left")
    ar, diffusion = fig.data[0], fig.data[1]
    below = [u for u, a, d in zip(ar.x, ar.y, diffusion.y) if a < d]
    assert max(below) < cross <= min(u for u, a, d in zip(ar.x, ar.y, diffusion.y) if a >= d)  # the curves cross


def test_without_a_crossover_in_range_no_marker_is_drawn():
    assert not view.users_figure(H100, most=8).layout.shapes


def test_this_cpus_figures_come_from_the_committed_sweep():
    sweep = load_sweep()
    cpu = roofline.measured_cpu(**sweep["cpu"])
    measured = view.cpu_measured(sweep)
    assert {m.mode for m in measured} == {"ar", "step"} and all(m.seconds > 0 for m in measured)
    assert cpu.bandwidth_gb_s == sweep["cpu"]["copy_gb_s"]
