"""The lesson decks (tools/make_slides.py) as a room sees them: each deck of the built site opened in
headless Chromium at 1280x720, every slide shown in turn. Every heading of the lesson is the heading
of a slide, in the lesson's order, the deck's last section is the lesson's Summary (then its
Exercise, if it has one), no slide's content reaches past the slide's page (what does not fit is
shrunk by slides_template/fit_slides.js, never cut), and no short table cell (a number) breaks
over two lines."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from built_site import ROOT, SETTLE_JS, SITE

sys.path.insert(0, str(ROOT / "tools"))
import make_slides  # noqa: E402

LESSONS = make_slides.lesson_notebooks()
WIDTH, HEIGHT = make_slides.SLIDE_SIZE

# Every slide shown in turn: its first heading, whether its content or any block in it reaches past
# the slide's page (scroll size over the page's, or a box outside the slide's box), and its short
# table cells (a number, a name: SHORT_CELL characters at most) that break over two lines.
_SLIDES_JS = """async () => {
  const report = [];
  for (const slide of Reveal.getSlides()) {
    const at = Reveal.getIndices(slide);
    Reveal.slide(at.h, at.v);
    await new Promise(r => requestAnimationFrame(r));
    const page = slide.getBoundingClientRect();
    const heading = slide.querySelector('h1, h2, h3');
    const outside = Array.from(slide.querySelectorAll('img, svg, table, pre, p, li, h1, h2, h3, mjx-container'))
      .filter(e => { const r = e.getBoundingClientRect();
                     return r.width > 0 && (r.left < page.left - 1 || r.right > page.right + 1 ||
                                            r.top < page.top - 1 || r.bottom > page.bottom + 1); })
      .map(e => e.tagName.toLowerCase() + ': ' + (e.innerText || e.alt || '').slice(0, 60));
    // a block inside the slide that hides part of its own content (overflow hidden or scrolled):
    // the slide's scroll size cannot see it, and the fit would not shrink for it (a formula's inner
    // boxes are MathJax's: its screen-reader copy and stretched delimiters clip by design)
    const clipped = Array.from(slide.querySelectorAll('*')).filter(e => {
      const style = getComputedStyle(e);
      return e.clientWidth > 0 && !e.closest('mjx-container') && (style.overflowX !== 'visible' || style.overflowY !== 'visible') &&
             (e.scrollWidth > e.clientWidth + 1 || e.scrollHeight > e.clientHeight + 1); })
      .map(e => e.tagName.toLowerCase() + '.' + e.className + ': ' + (e.innerText || '').slice(0, 60));
    const wrapped = Array.from(slide.querySelectorAll('td, th')).filter(cell => {
      const text = cell.innerText.trim();
      if (!text || text.length > SHORT_CELL || text.includes('\\n')) return false;
      const range = document.createRange();
      range.selectNodeContents(cell);
      const lines = Array.from(range.getClientRects()).filter(r => r.height > 0);
      return lines.some(r => r.top > lines[0].top + 0.75 * lines[0].height);
    }).map(cell => cell.innerText.trim());
    report.push({at: `${at.h}/${at.v}`, heading: heading ? heading.innerText : null,
                 scroll: [slide.scrollWidth, slide.scrollHeight], page: [slide.clientWidth, slide.clientHeight],
                 outside: outside, clipped: clipped, wrapped: wrapped});
  }
  return report;
}"""


def _plain(heading: str) -> str:
    """A heading's words, for comparing markdown with its rendering: links, code marks and punctuation off."""
    return re.sub(r"[^0-9a-z]+", "", re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower())


def _lesson_headings(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    return [h for cell in nb.cells if cell.cell_type == "markdown" for h in make_slides.headings(cell.source)]


@pytest.fixture(scope="module")
def decks(browser: object, base_url: str) -> dict[str, list[dict]]:
    """Per lesson, what each slide of its deck showed."""
    found = {}
    for path in LESSONS:
        deck = SITE / "slides" / f"{path.stem}.html"
        assert deck.is_file(), f"{deck} was not built (`make book` runs tools/make_slides.py)"
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
        try:
            page.goto(f"{base_url}slides/{path.stem}.html", wait_until="load", timeout=60_000)
            page.evaluate(SETTLE_JS)
            page.wait_for_function("() => window.Reveal && Reveal.isReady()", timeout=30_000)
            found[path.stem] = page.evaluate(_SLIDES_JS)
        finally:
            page.close()
    return found


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_every_heading_of_the_lesson_is_a_slide_in_order(decks: dict[str, list[dict]], path: Path) -> None:
    lesson = [_plain(h) for h in _lesson_headings(path)]
    slides = [_plain(s["heading"]) for s in decks[path.stem] if s["heading"]]
    assert slides == lesson, f"{path.name}: the deck's slide headings differ from the lesson's headings"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_the_deck_ends_with_the_summary(decks: dict[str, list[dict]], path: Path) -> None:
    last = [_plain(s["heading"] or "") for s in decks[path.stem]][-2:]
    closing = last[-1:] if not last[-1].startswith("exercise") else last[:1]
    assert closing and closing[0].startswith("summary"), \
        f"{path.name}: the deck closes with {last}, not the lesson's Summary (then its Exercise)"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_no_slide_overflows_its_page(decks: dict[str, list[dict]], path: Path) -> None:
    over = [f"slide {s['at']} ({s['heading']!r}): content {s['scroll']} on a page of {s['page']}, "
            f"outside: {s['outside'][:3]}, cut inside: {s['clipped'][:3]}"
            for s in decks[path.stem]
            if s["scroll"][0] > s["page"][0] + 1 or s["scroll"][1] > s["page"][1] + 1 or s["outside"] or s["clipped"]]
    assert not over, f"{path.name}: slides cut at {WIDTH}x{HEIGHT}:\n" + "\n".join(over)


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_short_table_cells_stay_on_one_line(decks: dict[str, list[dict]], path: Path) -> None:
    wrapped = [f"slide {s['at']}: {s['wrapped'][:5]}" for s in decks[path.stem] if s["wrapped"]]
    assert not wrapped, f"{path.name}: numbers or names broken over two lines (as '-' and '0.08%'):\n" + "\n".join(wrapped)
