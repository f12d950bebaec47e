"""A number typed outside a slider's range, in a real Chromium: Gradio's slider takes the nearest end, and the page
says so under the slider in one line naming the value and the range; the box shows the end the run then reads.

    python -m pytest tests/ui/test_browser_ranges.py -m browser -q
"""

import pytest

from tests.ui.test_browser import DONE, WATCH_TOASTS, error_toasts, page, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


def type_in(box, value: str) -> None:
    box.fill(value)
    box.press("Enter")


def test_a_typed_value_outside_a_slider_s_range_is_said_under_it_and_the_run_reads_the_end_shown(page, url):  # noqa: F811
    page.goto(url)
    page.evaluate(WATCH_TOASTS)
    page.locator("#dg-canvas").wait_for()
    page.locator("tr", has_text="What is 45671 + 72890?").first.click()
    page.locator("#dg-settings").click()
    bound = page.locator("#dg-settings .block", has_text="entropy_bound").locator("input[type=number]")
    type_in(bound, "50")
    notes = page.locator(".dg-range-note")
    notes.first.wait_for(timeout=5_000)
    assert notes.all_inner_texts() == ["entropy_bound: 50 is outside 0.01–5; it is set to 5"]
    assert bound.input_value() == "5"
    page.locator("#dg-go").click()
    page.wait_for_function(DONE, timeout=120_000)
    assert "/ 5" in page.locator("#dg-panel").inner_text()  # the run's entropy budget: the end the box shows

    pace = page.locator("#dg-pace input[type=number]")
    type_in(pace, "99999")
    page.get_by_text("Pace: ms per step on screen: 99999 is outside 0–2000; it is set to 2000").wait_for(timeout=5_000)
    assert pace.input_value() == "2000"
    type_in(bound, "0.5")  # typed in again, inside the range: its line goes, the other stays
    assert notes.all_inner_texts() == ["Pace: ms per step on screen: 99999 is outside 0–2000; it is set to 2000"]
    assert error_toasts(page) == []
