"""A public repository's files, from a clone, a mirror or a plain tree: for tools that run its code outside this one."""
from __future__ import annotations

import contextlib
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def tree_of(location: str) -> Iterator[tuple[Path, str]]:
    """(a directory holding the repository's files, its commit) for PATH or PATH@COMMIT."""
    path, _, commit = location.partition("@")
    git = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
    if git.returncode == 0:
        with tempfile.TemporaryDirectory() as tmp:
            archive = subprocess.run(["git", "-C", path, "archive", "HEAD"], capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
            yield Path(tmp), git.stdout.strip()
        return
    if not commit:
        raise SystemExit(f"{path} is not a git repository: give its commit as {path}@COMMIT")
    yield Path(path), commit
