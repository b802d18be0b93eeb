"""Cell outputs of the built book wrap instead of being cut at the page's edge (book/_static/workshop.css):
on every notebook page of the book, no output box is narrower than the lines it prints, so a reader
sees every profile's "[trn2 cost model (estimate)]" label in full."""
from __future__ import annotations

import sys

import pytest
from built_site import ROOT, SETTLE_JS, SITE

sys.path.insert(0, str(ROOT / "tools"))
import book_outputs  # noqa: E402

PAGES = [str(p.relative_to(ROOT).with_suffix(".html")) for p in book_outputs.book_notebooks()]
# The lessons with the widest printouts: that they print is checked too, so the test cannot pass on
# a page whose outputs went missing.
WIDEST = ["notebooks/07_dma_wall.html", "notebooks/16_folded_linear.html"]

# Every box of a cell output that shows less than its content's width: a <pre>, or anything that
# scrolls or clips sideways, except the theme's container of a table too wide for the page (it
# scrolls with a scrollbar; its cells wrap at spaces first).
_CLIPPED_JS = """() => Array.from(document.querySelectorAll('div.cell_output *'))
  .filter(e => (e.tagName === 'PRE' || getComputedStyle(e).overflowX !== 'visible') && e.clientWidth > 0
               && !e.classList.contains('pst-scrollable-table-container')
               && e.scrollWidth > e.clientWidth + 1)
  .map(e => `${e.tagName.toLowerCase()}: ${e.scrollWidth}px of text in ${e.clientWidth}px: `
            + e.innerText.split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 100))"""


@pytest.mark.parametrize("path", PAGES)
def test_no_output_is_cut_at_the_page_edge(browser: object, base_url: str, path: str) -> None:
    assert (SITE / path).is_file(), f"{path} was not built"
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        page.goto(base_url + path, wait_until="load", timeout=60_000)
        page.evaluate(SETTLE_JS)
        outputs = page.evaluate("() => document.querySelectorAll('div.cell_output pre').length")
        clipped = page.evaluate(_CLIPPED_JS)
    finally:
        page.close()
    assert path not in WIDEST or outputs > 5, f"{path}: only {outputs} printed outputs found"
    assert not clipped, f"{path}: {len(clipped)} outputs cut at the page edge:\n" + "\n".join(clipped)
