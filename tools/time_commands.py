"""How long the workshop's commands take here, with the machine's load (README, "Build and test
times"): a Markdown table to paste where the times are quoted.

    python tools/time_commands.py [--fresh-book] [--fresh-clone]
    python tools/time_commands.py --only COMMAND [COMMAND ...]     (time just these shell commands)

In this checkout (run `make env` first), in this order: with --fresh-book, `make book` from an
empty book/_build (executes every notebook of the book); `make test`; `make test-book` (its book
reuses the notebooks that nbval just ran); `make book` again with nothing changed. With
--fresh-clone, also `.ci/run` in a fresh clone of HEAD (venv included). Each row: wall time; CPU time of every process
the command ran (user + system, from the kernel's accounting of waited-for children); that CPU
time divided by the usable cores, the least wall time the same work needs on an idle machine with
this many cores; and the 1-minute load average before and after. On a shared machine the wall time
depends on the others' load; the CPU time much less.
"""
from __future__ import annotations

import argparse
import datetime
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import book_outputs  # noqa: E402

HEADER = ("| command | what it does | wall | CPU, all processes | CPU / usable cores | load average (1 min) before, after |\n"
          "|---|---|---|---|---|---|")


def steps(fresh_book: bool = False, fresh_clone: bool = False) -> list[tuple[str, str, str]]:
    """(command, what it does, how to prepare the checkout) in the order they run."""
    n = len(book_outputs.book_notebooks())
    out = []
    if fresh_book:
        out.append(("make book", f"from an empty `book/_build`: executes the {n} notebooks of the book, builds the site "
                    "and slides", "empty build"))
    out += [("make test", "the whole suite: unit tests and every notebook under nbval strict, on every core", ""),
            ("make test-book", f"after `make test`: the book from the {n} notebooks nbval ran, every page in headless "
             "Chromium", ""),
            ("make book", "again, nothing changed: executes no notebook, rebuilds no page", "")]
    if fresh_clone:
        out.append((".ci/run", "in a fresh clone: builds `.venv/`, then `make test`, `make rehearse-trn2`, `make test-book`",
                    "fresh clone"))
    return out


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(command: str, cwd: Path) -> dict[str, float]:
    """Run one shell command to completion, timing it (a failure is reported, and the next command still runs)."""
    load_before, cpu, wall = os.getloadavg()[0], cpu_of_children(), time.perf_counter()
    done = subprocess.run(command, shell=True, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - wall, cpu_of_children() - cpu
    if done.returncode != 0:
        print(f"`{command}` failed (exit {done.returncode}):\n{done.stderr[-4000:]}", file=sys.stderr)
    return {"wall_s": wall, "cpu_s": cpu, "load_before": load_before, "load_after": os.getloadavg()[0],
            "exit": done.returncode}


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)} min {round(seconds % 60):02d} s" if seconds >= 60 else f"{seconds:.0f} s"


def row(command: str, what: str, m: dict[str, float], cores: int) -> str:
    wall = _minutes(m["wall_s"]) + (f" (FAILED, exit {m['exit']})" if m["exit"] else "")
    return (f"| `{command}` | {what} | {wall} | {_minutes(m['cpu_s'])} | {_minutes(m['cpu_s'] / cores)} | "
            f"{m['load_before']:.1f}, {m['load_after']:.1f} |")


def conditions(cores: int) -> str:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return (f"Measured {datetime.date.today().isoformat()} at commit {commit or '?'}: {os.cpu_count()} CPUs "
            f"({cores} usable), Python {platform.python_version()}, {platform.machine()}.")


def run(selected: list[tuple[str, str, str]]) -> list[str]:
    cores = len(os.sched_getaffinity(0))
    lines = [conditions(cores), "", HEADER]
    for command, what, prepare in selected:
        cwd = ROOT
        if prepare == "empty build":
            shutil.rmtree(ROOT / "book" / "_build", ignore_errors=True)
        if prepare == "fresh clone":
            # beside this checkout, as CI's is, so `../shared/seeds/` (the conformance fixture) is found
            cwd = Path(tempfile.mkdtemp(prefix=f"{ROOT.name}-clone-", dir=ROOT.parent))
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(cwd)], check=True)
        lines.append(row(command, what, measure(command, cwd), cores))
        print(lines[-1], file=sys.stderr, flush=True)   # progress: each row as it is measured
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fresh-book", action="store_true", help="first time make book from an empty book/_build")
    parser.add_argument("--fresh-clone", action="store_true", help="also time .ci/run in a fresh clone of HEAD")
    parser.add_argument("--only", nargs="+", metavar="COMMAND", help="time just these shell commands, as they are")
    a = parser.parse_args(argv)
    selected = [(c, "as given", "") for c in a.only] if a.only else steps(a.fresh_book, a.fresh_clone)
    print("\n".join(run(selected)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
