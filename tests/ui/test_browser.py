"""A presenter's session in a real Chromium: the Learn tab and an export before any run, five examples back
to back (one per skill: mixed step counts, a picture, thinking, one in slow motion), the replay and inspector, the
presenter view, a hybrid run (its verify rounds in their colours), a three-lane race, the Learn walkthrough, a
verify round and an export after them, then the page at 1024 px and in dark mode. At no point may an error toast
appear; every answer must be readable off the canvas cells (no cell cuts its token). Screenshots of each view go
to $DG_TEST_ARTIFACTS (default runs/test-artifacts/browser/), for a person to look at.

Uses the embedded tiny model when it is in the repo, else the random test checkpoint. Needs Debian's
/usr/bin/chromium (never `playwright install`); skipped with the reason when it is missing.

    python -m pytest tests/ui/test_browser.py -m browser -q
"""

import os
import re
from pathlib import Path

import pytest

from dg.loading import EMBEDDED_MODEL, load
from dg.ui.app import serve
from dg.examples import SkillExamples
from dg.view.theme import STATE_COLORS

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
STEP_LABEL = re.compile(r"canvas (\d+) · step (\d+) · showing \w+ · run step (\d+) of (\d+)")
DONE = "() => /^(Done|Stopped|Failed)/.test(document.querySelector('#dg-status').innerText)"
# Every toast Gradio shows, kept from the moment it appears (they fade out): [type, text].
WATCH_TOASTS = """() => {
  window.__toasts = [];
  new MutationObserver(() => {
    for (const t of document.querySelectorAll('.toast-body:not([data-seen])')) {
      t.dataset.seen = '1';
      window.__toasts.push([t.className, t.innerText]);
    }
  }).observe(document.body, {childList: true, subtree: true});
}"""
# Cells whose token does not fit (the browser would cut or overflow it).
CUT_CELLS = ("() => [...document.querySelectorAll('#dg-canvas .dg-cell')]"
             ".filter(c => c.scrollWidth > c.clientWidth + 1).map(c => c.innerText)")
CANVAS_TEXT = ("() => [...document.querySelectorAll('#dg-canvas .dg-tok, #dg-canvas .dg-grid .dg-cell')]"
               ".map(c => c.innerText).join('')")

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def url(checkpoint_dir):
    """The app on the embedded model (the random test checkpoint until it exists)."""
    model = EMBEDDED_MODEL if (EMBEDDED_MODEL / "config.json").exists() else checkpoint_dir
    with serve(load(model)) as address:
        yield address


@pytest.fixture
def artifacts() -> Path:
    folder = Path(os.environ.get("DG_TEST_ARTIFACTS", ROOT / "runs" / "test-artifacts")) / "browser"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(tmp_path):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (CI does); never `playwright install`")
    sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright Python package is not installed")
    with sync_api.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=str(CHROMIUM), headless=True, args=FLAGS,
            viewport={"width": 1400, "height": 1000})
        try:
            yield context.new_page()
        finally:
            context.close()


# Every text of every shown plotly chart (titles, ticks, legends, marker labels) whose box leaves its chart's: a
# label cut at the chart's edge, with how far past the left and right edges it reaches.
CUT_TEXTS = """() => {
  const cut = [];
  for (const plot of document.querySelectorAll('.js-plotly-plot')) {
    if (!plot.offsetParent) continue;  // in a hidden tab or a folded accordion
    const box = plot.querySelector('.main-svg').getBoundingClientRect();
    for (const text of plot.querySelectorAll('text')) {
      const r = text.getBoundingClientRect();
      if (!text.textContent.trim() || r.width === 0) continue;
      if (r.left < box.left - 1 || r.right > box.right + 1 || r.top < box.top - 1 || r.bottom > box.bottom + 1)
        cut.push([text.textContent, Math.round(box.left - r.left), Math.round(r.right - box.right)]);
    }
  }
  return cut;
}"""


def cut_texts(page) -> list:
    """The chart texts the page cuts at a chart's edge (CUT_TEXTS)."""
    return page.evaluate(CUT_TEXTS)


def error_toasts(page) -> list:
    return [text for kind, text in page.evaluate("() => window.__toasts") if "error" in kind.lower()
            or text.startswith("Error")]


def normalised(text: str) -> str:
    """Text as the cells spell it, without marks: no spaces, no ␣/⏎ marks, no special or byte tokens."""
    text = re.sub(r"<[^<>\s]*>|0x[0-9A-F]{2}", "", text)
    return "".join(ch for ch in text if ch.isascii() and not ch.isspace())


def generate_example(page, row, pace_ms: int = 0, thinking: bool = False) -> str:
    """Click an example row (thinking on too when asked), Generate at `pace_ms`, wait for the end; the status."""
    page.get_by_role("tab", name="Generate").click()
    page.locator("tr", has_text=row[0][:28]).first.click()  # long prompts are cut in the examples table
    page.wait_for_function("(p) => document.querySelector('textarea').value === p", arg=row[0], timeout=10_000)
    if thinking:
        page.get_by_label("Thinking").first.check()
    pace = page.locator("#dg-pace input[type=number]")
    pace.fill(str(pace_ms))
    pace.press("Enter")
    page.locator("#dg-go").click()
    if pace_ms:
        page.wait_for_function("() => /slow motion/.test(document.querySelector('#dg-status').innerText)",
                               timeout=60_000)
    page.wait_for_function(DONE, timeout=120_000)
    return page.locator("#dg-status").inner_text()


def assert_readable(page) -> None:
    """No cell cuts its token, and the answer shown under the canvas (if the model wrote one) can be read
    off its cells."""
    page.locator("#dg-text .dg-view").first.wait_for(timeout=10_000)
    assert page.evaluate(CUT_CELLS) == []
    if not page.locator("#dg-text .dg-answer").count():
        assert "no committed text" in page.locator("#dg-text").inner_text()
        return
    answer = page.locator("#dg-text .dg-answer").inner_text()
    assert normalised(answer) in normalised(page.evaluate(CANVAS_TEXT).replace("␣", "").replace("⏎", ""))


def cell_border(page, state: str) -> str:
    """The computed border colour of the first canvas cell in `state` (as rgb(...))."""
    return page.evaluate(f"() => getComputedStyle(document.querySelector('#dg-canvas .dg-{state}')).borderTopColor")


def rgb(hex_color: str) -> str:
    return "rgb({}, {}, {})".format(*(int(hex_color[i:i + 2], 16) for i in (1, 3, 5)))


def shown_step(page) -> tuple[int, ...]:
    return tuple(int(g) for g in STEP_LABEL.search(page.locator("#dg-canvas").inner_text()).groups())


def five_examples() -> list:
    """Five skill examples, one per skill first (mixed step counts), a picture question among them."""
    rows = SkillExamples.load().rows
    picks = list({row[3]: row for row in reversed(rows)}.values())[::-1]  # the first row of each skill
    picks += [row for row in rows if row not in picks][:5 - len(picks)]
    assert len(picks) == 5 and any(row[1] for row in picks)
    return picks


def test_a_presenters_session_shows_no_error_and_every_answer_reads_off_the_canvas(url, page, artifacts):
    page.goto(url)
    page.evaluate(WATCH_TOASTS)
    page.locator("#dg-canvas").wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "01-idle.png"), full_page=True)
    assert "waiting" not in page.locator("#dg-canvas").inner_text()

    # Learn and an export before any run: what to do, not an error
    page.get_by_role("tab", name="Learn").click()
    page.locator("#dg-learn-title").get_by_text(re.compile("No run yet")).wait_for(timeout=10_000)
    page.get_by_role("button", name="Export trace JSON, animated GIF and HTML replay").click()
    page.get_by_text("Nothing to export yet").wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / "02-learn-before-a-run.png"), full_page=True)

    # five examples back to back, the fourth in slow motion
    rows = five_examples()
    thinking = next((n for n, row in enumerate(rows) if row[2]), 1)  # an example with thinking, else one turned on
    for n, row in enumerate(rows):
        status = generate_example(page, row, pace_ms=100 if n == 3 else 0, thinking=n == thinking)
        assert status.startswith("Done"), status
        assert_readable(page)
        canvas, step, run_step, total = shown_step(page)
        assert run_step == total == int(page.locator("#dg-replay input[type=number]").input_value())
        page.get_by_text(re.compile("(matches|differs from) the reference")).first.wait_for(timeout=10_000)
        page.screenshot(path=str(artifacts / f"03-example-{n + 1}.png"), full_page=True)
        assert error_toasts(page) == [], row[0]

    # the replay from run step 1, and a clicked cell outlined in the canvas and open in the inspector
    slider = page.locator("#dg-replay input[type=range]")
    slider.focus()
    slider.press("Home")
    page.wait_for_function("() => /run step 1 of/.test(document.querySelector('#dg-canvas').innerText)",
                           timeout=15_000)
    assert shown_step(page)[:3] == (1, 1, 1)
    page.locator("#dg-canvas .dg-grid .dg-cell[data-pos='3']").click()
    page.locator("#dg-canvas .dg-inspected[data-pos='3']").wait_for(timeout=10_000)
    page.locator(".dg-panel", has_text="argmax flips so far").first.wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / "04-replay-inspector.png"), full_page=True)

    # the presenter view: the canvas spans the page, cells larger, nothing cut
    before = page.locator("#dg-canvas .dg-cell").first.bounding_box()["height"]
    page.get_by_label("Presenter view").check()
    page.wait_for_function("() => document.body.classList.contains('dg-presenter')")
    assert page.locator("#dg-canvas").bounding_box()["width"] > 0.85 * 1400 - 100
    assert page.locator("#dg-canvas .dg-cell").first.bounding_box()["height"] > 1.3 * before
    assert page.evaluate(CUT_CELLS) == []
    page.locator("#dg-canvas").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "05-presenter.png"))
    page.get_by_label("Presenter view").uncheck()

    # hybrid: the race's three-term sum, its first verify round's draft in the theme's colours
    race_row = next(row for row in SkillExamples.load().rows if row == SkillExamples.load().race_example())
    page.locator("#dg-mode").get_by_label("hybrid").check()
    status = generate_example(page, race_row)
    assert status.startswith("Done") and "verify round" in status, status
    assert_readable(page)
    slider.focus()
    slider.press("Home")
    first_round = "() => /run step 1 of .*verify round 1/.test(document.querySelector('#dg-canvas').innerText)"
    page.wait_for_function(first_round, timeout=15_000)
    for state in ("verified", "agreed", "bonus", "rejected"):
        assert cell_border(page, state) == rgb(STATE_COLORS[state]), state
    page.locator("#dg-canvas").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "06-hybrid.png"))
    page.locator("#dg-mode").get_by_label("diffusion").check()

    # a three-lane race on the default prompt (that sum, thinking on): one line names the fastest correct lane
    page.get_by_role("tab", name="Race").click()
    page.get_by_role("button", name="Race", exact=True).click()
    result = page.locator("#dg-race-result")
    result.get_by_text(re.compile("wins|No winner|No lane is right")).wait_for(timeout=120_000)
    line = result.inner_text()
    assert "Speed (effective tok/s): diffusion" in line and "hybrid" in line and "Reference answer" in line, line
    assert re.search(r"AR ([✓✗]), hybrid \1", line), line  # hybrid's tokens are AR's: both right or both wrong
    assert "diffusion ✗, AR ✓, hybrid ✓" in line, line  # the default sum: diffusion errs at seed 0, AR does not
    page.locator(".js-plotly-plot", has_text="Tokens vs wall time:").wait_for(timeout=15_000)
    assert cut_texts(page) == []  # the race's chart: no label cut at its edge
    page.screenshot(path=str(artifacts / "06-race.png"), full_page=True)

    # the Learn walkthrough of the newest Generate run, as pictures; then an export of it
    page.get_by_role("tab", name="Learn").click()
    page.locator("#dg-learn-title").get_by_text(re.compile(r"run step \d+ of \d+")).wait_for(timeout=15_000)
    page.get_by_label("sort_bound").check()
    page.locator("svg.dg-fig").first.wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / "07-learn.png"), full_page=True)
    page.locator("#dg-hybrid-go").click()
    # the round's own run, kept and picked: the export message names it (as the pick happens), then every view
    # of the Learn tab shows it, so nothing above the export button moves while it is clicked
    said = page.locator("#dg-export-message").get_by_text(re.compile(r"^The selected run: #\d+ hybrid "))
    said.wait_for(timeout=120_000)
    label = said.inner_text().removeprefix("The selected run: ").removesuffix(".")
    page.locator("#dg-hybrid-title").get_by_text(re.compile(re.escape(label) + r" · verify round \d+ of \d+")).wait_for(
        timeout=30_000)
    page.locator("#dg-learn-title").get_by_text(re.compile(re.escape(label) + r" · run step \d+ of \d+")).wait_for(
        timeout=30_000)
    page.locator("#dg-hybrid-title").scroll_into_view_if_needed()
    page.screenshot(path=str(artifacts / "07-learn-verify-round.png"))
    page.get_by_role("button", name="Export trace JSON, animated GIF and HTML replay").click()
    page.get_by_text(re.compile("^Exported")).wait_for(timeout=120_000)
    for name in ("trace.json", "run.gif", "replay.html"):
        page.locator(f"#dg-exports a[href*='{name}']").wait_for(timeout=30_000)
    page.screenshot(path=str(artifacts / "08-export.png"), full_page=True)

    # at 1024 px nothing overflows sideways: the inspector and the step panel fit their boxes
    page.get_by_role("tab", name="Generate").click()
    page.set_viewport_size({"width": 1024, "height": 900})
    page.wait_for_timeout(500)
    overflowing = page.evaluate("() => [...document.querySelectorAll('.dg-view')].filter("
                                "v => v.offsetParent && v.scrollWidth > v.clientWidth + 1).length")
    assert overflowing == 0
    page.screenshot(path=str(artifacts / "09-1024px.png"), full_page=True)
    page.evaluate("() => document.body.classList.add('dark')")  # Gradio's dark theme, as ?__theme=dark sets it
    page.wait_for_timeout(300)
    page.screenshot(path=str(artifacts / "10-dark.png"), full_page=True)
    assert error_toasts(page) == []
