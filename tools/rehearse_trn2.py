"""`make rehearse-trn2`: the trn2 hardware path, rehearsed on the CPU (README, "On a Trainium2 instance").

With NKISIM_REHEARSE_TRN2=1 (nkisim/trn2_rehearsal.py) and NEURON_LOGICAL_NC_CONFIG=1 (README step 3),
executes every lesson, solution and book notebook, outputs not written back, and
benchmarks/hardware_validation.py at LNC 1 and at LNC 2; two jobs at a time. Cells tagged
`raises-exception` may fail, as under nbval; any other error fails the rehearsal, which lists every
failure at the end.

Usage: python tools/rehearse_trn2.py [NOTEBOOK ...]     (default: all of them)
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK_DIRS = ("notebooks", "solutions", "book")
JOBS = 2
REHEARSAL_ENV = {"NKISIM_REHEARSE_TRN2": "1", "NEURON_LOGICAL_NC_CONFIG": "1"}


def notebooks() -> list[Path]:
    found = []
    for folder in NOTEBOOK_DIRS:
        found += sorted(p for p in (ROOT / folder).rglob("*.ipynb")
                        if "_build" not in p.parts and ".ipynb_checkpoints" not in p.parts)
    return found


def execute_notebook(path: Path) -> None:
    """Execute one notebook in memory, in its own folder (the job run in a child process)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()


def jobs(selected: list[Path], with_benchmark: bool) -> list[tuple[str, list[str], dict[str, str]]]:
    here = [sys.executable, str(Path(__file__).resolve()), "--one"]
    found = [(str(p.relative_to(ROOT)), here + [str(p)], {}) for p in selected]
    if with_benchmark:
        script = [sys.executable, str(ROOT / "benchmarks" / "hardware_validation.py")]
        for lnc in ("1", "2"):
            out = Path(os.environ.get("TMPDIR", "/tmp")) / f"rehearsal-validation-lnc{lnc}.md"
            found.append((f"benchmarks/hardware_validation.py at LNC={lnc}", script + ["--out", str(out)],
                          {"NEURON_LOGICAL_NC_CONFIG": lnc}))
    return found


def run_job(job: tuple[str, list[str], dict[str, str]]) -> tuple[str, float, str | None]:
    label, command, extra = job
    env = {**os.environ, **REHEARSAL_ENV, **extra}
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    failure = None if done.returncode == 0 else (done.stdout[-3000:] + done.stderr[-6000:]).strip()
    return label, time.perf_counter() - start, failure


def main(argv: list[str]) -> int:
    if argv[:1] == ["--one"]:
        execute_notebook(Path(argv[1]))
        return 0
    selected = [Path(a).resolve() for a in argv] or notebooks()
    failures = []
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        for label, seconds, failure in pool.map(run_job, jobs(selected, with_benchmark=not argv)):
            print(f"{seconds:6.1f} s  {'FAIL' if failure else 'ok  '}  {label}", flush=True)
            if failure:
                failures.append((label, failure))
    for label, failure in failures:
        print(f"\n=== {label} failed in the trn2 rehearsal ===\n{failure}")
    print(f"\ntrn2 rehearsal: {len(failures)} failure(s)" if failures else "\ntrn2 rehearsal: everything ran")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
