"""Editing a canvas in a real Chromium: a story's middle sentence blanked with the mouse (a click, then a
shift-click), Re-denoise, and the new run in the history with every pinned cell unchanged and the blank
filled; a draft with blanks from the infill examples; a prompt outside the tiny model's skills gets its note.
No error toast at any point. Screenshots go to $DG_TEST_ARTIFACTS/browser/ (default runs/test-artifacts/).

Uses the embedded tiny model. Needs Debian's /usr/bin/chromium (never `playwright install`).

    python -m pytest tests/ui/test_browser_edit.py -m browser -q
"""

import re

import pytest

from dg.loading import EMBEDDED_MODEL, load
from dg.examples import load_rows
from dg.ui.app import serve
from tests.ui.test_browser import DONE, WATCH_TOASTS, artifacts, error_toasts, page  # noqa: F401 (fixtures)

pytestmark = pytest.mark.browser
EDIT_CELLS = "() => [...document.querySelectorAll('#dg-edit-canvas .dg-cell')].map(c => [c.innerText, c.className])"
PICKED = "() => document.querySelector('input[aria-label=\"Run\"]').value"  # the run picker: a new run, a new label
STORY = next(row for row in load_rows()["tiny"] if row.skill == "story")


@pytest.fixture(scope="module")
def url():
    if not (EMBEDDED_MODEL / "config.json").exists():
        pytest.skip("the embedded model is not in the repo")
    with serve(load(EMBEDDED_MODEL)) as address:
        yield address


def run_and_wait(page, button) -> str:
    """Click `button` and wait until a new run is in the picker and the status says it ended; the status."""
    before = page.evaluate(PICKED)
    button.click()
    try:
        page.wait_for_function(f"(before) => ({PICKED})() !== before && ({DONE})()", arg=before, timeout=120_000)
    except Exception as err:  # say what the page showed instead
        shown = page.locator("#dg-status").inner_text(), page.evaluate("() => window.__toasts")
        raise AssertionError(f"the run did not end: status {shown[0]!r}, messages {shown[1]}") from err
    return page.locator("#dg-status").inner_text()


def edit_cells(page) -> list:
    return page.evaluate(EDIT_CELLS)


def middle_sentence(cells) -> tuple[int, int]:
    """The positions of the story's second sentence: after the first full stop, through the second."""
    stops = [i for i, (text, _) in enumerate(cells) if text.strip() == "."]
    return stops[0] + 1, stops[1]


def test_blanking_a_story_s_middle_and_re_denoising_keeps_every_pinned_cell_as_a_new_run(url, page, artifacts):
    page.goto(url)
    page.evaluate(WATCH_TOASTS)
    page.locator("tr", has_text=STORY.prompt[:28]).first.click()
    page.wait_for_function("(p) => document.querySelector('textarea').value === p", arg=STORY.prompt, timeout=10_000)
    status = run_and_wait(page, page.locator("#dg-go"))
    assert status.startswith("Done"), status
    page.locator("#dg-edit-canvas .dg-cell.dg-pinned").first.wait_for(timeout=15_000)
    before = edit_cells(page)
    assert all("dg-pinned" in cls for _, cls in before)
    start, end = middle_sentence(before)

    page.locator("#dg-edit-mode").get_by_text("blanks it").click()
    page.locator(f"#dg-edit-canvas .dg-cell[data-pos='{start}']").click()
    page.locator(f"#dg-edit-canvas .dg-cell[data-pos='{end}']").click(modifiers=["Shift"])
    page.wait_for_function(f"() => document.querySelectorAll('#dg-edit-canvas .dg-blank').length === {end - start + 1}",
                           timeout=15_000)
    blanked = edit_cells(page)
    assert [i for i, (_, cls) in enumerate(blanked) if "dg-blank" in cls] == list(range(start, end + 1))
    page.locator("#dg-edit").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "edit-01-blanked.png"), full_page=True)

    runs_before = page.get_by_role("combobox", name="Run").input_value()
    status = run_and_wait(page, page.locator("#dg-redenoise"))
    assert status.startswith("Done"), status
    page.locator("#dg-edit-compare table").wait_for(timeout=15_000)
    label = page.get_by_role("combobox", name="Run").input_value()
    assert label != runs_before and re.match(r"#2 ✎ ", label)
    page.wait_for_function("(l) => document.querySelector('#dg-edit-canvas').innerText.includes('editing ' + l)",
                           arg=label, timeout=15_000)  # the new run loads into the editor
    after = edit_cells(page)
    kept = [i for i in range(len(before)) if not start <= i <= end]
    assert [after[i][0] for i in kept] == [before[i][0] for i in kept]  # every pinned cell unchanged
    assert all(text.strip() and text != "·" for text, _ in after[start:end + 1])  # the blank is filled
    # the live canvas of the new run marks the pinned cells as pinned; the replay reaches its steps
    assert page.locator("#dg-canvas .dg-cell.dg-pinned").count() > 0
    page.get_by_text(re.compile("(matches|differs from) the reference")).first.wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / "edit-02-re-denoised.png"), full_page=True)

    # the presenter view: edit cells as large as the live canvas's, pinned ones as tall as the others
    page.get_by_label("Presenter view").check()
    page.wait_for_function("() => document.body.classList.contains('dg-presenter')")
    heights = page.evaluate("() => [...document.querySelectorAll('#dg-edit-canvas .dg-cell')]"
                            ".map(c => Math.round(c.getBoundingClientRect().height))")
    live = page.locator("#dg-canvas .dg-grid .dg-cell").first.bounding_box()["height"]
    assert max(heights) - min(heights) <= 1 and abs(heights[0] - live) <= 1
    page.locator("#dg-edit-canvas").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "edit-03-presenter.png"))
    assert error_toasts(page) == []


def test_a_draft_with_blanks_runs_from_the_infill_examples_and_a_free_question_gets_the_note(url, page, artifacts):
    page.goto(url)
    page.evaluate(WATCH_TOASTS)
    page.get_by_text("Or a draft with blanks").click()
    json_row = next(row for row in load_rows()["infill"] if row.skill == "json")
    page.locator("tr", has_text=json_row.draft[:12]).first.click()
    page.wait_for_function("(d) => document.querySelector('#dg-draft textarea').value === d", arg=json_row.draft,
                           timeout=10_000)
    status = run_and_wait(page, page.locator("#dg-run-draft"))
    assert status.startswith("Done"), status
    answer = page.locator("#dg-text .dg-answer").inner_text()
    assert '"city": "Paris"' in answer
    page.screenshot(path=str(artifacts / "edit-04-draft.png"), full_page=True)

    # typed text goes into the picked cell, pinned
    page.locator("#dg-edit-canvas .dg-cell[data-pos='1']").wait_for(timeout=15_000)
    page.locator("#dg-edit-mode").get_by_text("picks it for writing").click()
    page.locator("#dg-edit-canvas .dg-cell[data-pos='1']").click()
    page.locator("#dg-edit-canvas .dg-inspected[data-pos='1']").wait_for(timeout=10_000)
    page.locator("#dg-edit-text textarea").fill("Tom")
    page.get_by_role("button", name="Write", exact=True).click()
    page.wait_for_function("() => { const c = document.querySelector(\"#dg-edit-canvas .dg-cell[data-pos='1']\");"
                           " return c.innerText === 'Tom' && c.classList.contains('dg-pinned'); }", timeout=10_000)

    question = load_rows()["general"][0].prompt
    page.locator("#dg-main textarea").first.fill(question)
    status = run_and_wait(page, page.locator("#dg-go"))
    assert status.startswith("Done"), status
    page.locator("#dg-text .dg-outside").wait_for(timeout=10_000)
    assert "no meaning" in page.locator("#dg-text").inner_text()
    page.locator("#dg-text").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "edit-05-outside-skills.png"), full_page=True)
    assert error_toasts(page) == []
