"""The book's executed notebooks: which are stale, executing those, and reusing nbval's runs.

    python tools/book_outputs.py [--status]      (`make book` runs it before Jupyter Book)

Jupyter Book 1.x keeps executed notebooks in a jupyter-cache (book/_build/.jupyter_cache) keyed
on a notebook's code cells alone, so a change to the code a notebook imports would leave its old
outputs in the book. Here each cache record also lists the notebook's dependencies: the sha256 of
the content of every repository file whose module its kernel had imported when its last cell
finished (kernels/, nkisim/, notebooks/lesson_kernels/, exercises/, benchmarks/, ... as used),
plus environment.yml. A book notebook is stale when the cache has no record of its current code
cells, or when a recorded file's content differs from the file now (or the file is gone). A
change of content counts; a `touch` alone does not.

Without arguments: executes the stale notebooks of book/_toc.yml, two at a time, each in its own
folder on the default backend, and records them. --status only lists each notebook's state.
As a Sphinx extension (book/_config.yml) it drops a record whose dependencies changed before the
build reads its notebook, and makes an incremental build re-read a page whose record changed.
As a pytest plugin (the root conftest.py) it records each notebook that nbval ran with every cell
passing, so a `make book` after `make test` executes nothing that nbval already ran.
"""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path("book") / "_build" / ".jupyter_cache"   # where myst-nb looks: the HTML outdir's ../.jupyter_cache
ALWAYS_TRACKED = ("environment.yml",)   # the installed packages, which no module path inside the repo names
JOBS = 2
TIMEOUT_S = 600   # per cell, as book/_config.yml's execute.timeout
# Run in the notebook's kernel after its last cell: the repository files of every imported module.
PROBE = ("import json as _j, sys as _s\n"
         "print(_j.dumps(sorted({getattr(_m, '__file__', None) or '' for _m in list(_s.modules.values())})))")


def book_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks of book/_toc.yml, in its order."""
    found: list[Path] = []

    def visit(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("file"), str) and (root / f"{node['file']}.ipynb").is_file():
                found.append(root / f"{node['file']}.ipynb")
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(yaml.safe_load((root / "book" / "_toc.yml").read_text()))
    return found


def file_hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dependencies(module_files: list[str], root: Path = ROOT) -> dict[str, str]:
    """Repository path -> content hash, for the imported files inside `root` (not its .venv) and
    ALWAYS_TRACKED."""
    venv = root / ".venv"
    paths = {root / name for name in ALWAYS_TRACKED if (root / name).is_file()}
    for name in module_files:
        path = Path(name).resolve() if name else None
        if path and path.is_file() and root in path.parents and venv not in path.parents:
            paths.add(path)
    return {str(p.relative_to(root)): file_hash(p) for p in sorted(paths)}


def changed_dependencies(recorded: dict[str, str], root: Path = ROOT) -> list[str]:
    """The recorded files whose content is not what it was (or that are gone)."""
    return [name for name, digest in recorded.items()
            if not (root / name).is_file() or file_hash(root / name) != digest]


def cache(root: Path = ROOT):
    from jupyter_cache import get_cache

    return get_cache(str(root / CACHE))


def record_of(jcache, path: Path):
    """The cache record of this notebook's current code cells, or None."""
    try:
        return jcache.match_cache_notebook(nbformat.read(path, as_version=4))
    except KeyError:
        return None


def stale_reason(jcache, path: Path, root: Path = ROOT) -> str | None:
    """Why this notebook's cached outputs cannot be shown as they are, or None when they can."""
    record = record_of(jcache, path)
    if record is None:
        return "no outputs of its current code cells"
    recorded = record.data.get("dependencies")
    if recorded is None:
        return "its outputs were made without a dependency record"
    changed = changed_dependencies(recorded, root)
    if changed:
        return "changed since its outputs were made: " + ", ".join(changed[:4]) + (" ..." if len(changed) > 4 else "")
    return None


def store(jcache, path: Path, executed: nbformat.NotebookNode, module_files: list[str], seconds: float,
          root: Path = ROOT, how: str = "") -> None:
    """Cache one executed notebook with its dependencies."""
    from jupyter_cache.base import CacheBundleIn

    data = {"execution_seconds": seconds, "dependencies": dependencies(module_files, root), "executed_by": how}
    jcache.cache_notebook_bundle(CacheBundleIn(nb=executed, uri=str(path), data=data), overwrite=True)


def default_backend_env() -> dict[str, str]:
    """The environment of a book execution: the default backend, never the trn2 rehearsal."""
    return {k: v for k, v in os.environ.items() if k != "NKISIM_REHEARSE_TRN2"}


def execute_with_probe(path: Path, timeout: int = TIMEOUT_S) -> tuple[nbformat.NotebookNode, list[str], float]:
    """Execute a notebook in its own folder; return it (without the probe), its modules' files, seconds."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))
    start = time.perf_counter()
    # record_timing off: per-cell timing metadata would change the cache key (code cells and their metadata)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    seconds = time.perf_counter() - start
    probe = nb.cells.pop()
    files = json.loads("".join(o.get("text", "") for o in probe.outputs if o.get("name") == "stdout"))
    return nb, files, seconds


def _execute_in_child(path: Path, root: Path) -> tuple[Path, float, str | None]:
    """Execute one notebook in a child process (one kernel each) and cache it here."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "executed.json"
        done = subprocess.run([sys.executable, __file__, "--execute-one", str(path), str(out)],
                              capture_output=True, text=True, env=default_backend_env(), cwd=root)
        if done.returncode != 0:
            return path, 0.0, (done.stdout[-2000:] + done.stderr[-6000:]).strip()
        result = json.loads(out.read_text())
    store(cache(root), path, nbformat.from_dict(result["nb"]), result["files"],
          result["seconds"], root, how="tools/book_outputs.py")
    return path, result["seconds"], None


def refresh(root: Path = ROOT, jobs: int = JOBS) -> int:
    """Execute and record every stale book notebook; 1 if any failed."""
    jcache = cache(root)
    notebooks = book_notebooks(root)
    stale = [p for p in notebooks if stale_reason(jcache, p, root)]
    print(f"book outputs: {len(notebooks) - len(stale)} of {len(notebooks)} notebooks up to date, "
          f"executing {len(stale)} ({jobs} at a time)", flush=True)
    failures = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for path, seconds, failure in pool.map(lambda p: _execute_in_child(p, root), stale):
            print(f"{seconds:6.1f} s  {'FAIL' if failure else 'ok  '}  {path.relative_to(root)}", flush=True)
            if failure:
                failures.append((path, failure))
    for path, failure in failures:
        print(f"\n=== {path.relative_to(root)} failed ===\n{failure}")
    return 1 if failures else 0


def status(root: Path = ROOT) -> int:
    jcache = cache(root)
    for path in book_notebooks(root):
        print(f"{stale_reason(jcache, path, root) or 'up to date':<60}  {path.relative_to(root)}")
    return 0


# ---- Sphinx extension -------------------------------------------------------------------------

def _notebook_docs(app) -> dict[str, Path]:
    return {doc: Path(app.env.doc2path(doc)) for doc in app.env.found_docs
            if str(app.env.doc2path(doc)).endswith(".ipynb")}


def _drop_stale_records(app) -> None:
    """Before reading: a record whose dependencies changed must not be shown, so myst-nb executes
    that notebook again. (Its record then has no dependency list, which the next `make book`
    completes by executing it once more; a bare jupyter-book build keeps it until then.)"""
    root = Path(app.srcdir)
    jcache = cache(root)
    for path in book_notebooks(root):
        record = record_of(jcache, path)
        if record is not None and changed_dependencies(record.data.get("dependencies", {}), root):
            jcache.remove_cache(record.pk)


def _outdated(app, env, added, changed, removed) -> list[str]:
    """Pages whose cache record is not the one they were last read with (an incremental build)."""
    jcache, read_with = cache(Path(app.srcdir)), getattr(env, "book_output_records", {})
    out = []
    for doc, path in _notebook_docs(app).items():
        record = record_of(jcache, path) if path.is_file() else None
        if doc in read_with and read_with[doc] != (record.pk if record else None):
            out.append(doc)
    return out


def _note_record(app, doctree) -> None:
    path = Path(app.env.doc2path(app.env.docname))
    if path.suffix == ".ipynb":
        record = record_of(cache(Path(app.srcdir)), path)
        app.env.book_output_records = {**getattr(app.env, "book_output_records", {}),
                                       app.env.docname: record.pk if record else None}


def setup(app) -> dict[str, Any]:
    app.connect("builder-inited", _drop_stale_records)
    app.connect("env-get-outdated", _outdated)
    app.connect("doctree-read", _note_record)
    return {"parallel_read_safe": False, "env_version": 1}


# ---- pytest plugin: nbval's runs as book outputs -------------------------------------------------

class NbvalRecorder:
    """Caches each notebook of the book that nbval ran with every cell passing (outputs as nbval got
    them, the dependencies probed in its kernel before nbval stops it)."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.book = {p.resolve() for p in book_notebooks(root)}
        self.cells: dict[str, list] = {}

    def pytest_runtest_makereport(self, item, call) -> None:
        if call.when == "call" and hasattr(item, "test_outputs") and Path(str(item.fspath)).resolve() in self.book:
            passed = call.excinfo is None and item.test_outputs is not None
            self.cells.setdefault(item.parent.nodeid, []).append((item, passed, call.duration))

    @pytest.hookimpl(tryfirst=True)   # before the notebook's own teardown stops its kernel
    def pytest_runtest_teardown(self, item, nextitem) -> None:
        if not hasattr(item, "test_outputs") or (nextitem is not None and nextitem.parent is item.parent):
            return
        runs = self.cells.pop(item.parent.nodeid, [])
        code_cells = [c for c in item.parent.nb.cells if c.cell_type == "code"]
        if len(runs) != len(code_cells) or not all(passed for _, passed, _ in runs) or "NKISIM_REHEARSE_TRN2" in os.environ:
            return
        files = _probe_nbval_kernel(item.parent.kernel)
        if files is None:
            return
        nb = nbformat.read(str(item.fspath), as_version=4)
        for count, (cell, (run, _, _)) in enumerate(zip((c for c in nb.cells if c.cell_type == "code"), runs), start=1):
            cell.execution_count = count
            cell.outputs = [_as_output(o, count) for o in run.test_outputs]
        try:
            store(cache(self.root), Path(str(item.fspath)).resolve(), nb, files, sum(r[2] for r in runs), self.root,
                  how="nbval (make test)")
        except Exception as e:   # only a saving for the book, which then executes this notebook itself
            print(f"\nbook_outputs: nbval's run of {item.fspath} not recorded: {e}", file=sys.stderr)


def _as_output(out: Any, count: int) -> nbformat.NotebookNode:
    out = nbformat.from_dict(dict(out))
    if out.output_type == "execute_result":
        out.execution_count = count
    return out


def _probe_nbval_kernel(kernel) -> list[str] | None:
    """Run PROBE in nbval's kernel; None if it does not answer."""
    from queue import Empty

    try:
        msg_id = kernel.execute_cell_input(PROBE, allow_stdin=False)
        kernel.await_reply(msg_id, timeout=60)
        text = []
        while True:
            msg = kernel.get_message("iopub", timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream" and msg["content"]["name"] == "stdout":
                text.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                return None
            elif msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                return json.loads("".join(text))
    except (Empty, RuntimeError, ValueError):
        return None


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(__doc__.strip())
        return 0
    if argv[:1] == ["--execute-one"]:
        nb, files, seconds = execute_with_probe(Path(argv[1]))
        Path(argv[2]).write_text(json.dumps({"nb": nb, "files": files, "seconds": seconds}))
        return 0
    if argv == ["--status"]:
        return status()
    if argv:
        print(f"unknown arguments {argv}; usage: python tools/book_outputs.py [--status]", file=sys.stderr)
        return 2
    return refresh()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
