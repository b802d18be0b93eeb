"""The workshop's times and its exercise-to-lesson table, each generated from the one place it is stated.

Sources:
- a lesson's time: "about N minutes" in the first markdown cell of notebooks/NN_*.ipynb;
- an exercise's time and lesson(s): the title cell of exercises/src/NN_*.py (tools/make_exercises.py);
- the minutes a workshop gives each part: the rows of the agendas in book/instructor/agendas.md.

Generated blocks, between `<!-- NAME-start -->` and `<!-- NAME-end -->`:
- book/intro.md `time-table`: per part, the self-paced time (its lessons' and exercises' times) and
  the minutes each agenda gives it (the sum of its rows);
- book/instructor/agendas.md `self-paced`: the same self-paced times;
- README.md `exercise-table`: the table of exercises and their lessons, the one book/exercises/index.md
  shows (both written by make_exercises.book_table).

Usage (from the repository root):
    python tools/make_timetables.py            # rewrite the blocks
    python tools/make_timetables.py --check    # exit 1 if a committed block differs
tests/test_timetables.py runs the same comparison, and checks that every agenda row of a lesson or an
exercise gives it at least its own time.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_exercises  # noqa: E402  (a sibling script, not a package)

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
INTRO = ROOT / "book" / "intro.md"
AGENDAS = ROOT / "book" / "instructor" / "agendas.md"
README = ROOT / "README.md"

LESSON_TIME = re.compile(r"about (\d+) minutes")
AGENDA_ROW = re.compile(r"^\| (\d+):(\d\d) \| (\d+) \| (.+?) \|")
ROW_LESSON = re.compile(r"^Lesson (\d\d)\b")
ROW_EXERCISE = re.compile(r"^Exercise (\d\d)\b")
PAUSES = ("Break", "Lunch")
SHORT_AGENDA, FULL_DAY = "3 hours: the GELU track", "Full day: both tracks and the capstone"
NEURONCORE_ROW = "A NeuronCore for kernel writers"
# The setup check and the NeuronCore chapter state no time of their own: the landing page's estimates.
SETUP_MINUTES, NEURONCORE_MINUTES = 15, 25


@dataclass(frozen=True)
class Part:
    """A part of the workshop: its label, its lessons, and whether agenda rows of other kinds belong to it."""
    label: str
    lessons: tuple[int, ...] = ()
    self_paced: int | None = None   # minutes, for a part without lessons
    agenda_row: str | None = None   # an agenda row's text that belongs to this part
    before_the_day: bool = False    # done before a workshop, in no agenda


PARTS = (
    Part("Setup and the setup check", self_paced=SETUP_MINUTES, before_the_day=True),
    Part(NEURONCORE_ROW, self_paced=NEURONCORE_MINUTES, agenda_row=NEURONCORE_ROW),
    Part("Track 1: GELU (lessons 01-07 and their exercises)", lessons=tuple(range(1, 8))),
    Part("Track 2: LayerNorm fold (lessons 08-16 and their exercises)", lessons=tuple(range(8, 17))),
    Part("Capstone: both kernels in a small ViT (lesson 17)", lessons=(17,)),
)
OTHER_ROWS = "Welcome, setup check passes, wrap-up"


def lesson_minutes() -> dict[int, int]:
    """Lesson number -> the minutes its first markdown cell announces ("about N minutes")."""
    minutes = {}
    for path in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb")):
        number = int(path.name[:2])
        if number == 0:
            continue  # the setup check: SETUP_MINUTES
        first = next(c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "markdown")
        found = LESSON_TIME.search("".join(first["source"]))
        if found is None:
            raise SystemExit(f"{path.relative_to(ROOT)}: its first markdown cell states no time "
                             f"(a lesson says 'about N minutes' there)")
        minutes[number] = int(found.group(1))
    return minutes


@cache  # the sources do not change during a run; every table reads them
def exercises() -> dict[int, tuple[int, tuple[int, ...]]]:
    """Exercise number -> (its minutes, the numbers of the lessons it belongs to)."""
    out = {}
    for path in make_exercises.sources():
        h = make_exercises.header(path)
        out[int(path.stem[:2])] = (int(h["minutes"]), tuple(int(name[:2]) for name in h["lesson_files"]))
    return out


def agenda_rows() -> dict[str, list[tuple[int, int, str]]]:
    """Agenda title -> its rows as (start minute, length, what)."""
    sections: dict[str, list[tuple[int, int, str]]] = {}
    title = None
    for line in AGENDAS.read_text().splitlines():
        if line.startswith("## "):
            title = line[3:]
        elif (match := AGENDA_ROW.match(line)) and title is not None:
            hours, minutes, length, what = match.groups()
            sections.setdefault(title, []).append((int(hours) * 60 + int(minutes), int(length), what))
    return sections


def row_part(what: str) -> str | None:
    """The label of the part an agenda row belongs to; None for a break or lunch."""
    if what.startswith(PAUSES):
        return None
    lesson = ROW_LESSON.match(what)
    exercise = ROW_EXERCISE.match(what)
    number = int(lesson.group(1)) if lesson else exercises()[int(exercise.group(1))][1][0] if exercise else None
    for part in PARTS:
        if (number is not None and number in part.lessons) or (part.agenda_row and what.startswith(part.agenda_row)):
            return part.label
    return OTHER_ROWS


def duration(minutes: int) -> str:
    """125 -> '2 h 5 min', 120 -> '2 h', 45 -> '45 min'."""
    hours, rest = divmod(minutes, 60)
    return " ".join(([f"{hours} h"] if hours else []) + ([f"{rest} min"] if rest or not hours else []))


def self_paced() -> dict[str, int]:
    """Part label -> self-paced minutes: its lessons' times plus their exercises' times."""
    lessons, exs = lesson_minutes(), exercises()
    out = {}
    for part in PARTS:
        if part.self_paced is not None:
            out[part.label] = part.self_paced
            continue
        exercise_minutes = sum(m for m, owners in exs.values() if owners[0] in part.lessons)
        out[part.label] = sum(lessons[n] for n in part.lessons) + exercise_minutes
    return out


def agenda_minutes(rows: list[tuple[int, int, str]]) -> dict[str, int]:
    """Part label (and OTHER_ROWS) -> the minutes an agenda's rows give it."""
    out: dict[str, int] = {}
    for _, length, what in rows:
        if (label := row_part(what)) is not None:
            out[label] = out.get(label, 0) + length
    return out


def time_table() -> str:
    """The landing page's table: each part self-paced and in each agenda."""
    paced = self_paced()
    agendas = agenda_rows()
    short, full = agenda_minutes(agendas[SHORT_AGENDA]), agenda_minutes(agendas[FULL_DAY])

    def cell(minutes: dict[str, int], label: str, before_the_day: bool = False) -> str:
        if before_the_day:
            return "before the day"
        return duration(minutes[label]) if label in minutes else "not in this agenda"

    rows = ["| part | self-paced | 3-hour workshop | full-day workshop |", "|---|---|---|---|"]
    for part in PARTS:
        label, early = part.label, part.before_the_day
        rows.append(f"| {label} | {duration(paced[label])} | {cell(short, label, early)} "
                    f"| {cell(full, label, early)} |")
    rows.append(f"| {OTHER_ROWS} | | {cell(short, OTHER_ROWS)} | {cell(full, OTHER_ROWS)} |")
    rows.append(f"| **total** (breaks and lunch not counted) | **{duration(sum(paced.values()))}** "
                f"| **{duration(sum(short.values()))}** | **{duration(sum(full.values()))}** |")
    return "\n".join(rows)


def self_paced_text() -> str:
    """The agendas' self-paced list."""
    paced = self_paced()
    lines = [f"- {part.label}: {duration(paced[part.label])}" for part in PARTS]
    return "\n".join([f"{duration(sum(paced.values()))} in total, each part the sum of its lessons' and "
                      "exercises' own times (the landing page's table shows the same):", ""] + lines)


def replace_block(text: str, name: str, body: str, where: Path) -> str:
    """`text` with the block between `<!-- name-start -->` and `<!-- name-end -->` replaced by `body`."""
    start, end = f"<!-- {name}-start -->", f"<!-- {name}-end -->"
    if text.count(start) != 1 or text.count(end) != 1:
        raise SystemExit(f"{where.relative_to(ROOT)}: needs exactly one {start} and one {end}")
    before, rest = text.split(start)
    _, after = rest.split(end)
    return f"{before}{start}\n{body}\n{end}{after}"


def readme_exercise_table() -> str:
    """The table of exercises of book/exercises/index.md, its links from the repository root."""
    return make_exercises.book_table(make_exercises.sources(), links_from="")


BLOCKS = ((INTRO, "time-table", time_table), (AGENDAS, "self-paced", self_paced_text),
          (README, "exercise-table", readme_exercise_table))
FILES = tuple(path for path, _, _ in BLOCKS)


def generated(path: Path) -> str:
    """One file of FILES with its generated blocks regenerated."""
    text = path.read_text()
    for block_path, name, body in BLOCKS:
        if block_path == path:
            text = replace_block(text, name, body(), path)
    return text


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a block differs")
    args = parser.parse_args(argv)
    texts = {path: generated(path) for path in FILES}
    stale = [path for path, text in texts.items() if path.read_text() != text]
    for path in stale:
        if args.check:
            print(f"{path.relative_to(ROOT)}: generated block differs (run python tools/make_timetables.py)")
        else:
            path.write_text(texts[path])
            print(f"{path.relative_to(ROOT)}: rewritten")
    return 1 if args.check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
