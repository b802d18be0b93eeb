"""The lesson slide decks (tools/make_slides.py): every lesson marks its slide cells, a deck loads
nothing from outside the site, and the instructor page links every deck."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_slides  # noqa: E402

LESSONS = make_slides.lesson_notebooks()


def _marked(path: Path) -> list[str]:
    return [c.metadata.get("slideshow", {}).get("slide_type") for c in nbformat.read(path, as_version=4).cells]


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_marks_its_slides(path: Path) -> None:
    kinds = _marked(path)
    assert kinds[0] == "slide", f"{path.name}: the title cell is not marked as a slide (tools/make_slides.py --mark)"
    assert kinds.count("slide") >= 3, f"{path.name}: fewer than 3 slides marked"


def test_a_deck_has_one_section_per_marked_slide_and_loads_nothing_from_outside():
    path = ROOT / "notebooks" / "10_statistics_chain.ipynb"
    html = make_slides.deck(path)
    urls = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', html)
    assert urls and not [u for u in urls if re.match(r"(https?:)?//", u)], urls
    assert "../_static/reveal.js/dist/reveal.js" in urls and "../_static/mathjax/tex-chtml.js" in urls
    kinds = _marked(path)
    assert html.count("<section") >= kinds.count("slide") + kinds.count("subslide")
    assert "show_kernel_diff(" not in html, "code cells show their outputs only"
    assert "```diff" not in html and "naive_normalize -&gt; shifted_normalize" in html


def test_the_instructor_page_links_every_deck():
    page = (ROOT / "book" / "instructor" / "slides.md").read_text()
    linked = re.findall(r'href="\.\./\.\./slides/([^"]+)\.html"', page)
    assert linked == [p.stem for p in LESSONS]
