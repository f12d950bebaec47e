"""End to end in a real Chromium: pick an example, Generate, watch the canvas appear, scrub the replay.

Uses the embedded tiny model when it is in the repo, else the random test checkpoint. Needs Debian's
/usr/bin/chromium (never `playwright install`); skipped with the reason when it is missing.

    python -m pytest tests/ui/test_browser.py -m browser -q
"""

import re
from pathlib import Path

import pytest

from dg.loading import EMBEDDED_MODEL, load
from dg.ui.app import serve

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
STEP_LABEL = re.compile(r"canvas (\d+) · step (\d+) · showing")

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def url(checkpoint_dir):
    """The app on the embedded model (the random test checkpoint until it exists)."""
    model = EMBEDDED_MODEL if (EMBEDDED_MODEL / "config.json").exists() else checkpoint_dir
    with serve(load(model)) as address:
        yield address


@pytest.fixture
def page(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (CI does); never `playwright install`")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 1800})
        try:
            yield context.new_page()
        finally:
            context.close()


def shown_step(page) -> tuple[int, int]:
    label = page.locator("#dg-canvas").inner_text()
    canvas, step = STEP_LABEL.search(label).groups()
    return int(canvas), int(step)


def test_generate_on_an_example_draws_the_canvas_and_the_replay_slider_scrubs_it(url, page, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api")
    page.goto(url)
    page.get_by_text("What is 487 + 356?", exact=True).first.click()  # an example fills the prompt
    sync_api.expect(page.get_by_label("Prompt").first).to_have_value("What is 487 + 356?", timeout=10_000)
    page.get_by_role("button", name="Generate", exact=True).click()
    page.locator("#dg-canvas .dg-cell[data-pos]").first.wait_for(timeout=30_000)
    page.get_by_text(re.compile(r"^(Done|Stopped)")).first.wait_for(timeout=120_000)
    last = shown_step(page)
    assert page.locator("#dg-canvas .dg-grid .dg-cell[data-pos]").count() > 0

    slider = page.locator("input[type=range]").first  # the replay slider: the only one outside the settings
    slider.focus()
    slider.press("Home")
    page.wait_for_function("() => /canvas 1 · step 1 · showing/.test(document.querySelector('#dg-canvas').innerText)",
                           timeout=15_000)
    assert shown_step(page) == (1, 1) != last

    page.locator("#dg-canvas .dg-grid .dg-cell[data-pos='3']").click()  # a cell click opens it in the inspector
    page.wait_for_function("() => document.querySelector('#dg-pos input').value === '3'", timeout=10_000)
    inspector = page.locator(".dg-panel", has_text="argmax flips so far").first
    sync_api.expect(inspector).to_contain_text("position 3", timeout=10_000)
    sync_api.expect(page.locator(".js-plotly-plot")).to_have_count(4, timeout=20_000)
    page.screenshot(path=str(tmp_path / "replay.png"), full_page=True)
    assert (tmp_path / "replay.png").stat().st_size > 10_000
