"""The track table (notebooks/lesson_kernels/tracks.py, benchmarks/track_table.py): every lesson step of
both tracks moves its metric by at least 3%, or its lesson says in its first paragraph what kind of
step it is (a baseline, an enabling or correctness step, which the table names what it enables, or
a variant with no change by design), and every lesson of a track renders the table up to itself."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "notebooks"), str(ROOT / "benchmarks")]

import nkisim  # noqa: E402

nkisim.install()

from lesson_kernels import tracks  # noqa: E402
from nkisim.profile.steps import CHANGE, MIN_EFFECT_PERCENT, NO_CHANGE_BY_DESIGN  # noqa: E402

LESSONS = {int(p.stem[:2]): p for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")}


@pytest.fixture(scope="module")
def measured() -> dict:
    return {name: tracks.results(name) for name in tracks.TRACKS}


def _rows(measured):
    return [(name, r) for name, (_, rows) in measured.items() for r in rows]


def first_paragraph(lesson: int) -> str:
    return nbformat.read(LESSONS[lesson], as_version=4).cells[0].source


def test_every_change_moves_its_metric(measured) -> None:
    still = [f"{name} lesson {r.step.lesson} '{r.step.change}': {r.effect_percent:+.1f}% on {r.step.metric.name}"
             for name, r in _rows(measured) if r.step.kind == CHANGE and not r.moves]
    assert not still, (f"steps whose effect is below {MIN_EFFECT_PERCENT}% of their metric (make the effect visible, "
                       "or declare the step in its lesson's first paragraph and in tracks.py): " + "; ".join(still))


def test_every_other_kind_is_declared_in_its_lessons_first_paragraph(measured) -> None:
    missing = [f"lesson {r.step.lesson} '{r.step.change}' ({r.step.kind})" for _, r in _rows(measured)
               if r.step.kind != CHANGE and r.step.kind not in first_paragraph(r.step.lesson)]
    assert not missing, "the lesson's first cell does not say so: " + "; ".join(missing)


def test_no_change_by_design_variants_stay_within_the_band(measured) -> None:
    moved = [f"lesson {r.step.lesson} '{r.step.change}': {r.effect_percent:+.1f}%" for _, r in _rows(measured)
             if r.step.kind == NO_CHANGE_BY_DESIGN and r.moves]
    assert not moved, "a variant shown as making no difference moved its metric: " + "; ".join(moved)


def test_every_lesson_of_a_track_has_a_step_and_renders_the_table(measured) -> None:
    for name, (track, rows) in measured.items():
        lessons = sorted({r.step.lesson for r in rows})
        assert lessons == list(range(lessons[0], lessons[-1] + 1)), f"{name}: a lesson without a step in {lessons}"
        for lesson in lessons:
            code = "\n".join(c.source for c in nbformat.read(LESSONS[lesson], as_version=4).cells
                             if c.cell_type == "code")
            assert f'tracks.show_track("{name}", {lesson})' in code, f"{LESSONS[lesson].name} does not render its track"


def test_the_benchmark_prints_the_table_as_json(capsys) -> None:
    import track_table

    assert track_table.main(["--json", "--track", "gelu"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["min_effect_percent"] == MIN_EFFECT_PERCENT
    (track,) = doc["tracks"]
    assert track["name"] == "gelu" and track["steps"]
    for step in track["steps"]:
        assert {"lesson", "change", "kernel", "kind", "metric", "before", "after", "effect_percent", "bound_before",
                "bound_after", "source"} <= set(step)
    lnc2 = next(s for s in track["steps"] if "LNC=2" in s["change"])
    assert lnc2["kind"] == CHANGE and lnc2["after"] < lnc2["before"]
