"""The lesson slide decks (tools/make_slides.py): a slide at every `## ` heading and a slide below it
at every `### ` heading wherever they stand in a cell, the content up to the next heading on it,
outputs paged to fit, a deck loads nothing from outside the site, and the instructor page links
every deck. tests/book/test_slide_decks.py renders the built decks in Chromium."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_slides  # noqa: E402

LESSONS = make_slides.lesson_notebooks()
PNG = {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}


def _printout(lines: int) -> nbformat.NotebookNode:
    return new_output("stream", name="stdout", text="".join(f"line {i}\n" for i in range(lines)))


def _synthetic() -> nbformat.NotebookNode:
    return new_notebook(cells=[
        new_markdown_cell("# 99 · Title\n\nWhat you will learn."),
        new_markdown_cell("## One\n\nFirst.\n\n## Two\n\nSecond, in the same cell.\n\n### A step\n\nIts text."),
        new_code_cell("setup()"),  # no outputs: nothing to show
        new_code_cell("print(x)", outputs=[_printout(2)]),
        new_markdown_cell("More of Two.\n\n```python\n## not a heading inside a code block\n```"),
        new_code_cell("show()", outputs=[_printout(3), new_output("display_data", data=PNG),
                                         new_output("display_data", data=PNG)]),
        new_code_cell("print(source)", outputs=[_printout(2 * make_slides.PAGE_LINES + 1)]),
        new_markdown_cell("## Summary\n\n- it works"),
    ])


def _slides(cells: list[nbformat.NotebookNode]) -> list[list[nbformat.NotebookNode]]:
    """The cells grouped by the slide they land on (a new group at every slide and sub-slide)."""
    slides: list[list[nbformat.NotebookNode]] = []
    for cell in cells:
        if cell.metadata.slideshow.slide_type in ("slide", "subslide"):
            slides.append([])
        slides[-1].append(cell)
    return slides


def test_a_heading_in_the_middle_of_a_cell_starts_a_slide():
    assert make_slides.split_at_headings("## One\n\nFirst.\n## Two\nSecond.\n\n### A step\nIts text.") == [
        "## One\n\nFirst.", "## Two\nSecond.", "### A step\nIts text."]


def test_a_hash_line_inside_a_code_block_is_not_a_heading():
    text = "Intro\n\n```python\n## a comment\n```\n\n## Real"
    assert make_slides.split_at_headings(text) == ["Intro\n\n```python\n## a comment\n```", "## Real"]
    assert make_slides.headings(text) == ["Real"]


def test_every_heading_starts_a_slide_with_its_content_up_to_the_next_heading():
    cells = make_slides.slide_cells(_synthetic())
    kinds = [c.metadata.slideshow.slide_type for c in cells]
    markdown = [(c.metadata.slideshow.slide_type, c.source.split("\n")[0]) for c in cells if c.cell_type == "markdown"]
    assert markdown == [("slide", "# 99 · Title"), ("slide", "## One"), ("slide", "## Two"),
                        ("subslide", "### A step"), ("-", "More of Two."), ("slide", "## Summary")]
    # the short printout stays on the step's slide, right after its text
    step = kinds.index("subslide")
    assert cells[step + 1].cell_type == "code" and kinds[step + 1] == "-"
    assert "setup()" not in [c.source for c in cells], "a code cell without outputs shows nothing"
    assert len({c.id for c in cells}) == len(cells), "every piece of a cell has an id of its own"


def test_each_figure_and_each_page_of_a_long_printout_gets_a_slide_of_its_own():
    slides = _slides(make_slides.slide_cells(_synthetic()))
    outputs = [[o for c in s if c.cell_type == "code" for o in c.outputs] for s in slides]
    figures = [sum("image/png" in o.get("data", {}) for o in out) for out in outputs]
    assert max(figures) == 1 and sum(figures) == 2, "two figures of one cell, one slide each"
    printed = [sum(make_slides._text_lines([o]) for o in out if o.output_type == "stream") for out in outputs]
    assert max(printed) <= make_slides.PAGE_LINES
    pages = [c.outputs for c in make_slides.slide_cells(_synthetic()) if c.source == "print(source)"]
    assert len(pages) == 3, "a printout of two slides and a line: three pages"
    assert "".join(o.text for page in pages for o in page) == _printout(2 * make_slides.PAGE_LINES + 1).text


def test_a_long_diff_is_paged_with_its_code_block_closed_and_reopened():
    diff = "**a -> b**\n\n```diff\n" + "".join(f"+line {i}\n" for i in range(make_slides.PAGE_LINES * 2)) + "```\n"
    pages = make_slides._markdown_pages(diff)
    assert len(pages) == 3
    assert all(p.count("```") == 2 for p in pages), pages
    assert all(p.count("\n") <= make_slides.PAGE_LINES + 1 for p in pages)
    assert "".join(p for p in pages).count("+line") == make_slides.PAGE_LINES * 2


def test_the_deck_of_a_notebook_has_a_section_per_heading(tmp_path: Path):
    path = tmp_path / "99_synthetic.ipynb"
    nbformat.write(_synthetic(), path)
    html = make_slides.deck(path)
    sections = re.findall(r"<section[^>]*>(.*?)</section>", html, re.S)
    first_headings = [m.group(1) for s in sections if (m := re.search(r"<h[123][^>]*>(.*?)</h[123]>", s))]
    assert [re.sub(r"<[^>]+>", "", h).strip() for h in first_headings] == [
        "99 · Title", "One", "Two", "A step", "Summary"]


def test_a_deck_shows_outputs_only_and_loads_nothing_from_outside():
    path = ROOT / "notebooks" / "10_statistics_chain.ipynb"
    html = make_slides.deck(path)
    urls = re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', html)
    assert urls and not [u for u in urls if re.match(r"(https?:)?//", u)], urls
    assert "../_static/reveal.js/dist/reveal.js" in urls and "../_static/mathjax/tex-chtml.js" in urls
    assert "show_kernel_diff(" not in html, "code cells show their outputs only"
    assert "```diff" not in html and "naive_normalize -&gt; shifted_normalize" in html


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_each_lesson_has_a_summary_for_its_deck_to_end_with(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    found = [h for c in nb.cells if c.cell_type == "markdown" for h in make_slides.headings(c.source)]
    closing = found[-2:] if found[-1].lower().startswith("exercise") else found[-1:]
    assert closing[0].lower().startswith("summary"), f"{path.name} ends with {found[-2:]}, not a Summary"


def test_the_instructor_page_links_every_deck():
    page = (ROOT / "book" / "instructor" / "slides.md").read_text()
    linked = re.findall(r'href="\.\./\.\./slides/([^"]+)\.html"', page)
    assert linked == [p.stem for p in LESSONS]


def test_a_table_with_absolute_values_in_its_math_stays_a_table(tmp_path: Path):
    path = tmp_path / "99_table.ipynb"
    nbformat.write(new_notebook(cells=[new_markdown_cell(
        "# 99 · Table\n\n| step | engine |\n|---|---|\n| $|x|$ | Scalar |\n| $1 + p\\,|x|$ | Vector |")]), path)
    html = make_slides.deck(path)
    assert "<table" in html and "|---|" not in html
    assert html.count("<tr") == 3
