"""nbval honours a marker comment only when the comment is the marker alone (`# NBVAL_IGNORE_OUTPUT`):
any text after it on the line turns it into a plain comment, and the cell's outputs are then compared
byte for byte. Catch that here, not in CI on another machine."""
from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(
    p for folder in ("notebooks", "exercises", "solutions", "book") for p in (ROOT / folder).rglob("*.ipynb")
    if ".ipynb_checkpoints" not in p.parts and "_build" not in p.parts
)
MARKER_LINE = re.compile(r"^\s*#.*\bNBVAL_[A-Z_]+")
EXACT_MARKER = re.compile(r"^\s*#\s*NBVAL_[A-Z_]+\s*$")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nbval_markers_stand_alone(path: Path) -> None:
    bad = [
        line.strip()
        for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
        for line in cell.source.splitlines()
        if MARKER_LINE.match(line) and not EXACT_MARKER.match(line)
    ]
    assert not bad, f"{path.name}: nbval ignores these markers (text after the marker): {bad}"
