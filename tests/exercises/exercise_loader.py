"""Load an exercise's solution from its annotated source, optionally with a mutation applied.

The correct answer the checker must accept is the source's own solution (never a copy); each
known-wrong answer is that solution with one textual change, so a mutant stops applying (and its
test fails loudly) as soon as the source changes under it.
"""
from __future__ import annotations

import linecache
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import make_exercises as gen  # noqa: E402


@dataclass(frozen=True)
class Mutant:
    """A plausible wrong answer: replace `old` (it must occur exactly `count` times) by `new`; the
    checker's message must match `expect` (a regular expression, case-insensitive)."""

    label: str
    old: str
    new: str
    expect: str
    count: int = 1


def source_path(number: str) -> Path:
    (path,) = gen.sources([number])
    return path


def solution_script(number: str) -> str:
    """The setup and solution code cells of one exercise, markers removed, as one script."""
    cells = gen.read_source(source_path(number)).cells
    code = [gen.solution_code(c.source) for c in cells
            if c.cell_type == "code" and not {"check", "solution-only"} & set(gen.tags(c))]
    return "\n\n".join(code) + "\n"


def check_call(number: str) -> str:
    """The source of the exercise's check cell (what the learner runs)."""
    cells = gen.read_source(source_path(number)).cells
    (cell,) = [c for c in cells if "check" in gen.tags(c)]
    return cell.source


def load(number: str, mutant: Mutant | None = None) -> dict[str, Any]:
    """Execute the (possibly mutated) solution script; return its namespace."""
    script = solution_script(number)
    if mutant is not None:
        found = script.count(mutant.old)
        if found != mutant.count:
            raise AssertionError(
                f"mutant {mutant.label!r}: pattern occurs {found} times in exercise {number}, expected {mutant.count}")
        script = script.replace(mutant.old, mutant.new)
    filename = f"<exercise {number}{' mutant: ' + mutant.label if mutant else ''}>"
    linecache.cache[filename] = (len(script), None, script.splitlines(True), filename)
    namespace: dict[str, Any] = {"__name__": f"exercise_{number}"}
    exec(compile(script, filename, "exec"), namespace)
    return namespace


def run_check(number: str, namespace: dict[str, Any]) -> None:
    """Run the exercise's own check cell in the namespace."""
    exec(compile(check_call(number), f"<exercise {number} check>", "exec"), namespace)
