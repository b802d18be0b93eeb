"""The committed exercise and solution notebooks (and the book's table) match their annotated
sources: same cells, same code and prose, same tags. Outputs are not compared (nbval re-runs
the notebooks); errors stored in them are: only stubs may fail, only in tagged cells."""
from __future__ import annotations

import re
import shutil
import subprocess
import sys
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
    """Tagged cells stopped at a stub (NotImplementedError, or the checkers' StubReached); untagged
    cells did not fail."""
    nb = committed(gen.EXERCISE_DIR, path)
    tagged = [c for c in nb.cells if RAISES in c.get("metadata", {}).get("tags", [])]
    assert tagged, "no cell reaches a stub"
    for cell in nb.cells:
        found = errors(cell)
        if cell in tagged:
            assert len(found) == 1 and found[0] in gen.STUB_ERRORS, f"cell {cell.id}: stored errors {found}"
        else:
            assert found == [], f"cell {cell.id}: stored errors {found}, expected none"


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.stem)
def test_a_stub_reached_by_the_check_shows_a_short_message(path):
    """The check cell of a fresh exercise shows the stub's message and what to do, in a few lines:
    no traceback through the checker or the emulator."""
    nb = committed(gen.EXERCISE_DIR, path)
    (check,) = [c for c in nb.cells if c.source.lstrip().startswith("checkers.check_")]
    (error,) = [o for o in check.outputs if o.output_type == "error"]
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(error.traceback))
    assert error.ename == "StubReached" and len(text.splitlines()) <= 4, text
    assert f"Exercise {path.stem[:2]}: write this part" in text and "replace it with your code" in text
    assert "Traceback" not in text and "File " not in text, text


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


def _git(repo: Path, *args: str) -> str:
    out = subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
                         capture_output=True, text=True, check=True)
    return out.stdout


def test_reset_leaves_a_clean_git_status_apart_from_the_backup(tmp_path):
    """make reset-exercise in a git checkout: the fresh notebook is the committed one, byte for byte
    (no re-execution, whose outputs and metadata differ), and the backup is ignored by git."""
    path = support.source_path("04")
    files = ["tools/make_exercises.py", ".gitignore", f"exercises/src/{path.name}", f"exercises/{path.stem}.ipynb"]
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(gen.ROOT / name, tmp_path / name)
    _git(tmp_path, "init", "--quiet")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "--quiet", "-m", "the workshop")
    learner = tmp_path / "exercises" / f"{path.stem}.ipynb"
    learner.write_text('{"learner": "an attempt"}')
    subprocess.run([sys.executable, "tools/make_exercises.py", "--reset", "4"], cwd=tmp_path, check=True,
                   capture_output=True, timeout=120)
    assert _git(tmp_path, "status", "--porcelain") == ""
    assert learner.read_bytes() == (gen.ROOT / files[-1]).read_bytes()
    assert (tmp_path / "exercises" / f"{path.stem}.ipynb.bak1").read_text() == '{"learner": "an attempt"}'


@pytest.mark.parametrize("number", ["4", "04", "04_gelu_tiles"])
def test_an_exercise_is_found_with_or_without_its_leading_zero(number):
    assert [p.stem for p in gen.sources([number])] == ["04_gelu_tiles"]


def test_an_unknown_exercise_number_is_named():
    with pytest.raises(SystemExit, match="99"):
        gen.sources(["99"])
