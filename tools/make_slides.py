"""Slides for instructor-led sessions, one reveal.js deck per lesson notebook, built offline.

What goes on a slide is marked in the notebook, with Jupyter's own cell metadata
`slideshow.slide_type` ("slide", "subslide", "fragment", "-"): a cell without it is left out. Code
cells show their outputs only (a diff, a table, a chart), not their code. `--mark` sets that
metadata the default way: the title and every "## " section start a slide, and the cells that show a
kernel diff, the fold track's table or a profile view start a sub-slide.

The decks are written next to the built book (book/_build/html/slides/NN_name.html) and load
reveal.js and MathJax from the book's own static folder (vendored from npm by `make book`), so they
work offline like the book.

Usage (from the repository root):
    python tools/make_slides.py            # write the decks (after the book is built)
    python tools/make_slides.py --mark     # mark the lesson notebooks' slide cells (then commit them)
"""
from __future__ import annotations

import argparse
import copy
import posixpath
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
LESSONS = ROOT / "notebooks"
OUT = ROOT / "book" / "_build" / "html" / "slides"
STATIC = "../_static"  # the book's static folder, seen from slides/
SHOWS = ("show_kernel_diff(", "show_track(", "show_timeline(", "show_comparison(", "show_roofline(")
TEMPLATE = ROOT / "tools" / "slides_template"


def lesson_notebooks() -> list[Path]:
    return sorted(p for p in LESSONS.glob("[0-9][0-9]_*.ipynb") if not p.stem.startswith("00"))


def default_slide_type(cell: nbformat.NotebookNode, index: int) -> str | None:
    if index == 0 or (cell.cell_type == "markdown" and cell.source.startswith("## ")):
        return "slide"
    if cell.cell_type == "code" and any(call in cell.source for call in SHOWS):
        return "subslide"
    return None


def mark(path: Path) -> int:
    """Set slideshow.slide_type on the cells that go on slides; return how many cells changed."""
    nb = nbformat.read(path, as_version=4)
    changed = 0
    for index, cell in enumerate(nb.cells):
        kind = default_slide_type(cell, index)
        current = cell.metadata.get("slideshow", {}).get("slide_type")
        if kind is not None and current is None:
            cell.metadata["slideshow"] = {"slide_type": kind}
            changed += 1
    if changed:
        nbformat.write(nb, path)
    return changed


def deck(path: Path) -> str:
    """The reveal.js HTML of one lesson: its marked cells, code cells as outputs only."""
    from nbconvert import SlidesExporter

    nb = copy.deepcopy(nbformat.read(path, as_version=4))
    for cell in nb.cells:
        if "slide_type" not in cell.metadata.get("slideshow", {}):
            cell.metadata["slideshow"] = {"slide_type": "skip"}
    exporter = SlidesExporter(extra_template_paths=[str(TEMPLATE)], template_file="workshop_slides.html.j2",
                              exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True)
    exporter.reveal_url_prefix = f"{STATIC}/reveal.js"
    exporter.reveal_scroll = True
    exporter.reveal_theme = "white"  # its fonts ship with reveal.js; "simple" loads Google Fonts
    html, _ = exporter.from_notebook_node(nb, resources={"static_prefix": STATIC})
    html = re.sub(r'<a class="anchor-link" href="[^"]*">.*?</a>', "", html)  # heading permalinks: no use on a slide
    return re.sub(r'href="([^"#:]+)\.(?:ipynb|md)(#[^"]*)?"', lambda m: f'href="{_site_link(path, m)}"', html)


def _site_link(path: Path, match: re.Match) -> str:
    """A notebook's link to another page of the book, as seen from slides/ (page.ipynb -> page.html)."""
    target = posixpath.normpath(posixpath.join(path.parent.relative_to(ROOT).as_posix(), match.group(1)))
    return f"../{target}.html{match.group(2) or ''}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mark", action="store_true", help="mark the slide cells of the lesson notebooks")
    args = parser.parse_args(argv)
    if args.mark:
        for path in lesson_notebooks():
            print(f"{path.relative_to(ROOT)}: {mark(path)} cells marked")
        return 0
    if not (OUT.parent / "index.html").is_file():
        raise SystemExit(f"no built book in {OUT.parent}: run `make book` (it writes the slides too)")
    OUT.mkdir(exist_ok=True)
    for path in lesson_notebooks():
        (OUT / f"{path.stem}.html").write_text(deck(path), encoding="utf-8")
    print(f"{OUT.relative_to(ROOT)}: {len(lesson_notebooks())} decks")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
