"""Slides for instructor-led sessions, one reveal.js deck per lesson notebook, built offline.

A deck follows the lesson's headings: the title and every `## ` heading start a slide and every
`### ` heading (a step inside a section) a slide below it, wherever the heading stands in a
markdown cell. What follows a heading, up to the next one, goes on its slide: the rest of the
cell, the next markdown cells and the outputs of the code cells (not their code). An output that
carries a step (a figure, a table, a kernel diff, a long printout) gets a slide of its own below
the section's: one per figure, and a printout or a diff longer than a slide is cut into pages. Each slide is shrunk to fit its 1280x720 page when its content is
taller or wider (slides_template/fit_slides.js), so nothing is cut.

The decks are written next to the built book (book/_build/html/slides/NN_name.html) and load
reveal.js and MathJax from the book's own static folder (vendored from npm by `make book`), so they
work offline like the book.

Usage (from the repository root):
    python tools/make_slides.py              # write the decks (after the book is built)
    python tools/make_slides.py --out DIR    # write them to DIR (they still expect ../_static/)
"""
from __future__ import annotations

import argparse
import copy
import posixpath
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
SITE = ROOT / "book" / "_build" / "html"
STATIC = "../_static"  # the book's static folder, seen from slides/
TEMPLATE = ROOT / "tools" / "slides_template"
SLIDE_SIZE = (1280, 720)  # reveal.js scales this 16:9 page to the screen
# A section heading, and a step heading inside a section (lesson 17's `### `).
SLIDE_HEADING = re.compile(r"## (?!#)")
STEP_HEADING = re.compile(r"### (?!#)")
FENCE = re.compile(r"\s*(```|~~~)")
RICH_OUTPUTS = ("image/png", "image/svg+xml", "image/jpeg", "text/html", "text/markdown")
MAX_INLINE_LINES = 8  # a longer printout gets a slide of its own, and no figure beside it
PAGE_LINES = 28  # printed lines that fit one slide at a readable size


def lesson_notebooks() -> list[Path]:
    return sorted(p for p in LESSONS.glob("[0-9][0-9]_*.ipynb") if not p.stem.startswith("00"))


def _outside_code(markdown: str) -> Iterator[tuple[str, bool]]:
    """Each line of a markdown text (with its newline) and whether it is prose, outside a code fence."""
    fenced = False
    for line in markdown.splitlines(keepends=True):
        if FENCE.match(line):
            fenced = not fenced
            yield line, False
        else:
            yield line, not fenced


def split_at_headings(markdown: str) -> list[str]:
    """A markdown cell's text cut before every `## ` and `### ` heading line outside code fences."""
    pieces: list[list[str]] = [[]]
    for line, prose in _outside_code(markdown):
        if prose and (SLIDE_HEADING.match(line) or STEP_HEADING.match(line)) and pieces[-1]:
            pieces.append([])
        pieces[-1].append(line)
    return [text for text in ("".join(p).strip("\n") for p in pieces) if text.strip()]


def _table_math(markdown: str) -> str:
    """`|` inside `$...$` in a table row written `\\vert`: nbconvert's markdown reader would take it for a
    cell border and show the whole table as text (the book's MyST reader does not)."""
    return "".join(re.sub(r"\$[^$\n]+\$", lambda m: m.group(0).replace("|", r"\vert "), line)
                   if line.lstrip().startswith("|") else line for line in markdown.splitlines(keepends=True))


def headings(markdown: str) -> list[str]:
    """The `#`, `##` and `###` heading lines of a markdown text (outside code fences), without the #s."""
    return [line.lstrip("#").strip() for line, prose in _outside_code(markdown) if prose and re.match(r"#{1,3} ", line)]


def _markdown_slide_type(piece: str) -> str:
    if SLIDE_HEADING.match(piece):
        return "slide"
    return "subslide" if STEP_HEADING.match(piece) else "-"


def _is_rich(output: nbformat.NotebookNode) -> bool:
    return any(kind in output.get("data", {}) for kind in RICH_OUTPUTS)


def _text_lines(outputs: list[nbformat.NotebookNode]) -> int:
    text = "".join("".join(o.get("text", "")) + "".join(o.get("data", {}).get("text/plain", "")) for o in outputs)
    return len(text.splitlines())


def _markdown_pages(markdown: str) -> list[str]:
    """A markdown text (a kernel diff) cut every PAGE_LINES lines; a code block cut in two is closed
    at the end of one page and opened again at the top of the next."""
    pages, page, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        if len(page) >= PAGE_LINES:
            pages.append("".join(page) + (f"{FENCE.match(fence).group(1)}\n" if fence else ""))
            page = [fence] if fence else []
        page.append(line)
        if FENCE.match(line):
            fence = None if fence else line
    return pages + ["".join(page)]


def _pages(output: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """A printout or a markdown output longer than a slide cut into slide-sized pages; any other
    output as it is."""
    if output.output_type == "stream" and _text_lines([output]) > PAGE_LINES:
        lines = "".join(output.text).splitlines(keepends=True)
        return [nbformat.v4.new_output("stream", name=output.name, text="".join(lines[i:i + PAGE_LINES]))
                for i in range(0, len(lines), PAGE_LINES)]
    markdown = "".join(output.get("data", {}).get("text/markdown", ""))
    if markdown.count("\n") >= PAGE_LINES:
        return [nbformat.v4.new_output("display_data", data={"text/markdown": page})
                for page in _markdown_pages(markdown)]
    return [output]


def _split_outputs(outputs: list[nbformat.NotebookNode]) -> list[list[nbformat.NotebookNode]]:
    """A code cell's outputs in slide-sized groups: at most one figure or table each, next to a short
    printout only, and at most PAGE_LINES printed lines."""
    groups: list[list[nbformat.NotebookNode]] = [[]]
    for output in (page for o in outputs for page in _pages(o)):
        group = groups[-1]
        rich = _is_rich(output) or any(_is_rich(o) for o in group)
        crowded = (_is_rich(output) and any(_is_rich(o) for o in group)
                   or rich and _text_lines(group + [output]) > MAX_INLINE_LINES
                   or _text_lines(group + [output]) > PAGE_LINES)
        if group and crowded:
            groups.append([])
        groups[-1].append(output)
    return groups


def _part(cell: nbformat.NotebookNode, number: int, slide_type: str, **content: object) -> nbformat.NotebookNode:
    """Piece `number` of a cell (its attachments, pasted images, come along) with its own id."""
    part = copy.deepcopy(cell)
    part.update(content)
    part.metadata["slideshow"] = {"slide_type": slide_type}
    if "id" in part:
        part.id = f"{cell.id}-{number}"
    return part


def slide_cells(nb: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """The notebook's cells as they go on slides, each with its `slideshow.slide_type`: markdown cut at
    its headings, code cells as their outputs (a cell without outputs is left out)."""
    cells = []
    for index, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            for number, piece in enumerate(split_at_headings(cell.source)):
                kind = "slide" if index == 0 and number == 0 else _markdown_slide_type(piece)
                cells.append(_part(cell, number, kind, source=_table_math(piece)))
        elif cell.cell_type == "code" and cell.get("outputs"):
            for number, outputs in enumerate(_split_outputs(cell.outputs)):
                # a group after the first was cut off because it did not fit beside the one before
                own_slide = number > 0 or any(_is_rich(o) for o in outputs) or _text_lines(outputs) > MAX_INLINE_LINES
                cells.append(_part(cell, number, "subslide" if own_slide else "-", outputs=outputs))
    return cells


def deck(path: Path) -> str:
    """The reveal.js HTML of one lesson."""
    from nbconvert import SlidesExporter

    nb = nbformat.read(path, as_version=4)
    nb.cells = slide_cells(nb)
    exporter = SlidesExporter(extra_template_paths=[str(TEMPLATE)], template_file="workshop_slides.html.j2",
                              exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.reveal_url_prefix = f"{STATIC}/reveal.js"
    exporter.reveal_theme = "white"  # its fonts ship with reveal.js; "simple" loads Google Fonts
    exporter.reveal_width, exporter.reveal_height = (str(n) for n in SLIDE_SIZE)
    html, _ = exporter.from_notebook_node(nb, resources={"static_prefix": STATIC})
    html = re.sub(r'<a class="anchor-link" href="[^"]*">.*?</a>', "", html)  # heading permalinks: no use on a slide
    return re.sub(r'href="([^"#:]+)\.(?:ipynb|md)(#[^"]*)?"', lambda m: f'href="{_site_link(path, m)}"', html)


def _site_link(path: Path, match: re.Match) -> str:
    """A notebook's link to another page of the book, as seen from slides/ (page.ipynb -> page.html)."""
    target = posixpath.normpath(posixpath.join(path.parent.relative_to(ROOT).as_posix(), match.group(1)))
    return f"../{target}.html{match.group(2) or ''}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the decks (default: slides/ of the built book, which must exist)")
    args = parser.parse_args(argv)
    out = args.out
    if out is None:
        if not (SITE / "index.html").is_file():
            raise SystemExit(f"no built book in {SITE}: run `make book` (it writes the slides too), or give --out")
        out = SITE / "slides"
    out.mkdir(parents=True, exist_ok=True)
    for path in lesson_notebooks():
        (out / f"{path.stem}.html").write_text(deck(path), encoding="utf-8")
    print(f"{out}: {len(lesson_notebooks())} decks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
