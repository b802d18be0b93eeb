"""Lessons are numbered one way everywhere: the title of notebooks/NN_*.ipynb starts with "NN ·"
(as the book's sidebar shows it), and the prose refers to lessons, not to a track's own "steps"."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

LESSONS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TRACK_STEP = re.compile(r"\b[Ss]teps? [1-8]\b")


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_title_carries_the_lesson_number(path: Path) -> None:
    title = nbformat.read(path, as_version=4).cells[0].source.splitlines()[0]
    assert title.startswith(f"# {path.stem[:2]} · "), f"{path.name}: title {title!r} should start with '# {path.stem[:2]} · '"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_prose_names_lessons_not_steps(path: Path) -> None:
    cells = nbformat.read(path, as_version=4).cells
    found = [m.group(0) for c in cells if c.cell_type == "markdown" for m in TRACK_STEP.finditer(c.source)]
    assert not found, f"{path.name}: refers to {found}; say 'lesson NN' (the numbers of the sidebar)"


@pytest.mark.parametrize("path", [p for p in LESSONS if not p.stem.startswith("00")], ids=lambda p: p.stem)
def test_lesson_says_what_to_watch_for(path: Path) -> None:  # 00 is the setup check, not a lesson
    assert "**Watch for:**" in nbformat.read(path, as_version=4).cells[0].source, path.name


EXERCISE_SOURCES = sorted((Path(__file__).resolve().parents[2] / "exercises" / "src").glob("[0-9][0-9]_*.py"))
LESSON_LINK = re.compile(r"\[([^\]]+)\]\(\.\./notebooks/(\d\d)_[^)]+\.ipynb\)")


@pytest.mark.parametrize("path", EXERCISE_SOURCES, ids=lambda p: p.stem)
def test_exercise_names_its_lessons_as_the_sidebar_does(path: Path) -> None:
    header = next(line for line in path.read_text().splitlines() if "**Lesson" in line)
    links = LESSON_LINK.findall(header)
    assert links, f"{path.name}: no lesson link in {header!r}"
    for text, number in links:
        assert text.startswith(f"{number} · "), f"{path.name}: lesson link {text!r} should start with '{number} · '"
