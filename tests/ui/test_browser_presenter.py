"""The presenter view in a real Chromium, at a laptop's 1280×800 and a projector's 1920×1080: after Generate on an
example the canvas and a large status line are on the first screen, nothing above the canvas moves while a paced
run plays, the legend lists only the chosen mode's states, and the header names the model, never a path.

With DG_SCREENSHOTS=1 it also saves the first screen of each tab at 1280×800 into assets/screenshots/ (the
README's pictures; CI leaves the committed ones alone):

    DG_SCREENSHOTS=1 python -m pytest tests/ui/test_browser_presenter.py -m browser -q
"""

import io
import os
import re
from pathlib import Path

import pytest

from dg.examples import SkillExamples
from dg.loading import EMBEDDED_MODEL
from dg.ui.common import LIVE_INFO
from dg.ui.race_tab import HYBRID
from dg.view.theme import mode_states
from tests.ui.test_browser import DONE, WATCH_TOASTS, cut_texts, error_toasts, page, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser
SCREENSHOTS = Path(__file__).resolve().parents[2] / "assets" / "screenshots"
VIEWPORTS = [(1280, 800), (1920, 1080)]
PACE_MS = 300
STATUS_PX = 24  # the presenter's status line reads from the back of a room
EXAMPLE = next(row for row in SkillExamples.load().rows if row.skill == "arithmetic" and row.thinking)
# Where the views stand (page coordinates) at every frame the canvas draws, with the run step it shows.
WATCH_FRAMES = """() => {
  window.__frames = [];
  const canvas = document.getElementById('dg-canvas');
  const top = (id) => document.getElementById(id).getBoundingClientRect().top + window.scrollY;
  new MutationObserver(() => {
    const shown = canvas.innerText.match(/run step (\\d+) of/);
    if (shown) window.__frames.push({step: +shown[1], canvas: top('dg-canvas'), go: top('dg-go'),
                                     status: top('dg-status'), panel: top('dg-panel')});
  }).observe(canvas, {childList: true, subtree: true, characterData: true});
}"""
# Each view's box on the screen as it is now (viewport coordinates).
BOXES = """() => Object.fromEntries(['dg-canvas', 'dg-status', 'dg-go', 'dg-prompt', 'dg-mode', 'dg-pace'].map(id => {
  const r = document.getElementById(id).getBoundingClientRect();
  return [id, {top: r.top, bottom: r.bottom, left: r.left, right: r.right}];
}))"""
# The run picker's value, and whether the replay slider is held (not draggable).
PICKED = """() => [document.querySelector("#dg-run-picker input").value,
                 document.querySelector("#dg-replay input[type=range]").disabled]"""
# The run picker's text box ends (its right edge less its right padding) and where its arrow begins.
PICKER_TEXT_END = """() => {
  const input = document.querySelector('#dg-run-picker input');
  const pad = parseFloat(getComputedStyle(input).paddingRight);
  return [input.getBoundingClientRect().right - pad,
          document.querySelector('#dg-run-picker .icon-wrap').getBoundingClientRect().left];
}"""
LEGEND = "() => [...document.querySelectorAll('#dg-legend .dg-li')].map(e => e.dataset.state)"


def presenter_view(page, url, size) -> None:
    page.set_viewport_size({"width": size[0], "height": size[1]})
    page.goto(url)
    page.evaluate(WATCH_TOASTS)
    page.locator("#dg-canvas").wait_for(timeout=30_000)
    page.get_by_label("Presenter view").check()
    page.wait_for_function("() => document.body.classList.contains('dg-presenter')")


def pick_example(page, row) -> None:
    """Open the folded examples, click the row, set its thinking (the row does)."""
    page.locator("#dg-examples > .label-wrap").click()
    page.locator("#dg-examples tr", has_text=row.prompt[:28]).first.click()
    page.wait_for_function("(p) => document.querySelector('#dg-prompt textarea').value === p", arg=row.prompt,
                           timeout=10_000)


def set_pace(page, ms: int) -> None:
    pace = page.locator("#dg-pace input[type=number]")
    pace.fill(str(ms))
    pace.press("Enter")


def shot(page, name: str) -> None:
    """The first screen as a small palette PNG in assets/screenshots/, when DG_SCREENSHOTS=1."""
    if os.environ.get("DG_SCREENSHOTS") != "1":
        return
    from PIL import Image

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    picture = Image.open(io.BytesIO(page.screenshot())).convert("RGB").quantize(colors=96)
    picture.save(SCREENSHOTS / name, optimize=True)


@pytest.mark.parametrize("size", VIEWPORTS, ids=lambda s: f"{s[0]}x{s[1]}")
def test_after_generate_the_canvas_and_a_large_status_line_are_on_the_first_screen_and_hold_still(
        page, url, size):  # noqa: F811
    presenter_view(page, url, size)
    box = page.evaluate(BOXES)
    # one bar on top: prompt, Generate, mode and pace side by side, the canvas under them
    assert max(box[i]["top"] for i in ("dg-prompt", "dg-go", "dg-mode", "dg-pace")) < box["dg-prompt"]["bottom"]
    assert box["dg-prompt"]["right"] <= box["dg-go"]["left"] < box["dg-mode"]["left"] < box["dg-pace"]["left"]
    assert box["dg-canvas"]["top"] > box["dg-prompt"]["bottom"]
    assert "open" not in page.locator("#dg-examples > .label-wrap").get_attribute("class")  # folded
    pick_example(page, EXAMPLE)
    set_pace(page, PACE_MS)
    page.evaluate(WATCH_FRAMES)
    page.locator("#dg-go").click()
    page.wait_for_function("() => /slow motion/.test(document.querySelector('#dg-status').innerText)",
                           timeout=60_000)
    assert page.evaluate(PICKED) == ["", True], "the run picker and the replay wait for the live run"
    assert page.locator("#dg-run-picker", has_text=LIVE_INFO).count() == 1
    page.wait_for_function(DONE, timeout=120_000)
    status = page.locator("#dg-status").inner_text()
    assert status.startswith("Done"), status
    picked, held = page.evaluate(PICKED)
    assert picked.startswith("#1 ") and not held, picked  # the run is kept, picked and open for replay
    text_end, arrow = page.evaluate(PICKER_TEXT_END)
    assert text_end <= arrow, (text_end, arrow)  # a long run label stops short of the picker's arrow

    box, height = page.evaluate(BOXES), page.evaluate("() => window.innerHeight")
    print(f"{size[0]}x{size[1]}: canvas top {box['dg-canvas']['top']:.0f}, status top {box['dg-status']['top']:.0f}"
          f" … {box['dg-status']['bottom']:.0f} of {height}")
    assert 0 <= box["dg-canvas"]["top"] < box["dg-status"]["top"] and box["dg-status"]["bottom"] <= height
    assert "open" not in page.locator("#dg-examples > .label-wrap").get_attribute("class")  # folded for the run
    size_px = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#dg-status p')).fontSize)")
    assert size_px >= STATUS_PX

    frames = page.evaluate("() => window.__frames")
    steps = sorted({f["step"] for f in frames})
    assert len(steps) >= 3, frames  # a paced run draws step after step
    assert len({round(f["canvas"]) for f in frames}) == 1, frames  # the canvas's top never moves
    assert len({round(f["go"]) for f in frames}) == 1, frames  # nor does the Generate button
    statuses = [f["status"] for f in frames]
    assert statuses == sorted(statuses), frames  # the canvas keeps its height: what follows it never rises
    assert error_toasts(page) == []
    if size == VIEWPORTS[0]:
        page.evaluate("() => window.scrollTo(0, 0)")
        shot(page, "generate-presenter.png")


def test_the_legend_lists_only_the_states_the_chosen_mode_can_show(page, url):  # noqa: F811
    presenter_view(page, url, VIEWPORTS[0])
    for shown, mode in (("diffusion", "diffusion"), ("AR", "ar"), ("hybrid", "hybrid"), ("diffusion", "diffusion")):
        page.locator("#dg-mode").get_by_label(shown).check()
        expected = [s.name for s in mode_states(mode)] + ["thought"]
        page.wait_for_function(f"() => ({LEGEND})().join() === {','.join(expected)!r}", timeout=10_000)
        assert page.evaluate(LEGEND) == expected
    assert len(mode_states("ar")) < len(mode_states("diffusion")) < len(mode_states("hybrid"))
    assert "verified" not in page.locator("#dg-legend").inner_text()  # diffusion again: no hybrid verdicts


def test_the_header_names_the_model_and_each_tab_reads_on_the_first_screen(page, url):  # noqa: F811
    presenter_view(page, url, VIEWPORTS[0])
    header = page.locator("#dg-header").inner_text()
    assert not re.search(r"(^|[\s`(])(/|[A-Za-z]:\\)\w", header), header  # no absolute path, POSIX or Windows
    assert str(EMBEDDED_MODEL.parent) not in header and EMBEDDED_MODEL.name in header, header
    pick_example(page, EXAMPLE)  # a run for Learn to walk through
    page.locator("#dg-go").click()
    page.wait_for_function(DONE, timeout=120_000)

    page.get_by_label("Presenter view").uncheck()
    page.get_by_role("tab", name="Race").click()
    page.get_by_role("button", name="Race", exact=True).click()
    result = page.locator("#dg-race-result")
    result.get_by_text(re.compile("wins|No winner|No lane is right")).wait_for(timeout=120_000)
    assert "Speed (effective tok/s): diffusion" in result.inner_text()
    page.evaluate("() => window.scrollTo(0, 0)")
    height = page.evaluate("() => window.innerHeight")
    for lane in ("Diffusion: entropy-bound sampler", "AR: same weights, one token per forward", HYBRID):
        heading = page.get_by_role("heading", name=lane).bounding_box()
        assert heading is not None and heading["y"] + heading["height"] <= height, lane  # the lanes start on screen
    page.locator(".js-plotly-plot", has_text="Tokens vs wall time:").wait_for(timeout=15_000)
    assert cut_texts(page) == []  # the race's chart at a laptop's width: no label cut at its edge
    shot(page, "race.png")

    page.get_by_role("tab", name="Learn").click()
    title = page.locator("#dg-learn-title")
    title.get_by_text(re.compile(r"run step \d+ of \d+")).wait_for(timeout=15_000)
    heading = page.get_by_role("heading", name="One sampler step, stage by stage")
    heading.evaluate("e => e.scrollIntoView({block: 'start'})")  # the step of the run just made, as pictures
    page.wait_for_timeout(300)
    shot(page, "learn.png")
    assert error_toasts(page) == []
