"""The committed exercise and solution notebooks (and the book's table) match their annotated
sources: same cells, same code and prose, same tags. Outputs are not compared (nbval re-runs
the notebooks); errors stored in them are: only stubs may fail, only in tagged cells."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

import exercise_loader as support

gen = support.gen
SOURCES = gen.sources()
RAISES = gen.RAISES


def cells(nb: nbformat.NotebookNode) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source, [t for t in c.get("metadata", {}).get("tags", []) if t != RAISES])
            for c in nb.cells]


def committed(folder: Path, path: Path) -> nbformat.NotebookNode:
    target = folder / f"{path.stem}.ipynb"
    assert target.exists(), f"{target.relative_to(gen.ROOT)} missing: run `make exercises`"
    return nbformat.read(target, as_version=4)


def errors(cell: nbformat.NotebookNode) -> list[str]:
    return [o.get("ename") for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def test_at_least_one_exercise_per_lesson_step():
    assert len(SOURCES) >= 14
    lessons = {target for p in SOURCES for target in gen.header(p)["lesson_files"]}
    assert len(lessons) >= 14, sorted(lessons)


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_exercise_notebook_in_sync(path):
    nb = committed(gen.EXERCISE_DIR, path)
    assert cells(nb) == cells(gen.build_exercise(path)), (
        f"exercises/{path.stem}.ipynb differs from {path.name}: run `make exercises`")
    assert not any(gen.BEGIN in c.source for c in nb.cells), "a solution marker leaked into the exercise"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_solution_notebook_in_sync(path):
    nb = committed(gen.SOLUTION_DIR, path)
    assert cells(nb) == cells(gen.build_solution(path)), (
        f"solutions/{path.stem}.ipynb differs from {path.name}: run `make exercises`")
    failed = [c.id for c in nb.cells if errors(c)]
    assert not failed, f"solution cells stored with errors: {failed}"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_exercise_fails_only_at_its_stubs(path):
    """Tagged cells stopped with NotImplementedError; untagged cells did not fail."""
    nb = committed(gen.EXERCISE_DIR, path)
    tagged = [c for c in nb.cells if RAISES in c.get("metadata", {}).get("tags", [])]
    assert tagged, "no cell reaches a stub"
    for cell in nb.cells:
        expected = ["NotImplementedError"] if cell in tagged else []
        assert errors(cell) == expected, f"cell {cell.id}: stored errors {errors(cell)}, expected {expected}"


def test_stub_replaces_each_region():
    code = "def f(x):\n    y = 1\n    ### BEGIN SOLUTION\n    return x + y\n    ### END SOLUTION\n"
    assert gen.stub_code(code, "07") == (
        "def f(x):\n    y = 1\n    raise NotImplementedError(\"Exercise 07: write this part (see the statement above)\")")
    assert gen.solution_code(code) == "def f(x):\n    y = 1\n    return x + y"
    with pytest.raises(ValueError, match="without"):
        gen.solution_code("### BEGIN SOLUTION\nx = 1\n")


def test_book_table_in_sync():
    assert gen.BOOK_INDEX.read_text() == gen.book_index_text(SOURCES), (
        "book/exercises/index.md's table differs from the sources: run `make exercises`")


def test_book_lists_every_solution():
    toc = (gen.ROOT / "book" / "_toc.yml").read_text()
    missing = [p.stem for p in SOURCES if f"solutions/{p.stem}" not in toc]
    assert not missing, f"book/_toc.yml lacks solutions {missing}"


def test_reset_gives_a_fresh_copy_and_keeps_every_learner_version(tmp_path, monkeypatch):
    path = support.source_path("12")
    monkeypatch.setattr(gen, "EXERCISE_DIR", tmp_path)
    learner = tmp_path / f"{path.stem}.ipynb"
    learner.write_text('{"learner": "first attempt"}')
    gen.reset(path)
    assert (tmp_path / f"{path.stem}.ipynb.bak1").read_text() == '{"learner": "first attempt"}'
    assert cells(nbformat.read(learner, as_version=4)) == cells(gen.build_exercise(path))
    learner.write_text('{"learner": "second attempt"}')
    gen.reset(path)
    assert (tmp_path / f"{path.stem}.ipynb.bak1").read_text() == '{"learner": "first attempt"}'
    assert (tmp_path / f"{path.stem}.ipynb.bak2").read_text() == '{"learner": "second attempt"}'


@pytest.mark.parametrize("number", ["4", "04", "04_gelu_tiles"])
def test_an_exercise_is_found_with_or_without_its_leading_zero(number):
    assert [p.stem for p in gen.sources([number])] == ["04_gelu_tiles"]


def test_an_unknown_exercise_number_is_named():
    with pytest.raises(SystemExit, match="99"):
        gen.sources(["99"])
