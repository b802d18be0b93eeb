"""The instructor agendas add up: each row starts when the previous one ends, every exercise gets
at least the time its statement announces, and the stated lengths and totals match the rows."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import make_timetables  # noqa: E402  (reads the agendas' rows and the exercises' times)

AGENDAS = make_timetables.AGENDAS
PAUSES = make_timetables.PAUSES
SECTIONS = make_timetables.agenda_rows()
EXERCISE_MINUTES = {number: minutes for number, (minutes, _) in make_timetables.exercises().items()}


def test_both_timed_agendas_are_found():
    assert set(SECTIONS) == {"3 hours: the GELU track", "Full day: both tracks and the capstone"}


@pytest.mark.parametrize("title", sorted(SECTIONS))
def test_rows_follow_each_other(title):
    rows = SECTIONS[title]
    for (start, length, what), (next_start, _, next_what) in zip(rows, rows[1:]):
        assert start + length == next_start, f"{what!r} ends at {start + length}, {next_what!r} starts at {next_start}"


@pytest.mark.parametrize("title", sorted(SECTIONS))
def test_exercises_get_the_time_their_statement_announces(title):
    for _, length, what in SECTIONS[title]:
        if match := re.search(r"`exercises/(\d\d)_", what):
            assert length >= EXERCISE_MINUTES[int(match.group(1))], f"{title}: {what} gets {length} min"


def test_the_short_agenda_lasts_three_hours():
    start, length, _ = SECTIONS["3 hours: the GELU track"][-1]
    assert start + length == 180


def test_the_full_day_totals_are_the_rows_sums():
    rows = SECTIONS["Full day: both tracks and the capstone"]
    teaching = sum(length for _, length, what in rows if not what.startswith(PAUSES))
    door_to_door = rows[-1][0] + rows[-1][1] - rows[0][0]
    text = AGENDAS.read_text()
    stated = re.search(r"Total teaching time (\d+) h (\d+) min .* \((\d+) h (\d+) min door to door\)", text)
    hours, minutes, door_hours, door_minutes = map(int, stated.groups())
    assert (teaching, door_to_door) == (hours * 60 + minutes, door_hours * 60 + door_minutes)
