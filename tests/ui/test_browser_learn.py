"""Learn's "What diffusion can do" in a real Chromium: a self-correction found in a real run, the latency dial,
structured output and the roofline redrawn by a control; no error toast; a screenshot of each section goes to
$DG_TEST_ARTIFACTS/browser/ (default runs/test-artifacts/browser/).

    python -m pytest tests/ui/test_browser_learn.py -m browser -q
"""

import pytest

from tests.ui.test_browser import WATCH_TOASTS, artifacts, error_toasts, page, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser
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
    page.get_by_role("tab", name="Learn").click()
    page.locator("#dg-revisions-go").click()
    line = page.locator("#dg-revisions-line")
    line.get_by_text("This run").wait_for(timeout=120_000)
    assert "accepted token" in line.inner_text()  # found in this run or by the bounded search, or said so
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
    assert error_toasts(page) == []
