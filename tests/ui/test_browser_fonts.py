"""The page's type in a real Chromium, offline: every heading and label in a system font stack (no web font
that a room without network lacks), and the edit panel's comparison table keeping each header word whole.

    python -m pytest tests/ui/test_browser_fonts.py -m browser -q
"""

import pytest

from dg.view.theme import MONO, SANS
from tests.ui.test_browser import page, url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.browser


def test_the_page_reads_in_system_fonts_and_table_headers_never_break_mid_word(page, url):  # noqa: F811
    page.goto(url)
    page.locator("#dg-canvas").wait_for()
    fonts = page.evaluate("""() => [...document.querySelectorAll('.gradio-container, h1, h2, h3, strong, label, button')]
        .map(e => getComputedStyle(e).fontFamily)""")
    assert fonts and not [f for f in fonts if "Source Sans" in f or "IBM Plex" in f]
    assert sum(f.startswith("ui-sans-serif") for f in fonts) > len(fonts) // 2
    assert page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--font-mono').trim()") == MONO
    assert page.evaluate("() => getComputedStyle(document.body).getPropertyValue('--font').trim()") == SANS
    # a comparison table as the edit panel writes it, in the panel's narrow column: each header on one line
    heights = page.evaluate("""() => {
        const panel = document.querySelector('#dg-edit-compare');
        panel.style.width = '220px';
        const box = panel.querySelector('.prose, .md') || panel;  // where Gradio renders the Markdown
        box.insertAdjacentHTML('beforeend', '<table id="dg-probe"><tr><th>run</th><th>tokens</th><th>NFE</th>' +
            '<th>canvases</th><th>wall (s)</th></tr><tr><td>edited · re-denoised</td><td>48</td><td>12</td>' +
            '<td>1</td><td>0.21</td></tr></table>');
        const th = [...document.querySelectorAll('#dg-probe th')];
        const line = parseFloat(getComputedStyle(th[0]).lineHeight) || th[0].getBoundingClientRect().height;
        return {line, each: th.map(e => e.getBoundingClientRect().height), text: th.map(e => e.innerText),
                wrap: th.map(e => getComputedStyle(e).whiteSpace + ' ' + getComputedStyle(e).wordBreak)};
    }""")
    assert heights["text"] == ["run", "tokens", "NFE", "canvases", "wall (s)"]
    assert set(heights["wrap"]) == {"nowrap keep-all"}  # a word is never split, whatever the column's width
    assert min(heights["each"]) > 0 and max(heights["each"]) <= 1.6 * min(heights["each"])  # no header wrapped onto a second line
