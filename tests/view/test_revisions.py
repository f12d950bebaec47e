"""The self-correction view: a revision of a real run drawn step by step."""

import torch

from dg.loading import load
from dg.prompts import build_inputs
from dg.revisions import best_revision, first_with_revision
from dg.sampler import generate_diffusion
from dg.tiny.examples import load_rows
from dg.view.revisions import revision_html, summary


def _revised_run():
    loaded = load()
    rows = [r for r in load_rows()["tiny"] if r.image is None]

    def runs():
        for seed in range(3):
            for row in rows:
                torch.manual_seed(seed)
                yield row.prompt, generate_diffusion(loaded.model, build_inputs(loaded.processor, row.prompt,
                                                                                thinking=row.thinking))
    return loaded, first_with_revision(runs(), 3 * len(rows))


def test_the_view_shows_every_step_of_the_canvas_and_marks_acceptance_and_change():
    loaded, (_, trace, revisions, _) = _revised_run()
    r = best_revision(revisions)
    html = revision_html(trace, loaded.tokenizer, r)
    assert html.count("<tr><td>") == len(trace.steps_of(r.canvas))
    assert "accepted here" in html and "changed here" in html and f"position {r.position}" in html
    assert summary(revisions).startswith(f"{len(revisions)} accepted token")


def test_a_run_without_revisions_says_so():
    assert summary([]).startswith("No accepted token was changed")
