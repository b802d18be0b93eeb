"""tools/book_outputs.py: when the book re-executes a notebook (README, "Commands").

Each test builds a one-notebook book in a temporary folder whose notebook imports a module beside
it, and runs a real kernel: the rule is about what a kernel imported, not about a mock of it.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book_outputs  # noqa: E402


def _tiny_book(root: Path) -> Path:
    (root / "book").mkdir()
    (root / "book" / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: lessons/one\n")
    (root / "environment.yml").write_text("name: tiny\n")
    (root / "lessons").mkdir()
    (root / "lessons" / "helper.py").write_text("VALUE = 1\n")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# One"),
                                         nbformat.v4.new_code_cell("import helper\nprint(helper.VALUE * 10)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = root / "lessons" / "one.ipynb"
    nbformat.write(nb, path)
    return path


def _refresh(root: Path) -> str:
    done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT / 'tools')!r}); "
                           f"import book_outputs; from pathlib import Path; sys.exit(book_outputs.refresh(Path({str(root)!r})))"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_dependency_whose_content_changes_makes_the_notebook_stale(tmp_path: Path) -> None:
    nb = _tiny_book(tmp_path)
    helper = tmp_path / "lessons" / "helper.py"
    assert book_outputs.book_notebooks(tmp_path) == [nb]
    assert book_outputs.stale_reason(book_outputs.cache(tmp_path), nb, tmp_path) == "no outputs of its current code cells"

    assert "executing 1 " in _refresh(tmp_path)
    jcache = book_outputs.cache(tmp_path)
    record = book_outputs.record_of(jcache, nb)
    assert set(record.data["dependencies"]) == {"environment.yml", "lessons/helper.py"}
    merged = jcache.merge_match_into_notebook(nbformat.read(nb, as_version=4))[1]
    assert merged.cells[1].outputs[0]["text"] == "10\n"
    assert book_outputs.stale_reason(jcache, nb, tmp_path) is None
    assert "executing 0 " in _refresh(tmp_path)

    os.utime(helper)   # a touch is not a change of content
    assert book_outputs.stale_reason(jcache, nb, tmp_path) is None
    helper.write_text("VALUE = 2\n")
    assert book_outputs.stale_reason(jcache, nb, tmp_path) == "changed since its outputs were made: lessons/helper.py"
    assert "executing 1 " in _refresh(tmp_path)
    merged = jcache.merge_match_into_notebook(nbformat.read(nb, as_version=4))[1]
    assert merged.cells[1].outputs[0]["text"] == "20\n"

    (tmp_path / "environment.yml").write_text("name: tiny\ndependencies: [numpy]\n")
    assert "environment.yml" in book_outputs.stale_reason(jcache, nb, tmp_path)
    helper.unlink()
    assert "lessons/helper.py" in book_outputs.stale_reason(jcache, nb, tmp_path)


def test_a_changed_code_cell_has_no_outputs_yet_but_a_changed_markdown_cell_keeps_them(tmp_path: Path) -> None:
    nb_path = _tiny_book(tmp_path)
    _refresh(tmp_path)
    jcache = book_outputs.cache(tmp_path)
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells[0].source = "# One, reworded"
    nbformat.write(nb, nb_path)
    assert book_outputs.stale_reason(jcache, nb_path, tmp_path) is None
    nb.cells[1].source += "\nprint('more')"
    nbformat.write(nb, nb_path)
    assert book_outputs.stale_reason(jcache, nb_path, tmp_path) == "no outputs of its current code cells"


@pytest.mark.parametrize("cell, recorded", [("print(1)", True), ("print(2)", False)])
def test_nbval_records_a_notebook_only_when_every_cell_passed(tmp_path: Path, cell: str, recorded: bool) -> None:
    nb_path = _tiny_book(tmp_path)
    nb = nbformat.read(nb_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("print(1)", execution_count=2,
                                              outputs=[nbformat.v4.new_output("stream", text="1\n")]))
    nb.cells[1].execution_count = 1
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", text="10\n")]
    nb.cells[2].source = cell    # print(2) differs from the stored "1": nbval fails that cell
    nbformat.write(nb, nb_path)
    (tmp_path / "conftest.py").write_text(
        f"import sys\nfrom pathlib import Path\nsys.path.insert(0, {str(ROOT / 'tools')!r})\nimport book_outputs\n"
        "def pytest_configure(config):\n"
        "    config.pluginmanager.register(book_outputs.NbvalRecorder(Path(__file__).parent))\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
                           "-q", str(nb_path)], capture_output=True, text=True, cwd=tmp_path)
    assert (done.returncode == 0) == recorded, done.stdout
    record = book_outputs.record_of(book_outputs.cache(tmp_path), nb_path)
    if not recorded:
        assert record is None
        return
    assert record.data["executed_by"] == "nbval (make test)"
    assert book_outputs.stale_reason(book_outputs.cache(tmp_path), nb_path, tmp_path) is None
    assert "lessons/helper.py" in record.data["dependencies"]


def test_the_book_build_runs_the_extension_and_reads_outputs_from_the_cache() -> None:
    from jupyter_book.config import get_final_config

    config, _ = get_final_config(user_yaml=ROOT / "book" / "_config.yml", sourcedir=ROOT,
                                 cli_config={"latex_individualpages": False})
    assert "book_outputs" in config["extensions"]
    assert config["nb_execution_mode"] == "cache"


def test_an_incremental_build_rebuilds_the_page_of_a_notebook_whose_import_changed(tmp_path: Path) -> None:
    """The Sphinx side (make book's jupyter-book build): a stale record is dropped, so the page is
    read again and myst-nb executes the notebook; with nothing changed, nothing is executed."""
    _tiny_book(tmp_path)
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "book" / "_config.yml").write_text(
        "title: tiny\nonly_build_toc_files: true\nexclude_patterns: [\"book/_build/*\"]\n"
        "execute:\n  execute_notebooks: cache\n"
        f"sphinx:\n  local_extensions:\n    book_outputs: {ROOT / 'tools'}\n")
    page = tmp_path / "book" / "_build" / "html" / "lessons" / "one.html"

    def build() -> str:
        done = subprocess.run([str(Path(sys.executable).with_name("jupyter-book")), "build", ".", "--config",
                               "book/_config.yml", "--toc", "book/_toc.yml", "--path-output", "book", "-W", "-n"],
                              capture_output=True, text=True, cwd=tmp_path)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        return done.stdout + done.stderr   # Sphinx logs to both

    _refresh(tmp_path)
    assert "Executing notebook" not in build() and ">10" in page.read_text()
    (tmp_path / "lessons" / "helper.py").write_text("VALUE = 3\n")
    assert "Executing notebook" in build() and ">30" in page.read_text()    # a bare jupyter-book build
    assert "executing 1 " in _refresh(tmp_path)   # make book: that run has no dependency list yet
    assert "Executing notebook" not in build() and ">30" in page.read_text()
    assert "executing 0 " in _refresh(tmp_path) and "Executing notebook" not in build()
