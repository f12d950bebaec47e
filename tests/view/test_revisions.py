"""The self-correction view: a revision of a real run drawn step by step."""

from dg.revisions import best_revision
from dg.view.revisions import revision_html, summary
from tests.test_revisions import embedded_revised_run


def test_the_view_shows_every_step_of_the_canvas_and_marks_acceptance_and_change():
    loaded, (_, trace, revisions, _) = embedded_revised_run()
    r = best_revision(revisions)
    html = revision_html(trace, loaded.tokenizer, r)
    assert html.count("<tr><td>") == len(trace.steps_of(r.canvas))
    assert "accepted here" in html and "changed here" in html and f"position {r.position}" in html
    assert summary(revisions).startswith(f"{len(revisions)} accepted token")


def test_a_run_without_revisions_says_so():
    assert summary([]).startswith("No accepted token was changed")
