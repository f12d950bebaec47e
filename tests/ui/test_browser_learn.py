"""Learn's "What diffusion can do" in a real Chromium: a self-correction found in a real run (which plays on its
canvas at Generate's Pace first), the latency dial,
structured output and the roofline redrawn by a control; no chart text cut at its chart's edge, no error toast; a screenshot of each section goes to
$DG_TEST_ARTIFACTS/browser/ (default runs/test-artifacts/browser/).

    python -m pytest tests/ui/test_browser_learn.py -m browser -q
"""

import re

import pytest

from tests.ui.test_browser import WATCH_TOASTS, artifacts, cut_texts, error_toasts, page, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser
# Each text the self-correction line shows while its run plays, with the number of canvas cells drawn beside it.
WATCH_LIVE = """() => {
  window.__live = [];
  const line = document.getElementById('dg-revisions-line');
  new MutationObserver(() => {
    if (/running…/.test(line.innerText))
      window.__live.push([line.innerText, document.querySelectorAll('#dg-revisions-view .dg-cell').length]);
  }).observe(line, {childList: true, subtree: true, characterData: true});
}"""
SECTIONS = {"selfcorrect": "#dg-learn-selfcorrect", "dial": "#dg-learn-dial", "structured": "#dg-learn-structured",
            "roofline": "#dg-learn-roofline"}


def _shot(page, selector: str, path) -> None:
    page.locator(selector).scroll_into_view_if_needed()
    page.evaluate(f"() => document.querySelector('{selector}').scrollIntoView({{block: 'start'}})")
    page.wait_for_timeout(300)
    page.screenshot(path=str(path))


def test_each_learn_section_shows_real_numbers_and_the_roofline_redraws(page, url, artifacts):  # noqa: F811
    page.goto(url)
    page.evaluate(WATCH_TOASTS)
    pace = page.locator("#dg-pace input[type=number]")  # Generate's Pace: Learn's runs play at it too
    pace.fill("300")
    pace.press("Enter")
    page.get_by_role("tab", name="Learn").click()
    page.evaluate(WATCH_LIVE)
    page.locator("#dg-revisions-go").click()
    line = page.locator("#dg-revisions-line")
    # the run plays on the section's canvas, then its revisions: found in this run or by the bounded search, or
    # said so
    line.get_by_text("accepted token").wait_for(timeout=120_000)
    assert line.inner_text().startswith("This run (seed 0)")
    live = page.evaluate("() => window.__live")  # the frames drawn while it played: a canvas each, step by step
    steps = [int(m.group(1)) for text, cells in live if cells and (m := re.search(r"run step (\d+) of", text))]
    assert len(set(steps)) >= 2 and steps == sorted(steps), live
    if "changed before commit" in line.inner_text():
        assert page.locator(".dg-revision").get_by_text("changed here").count() >= 1
    _shot(page, SECTIONS["selfcorrect"], artifacts / "learn-1-self-correction.png")
    assert "python -m dg.bench.sweep" in page.locator("#dg-learn-dial").inner_text()
    _shot(page, SECTIONS["dial"], artifacts / "learn-2-latency-dial.png")
    assert "steps per canvas" in page.locator("#dg-learn-structured").inner_text()
    _shot(page, SECTIONS["structured"], artifacts / "learn-3-structured-output.png")
    table = page.locator("#dg-roofline-table")
    assert "of the bound" in table.inner_text() and "1 user(s)" in table.inner_text()
    users = page.locator("#dg-roofline-users input[type=number]")
    users.fill("64")
    users.press("Enter")
    table.get_by_text("64 user(s)").wait_for(timeout=30_000)
    _shot(page, SECTIONS["roofline"], artifacts / "learn-4-roofline.png")
    assert cut_texts(page) == []  # every chart of the tab: no label, tick or title cut at its edge
    assert error_toasts(page) == []
