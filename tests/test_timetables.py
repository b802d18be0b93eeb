"""One source for the workshop's times and one table of exercises and lessons: the landing page's
table of times, the agendas' self-paced total and README's table of exercises are what
tools/make_timetables.py generates from each lesson's and exercise's own time and the agendas'
rows, and every agenda row of a lesson gives it at least the time its notebook announces."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import make_exercises  # noqa: E402
import make_timetables  # noqa: E402

AGENDAS = make_timetables.agenda_rows()
LESSONS = make_timetables.lesson_minutes()


@pytest.mark.parametrize("path", make_timetables.FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_generated_block_is_current(path):
    assert path.read_text() == make_timetables.generated(path), (
        f"{path.relative_to(ROOT)}: a generated block differs from its sources: run `make timetables`")


def test_every_lesson_states_its_time():
    assert sorted(LESSONS) == list(range(1, 18))


@pytest.mark.parametrize("title", sorted(AGENDAS))
def test_agenda_rows_give_each_lesson_its_time(title):
    short = [(what, length, LESSONS[int(m.group(1))]) for _, length, what in AGENDAS[title]
             if (m := make_timetables.ROW_LESSON.match(what)) and length < LESSONS[int(m.group(1))]]
    assert not short, f"{title}: rows shorter than their lesson's own time (row, minutes, lesson's time): {short}"


@pytest.mark.parametrize("title", sorted(AGENDAS))
def test_every_agenda_row_belongs_to_a_part(title):
    """A lesson or exercise row that does not start with its number would count as welcome time."""
    misfiled = [what for _, _, what in AGENDAS[title]
                if make_timetables.row_part(what) == make_timetables.OTHER_ROWS
                and any(word in what for word in ("Lesson", "Exercise", "exercises/", "Capstone"))]
    assert not misfiled, f"{title}: rows that name a lesson or exercise but not at their start: {misfiled}"


def test_the_landing_page_totals_are_the_agendas_teaching_time():
    table = make_timetables.time_table().splitlines()[-1]
    for title in (make_timetables.SHORT_AGENDA, make_timetables.FULL_DAY):
        teaching = sum(length for _, length, what in AGENDAS[title] if not what.startswith(make_timetables.PAUSES))
        assert f"**{make_timetables.duration(teaching)}**" in table, (title, table)


def test_readme_and_book_show_one_table_of_exercises():
    book = make_exercises.book_table(make_exercises.sources())
    readme = make_exercises.book_table(make_exercises.sources(), links_from="")
    assert book.replace("](../../", "](") == readme
    assert readme in (ROOT / "README.md").read_text() and book in make_exercises.BOOK_INDEX.read_text()


@pytest.mark.parametrize(("minutes", "text"), [(45, "45 min"), (60, "1 h"), (125, "2 h 5 min"), (0, "0 min")])
def test_duration(minutes, text):
    assert make_timetables.duration(minutes) == text


def test_a_lesson_without_a_time_is_named(tmp_path, monkeypatch):
    cell = {"cell_type": "markdown", "metadata": {}, "source": ["# 03 · A lesson\n", "No time here.\n"]}
    (tmp_path / "03_lesson.ipynb").write_text(json.dumps({"cells": [cell]}))
    monkeypatch.setattr(make_timetables, "NOTEBOOKS", tmp_path)
    monkeypatch.setattr(make_timetables, "ROOT", tmp_path)
    with pytest.raises(SystemExit, match="03_lesson.ipynb: its first markdown cell states no time"):
        make_timetables.lesson_minutes()


def test_a_missing_marker_is_named(tmp_path):
    with pytest.raises(SystemExit, match="needs exactly one <!-- time-table-start -->"):
        make_timetables.replace_block("no markers", "time-table", "body", make_timetables.INTRO)
