"""`make rehearse-trn2`: the trn2 hardware path, rehearsed on the CPU (README, "On a Trainium2 instance").

With NKISIM_REHEARSE_TRN2=1 (nkisim/trn2_rehearsal.py) and NEURON_LOGICAL_NC_CONFIG=1 (README step 3),
executes every lesson, solution and book notebook, outputs not written back, and
benchmarks/hardware_validation.py (LNC 1 and 2 in one run); two jobs at a time. Each job rehearses on
an instance of its own (NKISIM_REHEARSAL_INSTANCE, a fresh folder holding its NeuronCores, NEFF cache
and aws-neuronx-tools), as one learner runs one notebook at a time on one trn2; inside a job the
documented runtime rules hold (nkisim/rehearsal_runtime.py): a process cannot take NeuronCores another
holds, NEFFs live where TorchNeuron puts them, a profile needs the inspect variables before the
runtime starts. Cells tagged `raises-exception` may fail, as under nbval; any other error fails the
rehearsal, which lists every failure at the end.

Usage: python tools/rehearse_trn2.py [NOTEBOOK ...]     (default: all of them)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
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


def jobs(selected: list[Path], with_benchmark: bool) -> list[tuple[str, list[str]]]:
    here = [sys.executable, str(Path(__file__).resolve()), "--one"]
    found = [(str(p.relative_to(ROOT)), here + [str(p)]) for p in selected]
    if with_benchmark:   # one run covers LNC=1 and LNC=2: each launch and profile has a process of its own
        out = Path(os.environ.get("TMPDIR", "/tmp")) / "rehearsal-validation.md"
        found.append(("benchmarks/hardware_validation.py",
                      [sys.executable, str(ROOT / "benchmarks" / "hardware_validation.py"), "--out", str(out)]))
    return found


def run_job(job: tuple[str, list[str]]) -> tuple[str, float, str | None]:
    label, command = job
    instance = tempfile.mkdtemp(prefix="nkisim-trn2-instance-")
    # The job's NEFF cache and temporary files (profile captures) are the instance's: none outlives its job.
    env = {**os.environ, **REHEARSAL_ENV, "NKISIM_REHEARSAL_INSTANCE": instance, "TMPDIR": instance,
           "TORCH_NEURONX_NEFF_CACHE_DIR": os.path.join(instance, "neff-cache")}
    start = time.perf_counter()
    try:
        done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(instance, ignore_errors=True)
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
