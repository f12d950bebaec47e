"""The figures show the trace's numbers in the right shapes, and draw for an empty trace too."""

import numpy as np
import plotly.graph_objects as go
import pytest

from dg.trace import Trace
from dg.view import plots


def test_entropy_heatmap_is_positions_by_steps(diffusion_trace):
    fig = plots.entropy_heatmap(diffusion_trace)
    z = np.asarray(fig.data[0].z)
    assert z.shape == (diffusion_trace.start.canvas_length, len(diffusion_trace.steps))
    np.testing.assert_allclose(z[:, 0], diffusion_trace.steps[0].entropy)
    one = np.asarray(plots.entropy_heatmap(diffusion_trace, canvas=1).data[0].z)
    assert one.shape == (diffusion_trace.start.canvas_length, len(diffusion_trace.steps_of(1)))
    assert "Entropy" in fig.layout.title.text


def test_settle_step_is_where_the_argmax_stopped_changing(diffusion_trace):
    z = plots.settle_matrix(diffusion_trace)
    assert z.shape == (len(diffusion_trace.canvases), diffusion_trace.start.canvas_length)
    for k, row in enumerate(z):
        argmax = np.stack([r.argmax for r in diffusion_trace.steps_of(k)])  # (S, C)
        for pos, settle in enumerate(row):
            assert (argmax[settle - 1:, pos] == argmax[-1, pos]).all()
            assert settle == 1 or argmax[settle - 2, pos] != argmax[-1, pos]
    assert np.array_equal(np.asarray(plots.settle_steps(diffusion_trace).data[0].z), z)


def test_accepted_per_step_bars_match_the_records(diffusion_trace):
    fig = plots.accepted_per_step(diffusion_trace)
    assert list(fig.data[0].y) == [r.n_accepted for r in diffusion_trace.steps]
    budget = [r.accepted_entropy / r.entropy_bound for r in diffusion_trace.steps]
    np.testing.assert_allclose(fig.data[1].y, budget)
    assert all(0.0 <= b <= 1.0 + 1e-6 for b in budget)


def test_canvas_timeline_counts_thought_and_answer_tokens_per_canvas(diffusion_trace, processor, text_trace):
    tok = processor.tokenizer
    fig = plots.canvas_timeline(diffusion_trace, tok)
    assert list(fig.data[0].y) == [c.steps for c in diffusion_trace.canvases]
    thought, answer = fig.data[1].y, fig.data[2].y
    assert [t + a for t, a in zip(thought, answer)] == [c.tokens for c in diffusion_trace.canvases]
    shares = plots.canvas_token_shares(text_trace(tok, "<|channel>thought\nadd<channel|>42"), tok)
    assert shares[0]["thought"] > 0 and shares[0]["answer"] > 0


def test_race_chart_steps_at_canvas_commits_and_names_the_speedup(diffusion_trace, ar_trace, hybrid_trace):
    fig = plots.race_chart({"diffusion": diffusion_trace, "AR": ar_trace, "hybrid": hybrid_trace})
    diffusion, ar, hybrid = fig.data
    assert list(diffusion.y) == [0, *np.cumsum([c.tokens for c in diffusion_trace.canvases])]
    assert list(ar.y) == list(range(len(ar_trace.tokens) + 1))
    assert list(hybrid.y) == list(range(len(hybrid_trace.tokens) + 1))
    assert "diffusion" in fig.layout.title.text and "hybrid" in fig.layout.title.text and "×" in fig.layout.title.text


def test_tokens_per_round_stacks_the_draft_ar_kept_and_its_own_token_per_round(hybrid_trace):
    fig = plots.tokens_per_round(hybrid_trace)
    kept, own, rejected = fig.data
    assert list(kept.x) == list(range(1, len(hybrid_trace.rounds) + 1))
    # a canvas's first token is AR's, made before its first round, unless the last round of the canvas before
    # it ended that canvas with AR's own token one past its end (carried over)
    canvases = len({r.canvas for r in hybrid_trace.rounds})
    full = hybrid_trace.start.canvas_length
    carried = sum(r.canvas < hybrid_trace.rounds[-1].canvas and r.held + r.accepted == full and r.bonus is not None
                  for r in hybrid_trace.rounds)
    assert sum(kept.y) + sum(own.y) + canvases - carried == len(hybrid_trace.tokens)
    assert list(kept.y) == [r.accepted for r in hybrid_trace.rounds] and all(o == 1 for o in own.y[:-1])  # EOS ends the last
    assert all(r >= 0 for r in rejected.y) and any(r > 0 for r in rejected.y)
    assert "mean" in fig.layout.title.text and len(fig.layout.title.text) <= 40
    assert plots.run_figures(hybrid_trace, None)[-1].layout.title.text == fig.layout.title.text


def test_the_race_chart_counts_no_pad_on_the_ar_side_as_the_metrics_do(ar_trace):
    padded = Trace.from_dict(ar_trace.to_dict())
    padded.start.pad_token_id = padded.tokens[1].token_id  # pretend the model wrote pad there
    pads = sum(r.token_id == padded.start.pad_token_id for r in padded.tokens)
    assert pads and plots.race_points(padded)[1][-1] == len(padded.tokens) - pads == padded.metrics()["tokens"]


def test_figures_are_transparent_count_steps_from_one_and_keep_titles_short(diffusion_trace, processor):
    figures = [plots.entropy_heatmap(diffusion_trace), plots.settle_steps(diffusion_trace),
               plots.accepted_per_step(diffusion_trace), plots.canvas_timeline(diffusion_trace, processor.tokenizer)]
    for fig in figures:
        assert fig.layout.paper_bgcolor == fig.layout.plot_bgcolor == "rgba(0,0,0,0)"  # light and dark pages
        assert len(fig.layout.title.text) <= 40  # fits half of a 1024-px page
    assert list(figures[2].data[0].x) == list(range(1, len(diffusion_trace.steps) + 1))
    assert figures[2].layout.legend.y > 1  # above the plot, clear of the x-axis title


@pytest.mark.parametrize("figure", ["entropy_heatmap", "settle_steps", "accepted_per_step"])
def test_figures_draw_for_an_empty_trace(figure):
    fig = getattr(plots, figure)(Trace())
    assert isinstance(fig, go.Figure) and not fig.data and fig.layout.title.text


def test_timeline_and_race_draw_for_an_empty_trace(processor):
    assert not plots.canvas_timeline(Trace(), processor.tokenizer).data
    assert "n/a" in plots.race_chart({"diffusion": Trace(), "AR": Trace()}).layout.title.text
    assert not plots.tokens_per_round(Trace()).data
