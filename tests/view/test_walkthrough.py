"""A recorded sampler step in six stages with that step's numbers, and the Learn tab's token rows."""

import re

import numpy as np
import pytest

from dg.view import axes, svg, walkthrough


def test_walkthrough_has_the_six_stages_with_the_records_numbers(diffusion_trace, processor):
    for i, rec in enumerate(diffusion_trace.steps):
        stages = walkthrough.walkthrough(diffusion_trace, processor.tokenizer, i)
        assert [s["stage"] for s in stages] == list(walkthrough.STAGES)
        by = {s["stage"]: s["numbers"] for s in stages}
        assert by["temperature"]["temperature"] == rec.temperature
        assert by["sort_bound"]["k"] == by["accept"]["accepted"] == rec.n_accepted
        assert by["accept"]["positions"] == np.flatnonzero(rec.accepted).tolist()
        assert by["accept"]["tokens"] == rec.sampled[rec.accepted].tolist()
        assert by["renoise"]["renoised"] == len(rec.accepted) - rec.n_accepted
        assert by["decode"]["self_conditioning"] == (rec.step > 1)
        assert sorted(by["sort_bound"]["sorted_entropy"]) == by["sort_bound"]["sorted_entropy"]
        assert all(s["title"] and s["html"].count("<table") == 1 for s in stages)
        assert by["decode"]["canvas"] == rec.canvas + 1 and by["decode"]["step"] == rec.step  # as the titles count


def test_each_stage_is_a_picture_with_its_numbers_folded_underneath(diffusion_trace, processor):
    stages = {s["stage"]: s["html"] for s in walkthrough.walkthrough(diffusion_trace, processor.tokenizer, 1)}
    for html in stages.values():
        assert html.index("<details>") > 0 and html.index("<table") > html.index("<details>")
    assert "<svg" in stages["temperature"] and "<svg" in stages["entropy"] and "<svg" in stages["sort_bound"]
    assert stages["decode"].count('class="dg-cell"') == diffusion_trace.start.canvas_length
    assert stages["renoise"].count('class="dg-cell"') == 2 * diffusion_trace.start.canvas_length  # before, after
    assert "<th></th>" not in stages["renoise"]


def test_the_bound_picture_colours_the_accepted_bars_and_draws_the_bound(diffusion_trace, processor):
    rec = diffusion_trace.steps[1]
    html = {s["stage"]: s["html"] for s in walkthrough.walkthrough(diffusion_trace, processor.tokenizer, 1)}["sort_bound"]
    bars = re.findall(r'<rect [^>]*fill="(#[0-9a-f]{6})"', html)
    assert len(bars) == len(rec.accepted) and bars.count("#16a34a") == rec.n_accepted  # accepted: green
    assert "stroke-dasharray" in html and "<polyline" in html  # the bound, and the running Σ H − max H


def test_the_bound_pictures_axis_covers_the_running_sum_and_every_entropy(diffusion_trace, processor):
    plot_height = svg.HEIGHT - svg.BOTTOM - svg.TOP
    for i in range(len(diffusion_trace.steps)):
        html = {s["stage"]: s["html"] for s in walkthrough.walkthrough(diffusion_trace, processor.tokenizer, i)}
        picture = html["sort_bound"]
        line = [float(y) for y in re.findall(r"[\d.]+,([\d.]+)", re.search(r'<polyline points="([^"]*)"', picture)[1])]
        bar_tops = [float(y) for y in re.findall(r'<rect x="[\d.]+" y="([\d.]+)"', picture)]
        assert min(line + bar_tops) > svg.TOP  # nothing pinned to the top edge: the axis reaches past the data
        assert min(line + bar_tops) < svg.TOP + plot_height / 4  # and the data fills the plot: not a flat line
        assert line[-1] < line[0]  # the running sum rises across the plot (SVG y grows downwards)


def test_a_log_scale_labels_each_decade_with_its_whole_value():
    scale = svg.Scale.fit([2e-5, 0.03, 6.4], log=True)
    assert scale.lo <= 2e-5 and scale.hi > 6.4
    assert [axes.tick_label(t) for t in scale.ticks()] == ["1e-5", "0.0001", "0.001", "0.01", "0.1", "1"]
    assert scale.y(scale.hi) == svg.TOP and scale.y(scale.lo) == svg.HEIGHT - svg.BOTTOM


def test_the_instructive_step_accepts_some_positions_and_renoises_others(diffusion_trace):
    i = walkthrough.instructive_step(diffusion_trace)
    rec = diffusion_trace.steps[i]
    best = max(min(r.n_accepted, len(r.accepted) - r.n_accepted) for r in diffusion_trace.steps)
    assert min(rec.n_accepted, len(rec.accepted) - rec.n_accepted) == best


def test_walkthrough_sees_the_accepted_tokens_fed_into_the_next_step(diffusion_trace, processor):
    rec = diffusion_trace.steps[0]
    renoise = walkthrough.walkthrough(diffusion_trace, processor.tokenizer, 0)[-1]["numbers"]
    assert renoise["next_step_kept"] == rec.n_accepted
    nxt = walkthrough.walkthrough(diffusion_trace, processor.tokenizer, 1)[0]["numbers"]
    assert nxt["kept_from_previous_step"] == rec.n_accepted


def test_walkthrough_rejects_ar_traces_and_steps_out_of_range(diffusion_trace, ar_trace, processor):
    with pytest.raises(ValueError, match="step_index"):
        walkthrough.walkthrough(diffusion_trace, processor.tokenizer, len(diffusion_trace.steps))
    with pytest.raises(ValueError, match="ar trace"):
        walkthrough.walkthrough(ar_trace, processor.tokenizer, 0)


def test_a_token_row_colours_the_marked_tokens_and_counts_them(processor):
    tok = processor.tokenizer
    clean = tok.encode("Alice the bear loves honey.", add_special_tokens=False)
    marks = [i % 2 == 0 for i in range(len(clean))]
    row = walkthrough.token_row_html(tok, clean, marks, clean, "replaced")
    assert row.count('class="dg-cell"') == len(clean) and f"{sum(marks)}/{len(clean)} replaced" in row
    assert len(re.findall(r"border-color:#f59e0b", row)) == sum(marks)  # the "changed" colour: replaced
