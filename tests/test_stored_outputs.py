"""No stored notebook output shows a machine path (a developer's checkout, home directory, venv or
site-packages): every notebook of notebooks/, exercises/, solutions/ and book/, every output."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("notebooks", "exercises", "solutions", "book")
MACHINE_PATH = re.compile(r"/work/|/root/|/home/|/Users/|/tmp/|/opt/|\S/\.venv/|site-packages|dist-packages|\b[A-Z]:\\\w")
NOTEBOOKS = sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.ipynb")
                   if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts)


def output_text(output: nbformat.NotebookNode) -> str:
    """Everything an output shows as text: streams, tracebacks, text/plain, HTML and other text data."""
    parts = [output.get("text", ""), "\n".join(output.get("traceback", [])), output.get("evalue", "")]
    for mime, value in output.get("data", {}).items():
        if mime.startswith("text/") or mime.endswith(("json", "javascript")):
            parts.append(value if isinstance(value, str) else str(value))
    return "\n".join(parts)


def machine_paths(nb: nbformat.NotebookNode) -> list[str]:
    """'cell 3 (id ...): ...the line...' for each output line that shows a machine path."""
    found = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            for line in output_text(output).splitlines():
                if MACHINE_PATH.search(line):
                    found.append(f"cell {index} (id {cell.get('id', '?')}): {line.strip()[:160]}")
    return found


def test_every_notebook_folder_is_scanned():
    assert {p.relative_to(ROOT).parts[0] for p in NOTEBOOKS} == set(FOLDERS)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_stored_output_shows_a_machine_path(path):
    found = machine_paths(nbformat.read(path, as_version=4))
    assert not found, f"{path.relative_to(ROOT)} shows machine paths:\n" + "\n".join(found[:10])


def test_the_scan_finds_a_path_in_a_traceback_and_names_the_cell():
    cell = nbformat.v4.new_code_cell("1/0", id="c-1")
    cell.outputs = [nbformat.v4.new_output("error", ename="E", evalue="", traceback=[
        "File /home/someone/repo/.venv/lib/python3.11/site-packages/x.py:3"])]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("x"), cell])
    assert machine_paths(nb) == ["cell 1 (id c-1): File /home/someone/repo/.venv/lib/python3.11/site-packages/x.py:3"]
