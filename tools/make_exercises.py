"""Generate the exercise and solution notebooks from their one annotated source each.

Sources: exercises/src/NN_name.py, jupytext percent format (`# %%` code cells,
`# %% [markdown]` prose). Inside code cells, solution regions sit between the lines
`### BEGIN SOLUTION` and `### END SOLUTION` (nbgrader's markers). Cell tags the generator reads:
- `exercise` on a markdown cell: the statement; in the solution notebook it becomes a numbered
  `{exercise}` directive for the book;
- `solution-only` on any cell: left out of the exercise notebook (discussion, profiles);
- `check`: the cell that calls the checker (tests run the checker themselves).

Outputs, both stored executed:
- exercises/NN_name.ipynb: each solution region replaced by `raise NotImplementedError(...)`; the
  cells that hit a stub are tagged `raises-exception` (nbval and the book then expect the error),
  and only those; any other error stops the generator.
- solutions/NN_name.ipynb: the markers removed, every cell green; each run of solution cells is
  wrapped in a gated `{solution-start}` ... `{solution-end}` dropdown for the book.
- book/exercises/index.md: the table of exercises (title, lesson, difficulty, time), read from
  each source's title cell.

Usage (from the repository root):
    python tools/make_exercises.py               # regenerate every exercise and solution
    python tools/make_exercises.py 04 11         # only exercises 04 and 11
    python tools/make_exercises.py --reset 4     # give a learner a fresh exercises/04_*.ipynb: the
                                                 # committed one, byte for byte (their copy is kept
                                                 # as *.ipynb.bak1, .bak2, ...)
    python tools/make_exercises.py --reset all   # the same for every exercise
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
SRC_DIR = ROOT / "exercises" / "src"
EXERCISE_DIR = ROOT / "exercises"
SOLUTION_DIR = ROOT / "solutions"
RUN_DIR = EXERCISE_DIR  # exercise notebooks execute here (the setup cell finds the repository root)
BOOK_INDEX = ROOT / "book" / "exercises" / "index.md"
TABLE_START, TABLE_END = "<!-- exercise-table-start -->", "<!-- exercise-table-end -->"

BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
STUB = 'raise NotImplementedError("Exercise {number}: write this part (see the statement above)")'
CONTROL_TAGS = ("exercise", "solution-only", "check")
RAISES = "raises-exception"
# What a cell that reaches a stub stops with: the stub's own error, or the checkers' short form of it
# (exercises/grading.py, StubReached).
STUB_ERRORS = ("NotImplementedError", "StubReached")


def sources(selected: list[str] | None = None) -> list[Path]:
    """exercises/src/NN_*.py, in order; `selected` filters by number ("4" or "04") or stem."""
    found = sorted(SRC_DIR.glob("[0-9][0-9]_*.py"))
    if not selected:
        return found
    selected = [s.zfill(2) if s.isdigit() else s for s in selected]
    chosen = [p for p in found if p.stem[:2] in selected or p.stem in selected]
    missing = set(selected) - {p.stem[:2] for p in chosen} - {p.stem for p in chosen}
    if missing:
        raise SystemExit(f"no exercise source for {sorted(missing)} in {SRC_DIR.relative_to(ROOT)}")
    return chosen


def read_source(path: Path) -> nbformat.NotebookNode:
    return jupytext.read(path, fmt="py:percent")


def tags(cell: nbformat.NotebookNode) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def has_solution(cell: nbformat.NotebookNode) -> bool:
    return cell.cell_type == "code" and BEGIN in cell.source


def _regions(code: str, replace: bool, number: str) -> str:
    """Remove the markers (replace=False) or replace each marked region by an indented stub."""
    out: list[str] = []
    inside = False
    for line in code.splitlines():
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise ValueError(f"exercise {number}: nested {BEGIN}")
            inside = True
            if replace:
                indent = line[: len(line) - len(line.lstrip())]
                out.append(indent + STUB.format(number=number))
            continue
        if stripped == END:
            if not inside:
                raise ValueError(f"exercise {number}: {END} without {BEGIN}")
            inside = False
            continue
        if not (inside and replace):
            out.append(line)
    if inside:
        raise ValueError(f"exercise {number}: {BEGIN} without {END}")
    return "\n".join(out)


def stub_code(code: str, number: str) -> str:
    return _regions(code, replace=True, number=number)


def solution_code(code: str, number: str = "") -> str:
    return _regions(code, replace=False, number=number)


def exercise_label(path: Path) -> str:
    return "ex-" + path.stem.replace("_", "-")


def _cell(kind: str, source: str, cell_tags: list[str]) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_markdown_cell(source) if kind == "markdown" else nbformat.v4.new_code_cell(source)
    kept = [t for t in cell_tags if t not in CONTROL_TAGS]
    if kept:
        cell.metadata["tags"] = kept
    return cell


def _notebook(cells: list[nbformat.NotebookNode], stem: str) -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    for index, cell in enumerate(cells):
        cell.id = f"{stem[:2]}-{index:02d}"  # stable ids: regenerating gives no spurious diffs
    nb.cells = cells
    nb.metadata = {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    }
    return nb


EXERCISE_HOWTO = (
    "*How to work:* replace each `raise NotImplementedError(...)` with your code, then run the check "
    "cell; its message says what is wrong and where. The completed version is "
    "`solutions/{stem}.ipynb`. To start over: `make reset-exercise EX={number}` (your copy is kept "
    "as `exercises/{stem}.ipynb.bak1`, the next reset's as `.bak2`, and so on)."
)
SOLUTION_NOTE = (
    "*Try it first* in `exercises/{stem}.ipynb`, where the marked parts are stubs; this page is the "
    "completed version, with each solution folded away."
)


def _with_note(cells: list[nbformat.NotebookNode], note: str, path: Path) -> list[nbformat.NotebookNode]:
    """The note goes right after the title cell."""
    text = note.format(stem=path.stem, number=path.stem[:2])
    return cells[:1] + [_cell("markdown", text, [])] + cells[1:]


def build_exercise(path: Path) -> nbformat.NotebookNode:
    """The learner's notebook (not executed yet): stubs instead of solutions."""
    number = path.stem[:2]
    cells = []
    for cell in read_source(path).cells:
        if "solution-only" in tags(cell):
            continue
        source = stub_code(cell.source, number) if has_solution(cell) else cell.source
        cells.append(_cell(cell.cell_type, source, tags(cell)))
    return _notebook(_with_note(cells, EXERCISE_HOWTO, path), path.stem)


def build_solution(path: Path) -> nbformat.NotebookNode:
    """The completed notebook (not executed yet), with the book's exercise/solution directives."""
    label = exercise_label(path)
    cells: list[nbformat.NotebookNode] = []
    open_dropdown = False
    for cell in read_source(path).cells:
        is_solution = has_solution(cell)
        if open_dropdown and not is_solution:
            cells.append(_cell("markdown", ":::{solution-end}\n:::", []))
            open_dropdown = False
        if is_solution and not open_dropdown:
            cells.append(_cell("markdown", f":::{{solution-start}} {label}\n:class: dropdown\n:::", []))
            open_dropdown = True
        source = solution_code(cell.source) if is_solution else cell.source
        if "exercise" in tags(cell):
            source = f":::{{exercise}}\n:label: {label}\n\n{source}\n:::"
        cells.append(_cell(cell.cell_type, source, tags(cell)))
    if open_dropdown:
        cells.append(_cell("markdown", ":::{solution-end}\n:::", []))
    return _notebook(_with_note(cells, SOLUTION_NOTE, path), path.stem)


def _execute(nb: nbformat.NotebookNode, workdir: Path, allow_errors: bool) -> None:
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", allow_errors=allow_errors, record_timing=False,
        resources={"metadata": {"path": str(workdir)}},
    )
    client.execute()


def _errors(cell: nbformat.NotebookNode) -> list[str]:
    return [o.get("ename", "") for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def execute_exercise(nb: nbformat.NotebookNode, name: str) -> int:
    """Run the exercise notebook; tag the cells that stop at a stub. Returns how many did."""
    _execute(nb, RUN_DIR, allow_errors=True)
    stopped = 0
    for cell in nb.cells:
        names = _errors(cell)
        if not names:
            continue
        if len(names) != 1 or names[0] not in STUB_ERRORS:
            raise SystemExit(f"{name}: cell {cell.id} failed with {names}, not at a stub:\n{cell.source}")
        cell.metadata.setdefault("tags", []).append(RAISES)
        stopped += 1
    if not stopped:
        raise SystemExit(f"{name}: no cell reaches a stub; is a solution region missing?")
    return stopped


def execute_solution(nb: nbformat.NotebookNode, name: str) -> None:
    try:
        _execute(nb, SOLUTION_DIR, allow_errors=False)
    except CellExecutionError as err:
        raise SystemExit(f"{name}: the solution notebook fails:\n{err}") from None


def _show(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def write_exercise(path: Path, target: Path) -> None:
    nb = build_exercise(path)
    stopped = execute_exercise(nb, target.name)
    nbformat.write(nb, target)
    print(f"  {_show(target)}: {stopped} cell(s) stop at a stub")


def write_solution(path: Path) -> None:
    target = SOLUTION_DIR / f"{path.stem}.ipynb"
    nb = build_solution(path)
    execute_solution(nb, target.name)
    nbformat.write(nb, target)
    print(f"  {_show(target)}: all cells run")


def next_backup(target: Path) -> Path:
    """The first unused numbered backup name (NN_name.ipynb.bak1, .bak2, ...): a second reset
    never overwrites the copy the first one kept."""
    number = 1
    while (backup := target.with_name(f"{target.name}.bak{number}")).exists():
        number += 1
    return backup


def committed_exercise(path: Path) -> bytes | None:
    """exercises/NN_name.ipynb as committed at HEAD, or None outside a git checkout (or untracked)."""
    try:
        shown = subprocess.run(["git", "-C", str(ROOT), "show", f"HEAD:exercises/{path.stem}.ipynb"],
                               capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return shown.stdout if shown.returncode == 0 else None


def reset(path: Path) -> None:
    """Fresh exercise notebook for a learner; every earlier version stays as a numbered backup.

    The fresh copy is the committed notebook, byte for byte, so `git status` shows only the backup;
    outside a git checkout it is generated and executed again."""
    target = EXERCISE_DIR / f"{path.stem}.ipynb"
    if target.exists():
        backup = next_backup(target)
        shutil.copy2(target, backup)
        print(f"  kept the learner's copy as {_show(backup)} "
              f"(to open it in JupyterLab, copy it to a name ending in .ipynb)")
    committed = committed_exercise(path)
    if committed is None:
        write_exercise(path, target)
        return
    target.write_bytes(committed)
    print(f"  {_show(target)}: the committed version")


def header(path: Path) -> dict[str, str | list[str]]:
    """Title, lesson links, difficulty and minutes from the source's first (title) cell."""
    text = read_source(path).cells[0].source
    fields = {
        "title": re.search(r"^# Exercise \d+: (.+)$", text, re.M),
        "difficulty": re.search(r"\*\*Difficulty:\*\* (\w+)", text),
        "minutes": re.search(r"\*\*Time:\*\* (\d+) min", text),
    }
    missing = [k for k, v in fields.items() if v is None]
    if missing:
        raise SystemExit(f"{path.name}: title cell lacks {missing} (see the other sources for the format)")
    lessons = re.findall(r"\[([^\]]+)\]\(\.\./notebooks/([^)]+)\)", text)
    if not lessons:
        raise SystemExit(f"{path.name}: title cell links no lesson (../notebooks/NN_*.ipynb)")
    out: dict = {k: v.group(1) for k, v in fields.items()}
    out["lesson_names"] = [name for name, _ in lessons]
    out["lesson_files"] = [target for _, target in lessons]
    return out


def book_table(paths: list[Path], links_from: str = "../../") -> str:
    """The table of exercises and their lessons: book/exercises/index.md's, and README.md's with
    `links_from=""` (links are relative to the repository root through `links_from`)."""
    rows = ["| # | exercise | lesson | difficulty | time |", "|---|---|---|---|---|"]
    total = 0
    for path in paths:
        h = header(path)
        total += int(h["minutes"])
        lessons = ", ".join(f"[{name}]({links_from}notebooks/{target})"
                            for name, target in zip(h["lesson_names"], h["lesson_files"]))
        rows.append(f"| {int(path.stem[:2])} | [{h['title'][:1].upper() + h['title'][1:]}]({links_from}solutions/{path.stem}.ipynb) | {lessons} "
                    f"| {h['difficulty']} | {h['minutes']} min |")
    rows.append(f"| | **all {len(paths)}** | | | **{total} min** |")
    return "\n".join(rows)


def book_index_text(paths: list[Path]) -> str:
    """book/exercises/index.md with its table regenerated from the sources."""
    text = BOOK_INDEX.read_text()
    before, rest = text.split(TABLE_START, 1)
    _, after = rest.split(TABLE_END, 1)
    return f"{before}{TABLE_START}\n{book_table(paths)}\n{TABLE_END}{after}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("exercises", nargs="*",
                        help="numbers (4 or 04), stems (04_gelu_tiles) or `all`; default: all")
    parser.add_argument("--reset", action="store_true", help="only rewrite the learner's exercise notebook(s)")
    args = parser.parse_args(argv)
    if args.reset and not args.exercises:
        parser.error("--reset needs the exercise number(s), e.g. --reset 04")
    SOLUTION_DIR.mkdir(exist_ok=True)
    selected = None if args.exercises == ["all"] else args.exercises
    for path in sources(selected):
        start = time.perf_counter()
        print(f"{path.relative_to(ROOT)}")
        if args.reset:
            reset(path)
        else:
            write_exercise(path, EXERCISE_DIR / f"{path.stem}.ipynb")
            write_solution(path)
        print(f"  {time.perf_counter() - start:.1f} s")
    if not args.reset:
        BOOK_INDEX.write_text(book_index_text(sources()))
        print(f"{BOOK_INDEX.relative_to(ROOT)}: table of {len(sources())} exercises")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
