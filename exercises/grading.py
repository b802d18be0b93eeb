"""The machinery behind the exercise checkers: run a learner's kernel, compare with a reference,
read the instruction trace, and say what is wrong in the learner's terms.

Every failure is a `CheckFailed` (an AssertionError) whose message names the case (shapes and
dtypes), the rows or tiles that differ, an expected and a received value, and a hint. A checker
(`@checker`) raises it from the learner's call: the message once, without the checker's frames
and without the exception it was made from.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Callable, Iterable, NoReturn, Sequence, TypeVar

import torch

from kernels.limits import PMAX  # rows per tile = SBUF partitions
from nkisim.emulator.errors import strip_frames_under
from nkisim.emulator.trace import ON_CHIP


class CheckFailed(AssertionError):
    """The learner's answer is wrong; the message says where and why."""

    def _render_traceback_(self) -> list[str]:
        """IPython and Jupyter display hook: the learner's frames and the message, not the checker's."""
        from IPython import get_ipython     # only IPython calls this hook, from inside its shell

        return get_ipython().InteractiveTB.structured_traceback(type(self), self, learner_frames(self.__traceback__))


EXERCISES_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
F = TypeVar("F", bound=Callable[..., Any])


def checker(check: F) -> F:
    """Make `check` an exercise's checker: a failure is raised afresh from this call, so the learner
    sees the message once (no "during handling of the above exception" repeat of the error it
    was made from) and, in a notebook, only their own cell's frame."""

    @functools.wraps(check)
    def run(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True    # pytest: report the learner's line
        try:
            return check(*args, **kwargs)
        except CheckFailed as err:
            raise CheckFailed(str(err)) from None
        except NotImplementedError as err:
            raise StubReached(err) from None

    return run  # type: ignore[return-value]


class StubReached(NotImplementedError):
    """The learner's code stopped at an exercise stub (`raise NotImplementedError(...)`): shown as
    the stub's message and where it is, not as a traceback through the checker and the emulator."""

    def __init__(self, err: NotImplementedError) -> None:
        tb = err.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        place = f" in {tb.tb_frame.f_code.co_name}, line {tb.tb_lineno} of its cell" if tb is not None else ""
        super().__init__(f"{err}\nThe check stopped at a `raise NotImplementedError(...)`{place}: replace it "
                         "with your code, then run this cell again.")

    def _render_traceback_(self) -> list[str]:
        """IPython and Jupyter display hook: the message alone."""
        return [f"{NotImplementedError.__name__}: {self}"]


def learner_frames(tb: TracebackType | None) -> TracebackType | None:
    """A traceback without the frames of the exercises package (the checkers and this module)."""
    return strip_frames_under(tb, EXERCISES_DIR)


@dataclass(frozen=True)
class Mistake:
    """A known wrong answer: if the output matches `output`, the hint explains the mistake."""

    output: torch.Tensor
    hint: str


def fail(title: str, case: str, details: Sequence[str] = (), hint: str | None = None) -> NoReturn:
    lines = [f"{title}  [case: {case}]" if case else title, *[f"  {d}" for d in details]]
    if hint:
        lines.append(f"Hint: {hint}")
    raise CheckFailed("\n".join(lines))


def describe(**tensors: torch.Tensor) -> str:
    """'x [300, 16] float32, g [300, 16] float32': what a case ran on."""
    return ", ".join(f"{k} {list(v.shape)} {dtype_name(v.dtype)}" for k, v in tensors.items())


def randn(*shape: int, dtype: torch.dtype = torch.float32, scale: float = 1.0, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen, dtype=torch.float64) * scale).to(dtype)


def run_kernel(kernel: Any, *args: Any, lnc: int = 1, case: str = "", hint: str | None = None) -> Any:
    """nkisim.run(kernel, *args, lnc=lnc); an error inside the kernel becomes a CheckFailed that
    keeps the emulator's message (it names the instruction, the operand and the limit)."""
    import nkisim

    try:
        return nkisim.run(kernel, *args, lnc=lnc)
    except NotImplementedError:
        raise
    except Exception as err:  # the learner's kernel may fail in any way; report it in their terms
        fail(f"Your kernel stopped with {type(err).__name__} (LNC={lnc}).", case, [str(err)], hint)


def call(fn: Callable, *args: Any, case: str = "", hint: str | None = None) -> Any:
    """Call a learner's plain function; an exception becomes a CheckFailed with the case."""
    try:
        return fn(*args)
    except NotImplementedError:
        raise
    except Exception as err:
        fail(f"Your function stopped with {type(err).__name__}.", case, [str(err)], hint)


def as_float(t: Any) -> torch.Tensor:
    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    return t.detach().cpu().to(torch.float64)


def _row_runs(rows: Iterable[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for r in sorted(rows):
        if runs and r == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], r)
        else:
            runs.append((r, r))
    return runs


def describe_rows(rows: Sequence[int], n_rows: int, tile_rows: int | None = PMAX) -> str:
    """'rows 256-299 (tile 2, the partial last tile of 44 rows)' for a set of bad row indices;
    without `tile_rows` (outputs that are not tiled) just the row ranges."""
    parts = []
    for lo, hi in _row_runs(rows)[:4]:
        span = f"row {lo}" if lo == hi else f"rows {lo}-{hi}"
        if not tile_rows:
            parts.append(span)
            continue
        n_tiles = -(-n_rows // tile_rows)
        partial = n_rows % tile_rows
        tiles = sorted({lo // tile_rows, hi // tile_rows})
        label = f"tile {tiles[0]}" if len(tiles) == 1 else f"tiles {tiles[0]}-{tiles[-1]}"
        if partial and tiles[-1] == n_tiles - 1:
            label += f", the partial last tile of {partial} rows"
        parts.append(f"{span} ({label})")
    more = len(_row_runs(rows)) - 4
    return "; ".join(parts) + (f"; and {more} more runs" if more > 0 else "")


def dtype_name(dtype: Any) -> str:
    """The dtype's name without "torch.", e.g. bfloat16."""
    return str(dtype).replace("torch.", "")


def _close(got: torch.Tensor, expected: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    return (got - expected).abs() <= atol + rtol * expected.abs()


def compare(
    what: str, got: Any, expected: Any, *, atol: float, rtol: float, case: str,
    hint: str | None = None, mistakes: Sequence[Mistake] = (), tile_rows: int | None = PMAX,
    inputs: torch.Tensor | None = None, dtype: torch.dtype | None = None, dtype_of: str = "",
) -> None:
    """Fail unless `got` has `expected`'s shape, the `dtype` (if given; `dtype_of` says whose dtype
    it is) and |got - expected| <= atol + rtol*|expected| everywhere (NaN never passes).

    Rows are the first axis of a 2-D view ([..., C] -> [-1, C]); the message groups the bad rows
    into tiles of `tile_rows` (1-D outputs have no rows). `inputs` (same shape) are quoted at the
    first wrong element. If the output matches one of `mistakes`, that hint wins."""
    g, e = as_float(got), as_float(expected)
    if tuple(g.shape) != tuple(e.shape):
        fail(f"{what} has shape {list(g.shape)}, expected {list(e.shape)}.", case, hint=hint)
    found = got.dtype if isinstance(got, torch.Tensor) else type(got).__name__
    if dtype is not None and found != dtype:
        fail(f"{what} has dtype {dtype_name(found)}, expected {dtype_name(dtype)}"
             + (f" ({dtype_of})" if dtype_of else "") + ".", case,
             hint="the output's dtype is part of the answer: allocate it with the dtype the statement asks for.")
    ok = _close(g, e, atol, rtol) & ~torch.isnan(g)
    if bool(ok.all()):
        return
    g2, e2, ok2 = (t.reshape(-1, t.shape[-1]) if t.dim() >= 2 else t.reshape(1, -1) for t in (g, e, ok))
    bad_rows = torch.nonzero(~ok2.all(dim=1)).flatten().tolist()
    r = bad_rows[0]
    c = int(torch.nonzero(~ok2[r]).flatten()[0])
    got_v, exp_v = float(g2[r, c]), float(e2[r, c])
    at = f" (input {float(inputs.reshape(g2.shape)[r, c]):.4g})" if inputs is not None else ""
    index = f"[{r}, {c}]" if g.dim() >= 2 else f"[{c}]"
    details = [
        f"wrong in {len(bad_rows)} of {g2.shape[0]} rows: {describe_rows(bad_rows, g2.shape[0], tile_rows)}",
    ] if g.dim() >= 2 else [f"wrong in {int((~ok).sum())} of {g.numel()} elements"]
    details += [
        f"first wrong element {index}{at}: expected {exp_v:.6g}, got {got_v:.6g}"
        + (" (NaN: never written, as new buffers start as NaN in the emulator, or an invalid value such as "
           "0*inf)" if got_v != got_v and exp_v == exp_v else ""),
        f"max abs error {float((g - e).abs().nan_to_num(float('inf')).max()):.3g}; "
        f"tolerance |got - expected| <= {atol:g} + {rtol:g} * |expected|",
    ]
    for mistake in mistakes:
        m = as_float(mistake.output)
        if tuple(m.shape) == tuple(g.shape) and bool((_close(g, m, atol, rtol) | (torch.isnan(g) & torch.isnan(m))).all()):
            hint = mistake.hint
            break
    fail(f"{what} is wrong.", case, details, hint)


# ---------------------------------------------------------------- the instruction trace


def instructions(trace: Any, opcode: str | None = None, program: int | None = None) -> list:
    return [i for i in trace if (opcode is None or i.opcode == opcode) and (program is None or i.program_id == program)]


def compute_instructions(trace: Any, program: int | None = None) -> list:
    return [i for i in trace if i.opcode != "DMA" and (program is None or i.program_id == program)]


def where(ins: Any) -> str:
    label = f"'{ins.name}'" if ins.name else ins.isa
    return f"{label} at {ins.source}"


def rows_stored(trace: Any, width: int, n_rows: int, lnc: int) -> torch.Tensor:
    """[lnc, n_rows] counts: how often each program's SBUF->HBM DMAs wrote each output row.

    Assumes one output tensor of `width` columns and row-aligned stores (whole rows)."""
    counts = torch.zeros(lnc, n_rows, dtype=torch.int64)
    for ins in instructions(trace, "DMA"):
        if ins.dma is None or ins.dma.direction != "sbuf->hbm":
            continue
        region = ins.writes[0].region
        lo, hi = region.f_lo // width, -(-region.f_hi // width)
        counts[ins.program_id, lo:min(hi, n_rows)] += 1
    return counts


def check_rows_once(trace: Any, width: int, n_rows: int, lnc: int, case: str) -> None:
    """Every output row stored exactly once, by exactly one program, and every program did work."""
    counts = rows_stored(trace, width, n_rows, lnc)
    total = counts.sum(dim=0)
    missing = torch.nonzero(total == 0).flatten().tolist()
    if missing:
        fail("Some output rows are never stored.", case,
             [f"{describe_rows(missing, n_rows)}: no program wrote them"],
             "the programs' row ranges must cover all R rows: program p starts where program p-1 stops.")
    shared = torch.nonzero((counts > 0).sum(dim=0) > 1).flatten().tolist()
    if shared:
        fail("Some output rows are stored by more than one program (overlapping shards).", case,
             [f"{describe_rows(shared, n_rows)} written by several programs"],
             "choose each program's rows from nl.program_id(0) so the shards do not overlap.")
    twice = torch.nonzero(total > 1).flatten().tolist()
    if twice:
        fail("Some output rows are stored more than once.", case,
             [f"{describe_rows(twice, n_rows)} written {int(total.max())} times"],
             "each tile is stored once: check the loop bounds.")
    for pid in range(lnc):
        if n_rows >= lnc * PMAX and int(counts[pid].sum()) == 0:
            fail(f"Program {pid} stores no rows: all the work runs on the other core.", case,
                 [f"rows per program: {[int(counts[p].gt(0).sum()) for p in range(lnc)]}"],
                 "split the rows by nl.program_id(0) and nl.num_programs(0).")


def check_tile_reads(trace: Any, opcodes: Sequence[str], width: int, n_rows: int, case: str) -> None:
    """No instruction of `opcodes` reads more partitions than its tile has valid rows.

    A program's k-th store (SBUF->HBM DMA) defines its tile k: the rows it writes are the valid
    partitions; the program's k-th instruction of each opcode works on that tile. Partitions past
    them were never loaded: NaN in the emulator, garbage on hardware, even when the store leaves
    them out."""
    for pid in sorted({i.program_id for i in trace}):
        stores = [i for i in instructions(trace, "DMA", pid) if i.dma is not None and i.dma.direction == "sbuf->hbm"]
        for opcode in opcodes:
            for tile, (ins, store) in enumerate(zip(instructions(trace, opcode, pid), stores)):
                valid = store.dma.partitions
                read = max((op.partitions for op in ins.reads if op.buffer in ON_CHIP), default=0)
                if read > valid:
                    region = store.writes[0].region
                    rows = range(region.f_lo // width, min(-(-region.f_hi // width), n_rows))
                    tiles = describe_rows(rows, n_rows) if trace.lnc == 1 else (
                        f"tile {tile} of program {pid}: {describe_rows(rows, n_rows, None)}")
                    fail(f"An {opcode} reads {read} partitions of a tile with {valid} valid rows.", case,
                         [f"{where(ins)}: {tiles}",
                          f"partitions {valid}-{read - 1} were never loaded (NaN in the emulator, garbage on "
                          "hardware)"],
                         "slice every operand of the partial tile to its valid rows: tile[0:rows].")


def passed(exercise: str, cases: Sequence[str], extra: str = "") -> None:
    """The one line a learner sees when everything is right."""
    print(f"Exercise {exercise}: all {len(cases)} checks passed" + (f" ({extra})" if extra else "") + ".")
    for case in cases:
        print(f"  ok  {case}")
