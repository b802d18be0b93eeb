"""Re-execute stored notebooks in place so their outputs match the current code.

Usage: python tools/execute_notebooks.py [NOTEBOOK_OR_DIR ...]
Without arguments: every notebook under notebooks/, exercises/, solutions/ and book/.
Cells tagged `raises-exception` may fail (exercise stubs); any other error stops the run.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIRS = ("notebooks", "exercises", "solutions", "book")


def notebooks_in(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*.ipynb") if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts)
        else:
            found.append(path)
    return found


def execute_in_place(path: Path, timeout: int = 600) -> float:
    """Execute one notebook with its own folder as working directory; return seconds taken."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # coalesce_streams: consecutive prints are stored as one output, not one box per flush.
    NotebookClient(nb, timeout=timeout, kernel_name="python3", coalesce_streams=True,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    targets = [Path(a) for a in argv] or [ROOT / d for d in DEFAULT_DIRS]
    for nb_path in notebooks_in(targets):
        seconds = execute_in_place(nb_path)
        print(f"{seconds:6.1f} s  {nb_path.relative_to(ROOT) if nb_path.is_absolute() else nb_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
