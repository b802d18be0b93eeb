"""Run nki-library's own integration tests in their CPU-simulation mode, with nkisim as the simulator.

    python tools/nkilib_simulation.py --checkout PATH[@COMMIT] [--per-function N] [--match TEXT]
        [--jobs J] [--timeout S] [--json FILE]

nki-library's test harness has a mode, `--test-mode simulation` (test/utils/simulation_setup.py), that aliases
`nki` to a simulator package named `nki_cpu_simulator`, runs each kernel as
`nki.cpu_simulate(kernel)[lnc](**inputs)` and checks its outputs with the test's own golden reference and
comparator. This tool runs that harness, its tests and its kernels unmodified, from a copy of the checkout
outside this repository, with nkisim serving as that package (tools/nkilib_simulation_shim/):
1. a virtual environment under build/nkilib-simulation/ gets the checkout's declared test dependencies that the
   project lacks (network access to PyPI, the first time) and sees the project's packages ahead of its own (a
   .pth), so nkisim runs on the project's numpy and torch;
2. it collects the tests marked `fast` (the library's manual vectors), but not those marked `trace_only`
   (they compile through neuronx-cc's front end, `nki.compiler.frontend`, and run no kernel), and keeps, per
   test function, the N whose parameters are smallest (the sum of the logs of the numbers in the test id)
   among those the harness does not skip in simulation mode (it skips large shapes); a function whose every
   vector is skipped is reported as skipped, with the harness's reason;
3. it runs each in its own process, with a time limit and a memory limit, and reports passed, failed (with
   the first error line), skipped and timed out.
An acceptance check, not part of the test suite: it needs a repository this one does not ship.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
import tomllib
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

from checkouts import tree_of  # noqa: E402  (tools/)

SHIM = ROOT / "tools" / "nkilib_simulation_shim"
WORK = ROOT / "build" / "nkilib-simulation"
PLUGIN = "nkilib_simulation_plugin"
COLLECTION = "NKILIB_SIMULATION_COLLECTION"     # the plugin writes the collected tests there
PYTEST = ["-m", "pytest", "-p", "no:cacheprovider", "-p", PLUGIN, "--test-mode", "simulation"]
# pytest under an address-space limit, so a test that outgrows it fails with a MemoryError of its own instead of
# meeting the machine's OOM killer (argv: the limit in bytes, then pytest's arguments)
LIMITED_PYTEST = ("import resource, runpy, sys; n = int(sys.argv.pop(1)); "
                  "resource.setrlimit(resource.RLIMIT_AS, (n, n)); sys.argv[0] = 'pytest'; "
                  "runpy.run_module('pytest', run_name='__main__', alter_sys=True)")
ERROR_LINE = re.compile(r"^E\s+(.*?(?:Error|Exception|Exit)\b.*)$")


@dataclass
class Outcome:
    test: str
    result: str        # passed | failed | skipped | timeout
    seconds: float
    reason: str        # the first error line of a failure, the skip reason of a skip


def environment(tree: Path, work: Path) -> Path:
    """The environment's python: layered on this project's, plus the checkout's missing test dependencies."""
    venv = work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    # the project's packages go first, so that a dependency pip also installed here (numpy, ...) is the project's
    first = [sysconfig.get_paths()["purelib"], str(ROOT), str(SHIM), str(tree / "src")]
    (Path(site) / "nkilib_simulation.pth").write_text(
        f"import sys; sys.path[:0] = {first!r}; import nkisim.active_backend; nkisim.active_backend.install()\n")
    missing = missing_requirements(tree / "pyproject.toml")
    if missing:
        pip = subprocess.run([str(python), "-m", "pip", "install", "-q", *missing], capture_output=True, text=True)
        if pip.returncode:
            raise SystemExit(f"installing {' '.join(missing)} failed:\n{pip.stderr[-3000:]}")
    return python


def missing_requirements(pyproject: Path) -> list[str]:
    """The checkout's `test` extras that this project's environment does not have."""
    declared = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]["test"]
    missing = []
    for requirement in dict.fromkeys(declared):
        name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0]
        try:
            importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            missing.append(requirement)
    return missing


def collect(python: Path, tree: Path) -> dict[str, str | None]:
    """Every test to consider, with the reason the harness skips it, or None."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = Path(tmp) / "collected.json"
        out = subprocess.run([str(python), *PYTEST, "-m", "fast and not trace_only", "--collect-only", "-q",
                              "integration"], cwd=tree / "test", capture_output=True, text=True,
                             env={**os.environ, COLLECTION: str(listing)})
        tests = json.loads(listing.read_text()) if listing.exists() else {}
    if not tests:
        raise SystemExit(f"collected no tests (exit {out.returncode}):\n{out.stdout[-3000:]}{out.stderr[-3000:]}")
    return tests


def size(test: str) -> float:
    """How large a test's parameters are: the sum of log(1 + n) over the numbers in its id's brackets."""
    params = test.partition("[")[2]
    return sum(math.log1p(int(n)) for n in re.findall(r"(?<![A-Za-z])\d+", params))


def select(tests: dict[str, str | None], per_function: int, match: str = "") -> list[str]:
    """Per test function whose id contains `match`: its `per_function` smallest parametrisations that the
    harness runs, or its smallest one if it skips them all."""
    by_function: dict[str, list[str]] = defaultdict(list)
    for test in tests:
        if match in test:
            by_function[test.partition("[")[0]].append(test)
    chosen = []
    for group in by_function.values():
        runnable = sorted((t for t in group if tests[t] is None), key=size)
        chosen += runnable[:per_function] or [min(group, key=size)]
    return chosen


def outcome_of(test: str, returncode: int, output: str, seconds: float) -> Outcome:
    """Read one test's pytest run (-rA): its result and, for a failure or skip, why."""
    if returncode == 0 and re.search(r"\b1 passed\b", output):
        return Outcome(test, "passed", seconds, "")
    skipped = re.search(r"^SKIPPED \[\d+\] [^:]+:\d+: (.*)$", output, re.M)
    if returncode == 0 and skipped:
        return Outcome(test, "skipped", seconds, skipped.group(1).strip())
    if returncode < 0:
        return Outcome(test, "failed", seconds, f"killed by signal {-returncode}")
    errors = [m.group(1).strip() for m in map(ERROR_LINE.match, output.splitlines()) if m]
    lines = [line for line in output.splitlines() if line.strip()]
    return Outcome(test, "failed", seconds, errors[0] if errors else (lines[-1] if lines else f"exit {returncode}"))


def run_one(python: Path, tree: Path, test: str, timeout: float, memory_gib: float) -> Outcome:
    command = [str(python), "-c", LIMITED_PYTEST, str(int(memory_gib * 2 ** 30)), *PYTEST[2:], "-q", "-rA", test]
    start = time.monotonic()
    try:
        out = subprocess.run(command, cwd=tree / "test", capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return Outcome(test, "timeout", time.monotonic() - start, f"over {timeout:.0f} s")
    return outcome_of(test, out.returncode, out.stdout + out.stderr, time.monotonic() - start)


def report(outcomes: list[Outcome]) -> str:
    counts = Counter(o.result for o in outcomes)
    lines = [", ".join(f"{counts[r]} {r}" for r in ("passed", "failed", "skipped", "timeout") if counts[r])]
    for result in ("failed", "timeout", "skipped"):
        for o in outcomes:
            if o.result == result:
                lines.append(f"{result.upper():8} {o.test}\n         {o.reason[:300]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkout", required=True, metavar="PATH[@COMMIT]",
                   help="a clone or mirror of aws-neuron/nki-library, or a plain tree with its commit")
    p.add_argument("--per-function", type=int, default=1, metavar="N")
    p.add_argument("--match", default="", metavar="TEXT", help="only tests whose id contains TEXT")
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="per test, in seconds")
    p.add_argument("--memory-gib", type=float, default=12.0, metavar="G", help="per test: its address space")
    p.add_argument("--json", type=Path, metavar="FILE", help="write every outcome here")
    args = p.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    with tree_of(args.checkout) as (tree, commit):
        python = environment(tree, WORK)
        tests = collect(python, tree)
        chosen = select(tests, args.per_function, args.match)
        print(f"nki-library {commit[:12]}: {len(chosen)} tests", flush=True)
        outcomes = [Outcome(t, "skipped", 0.0, tests[t]) for t in chosen if tests[t] is not None]
        runs = [t for t in chosen if tests[t] is None]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for o in pool.map(lambda t: run_one(python, tree, t, args.timeout, args.memory_gib), runs):
                print(f"{o.result:8} {o.seconds:6.0f} s  {o.test}", flush=True)
                outcomes.append(o)
    print(report(outcomes))
    if args.json:
        args.json.write_text(json.dumps({"commit": commit, "outcomes": [asdict(o) for o in outcomes]}, indent=1))
    return 0 if all(o.result in ("passed", "skipped") for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
