"""Vector-engine instructions beyond the basic element-wise set: two-operator element-wise
(`scalar_tensor_tensor`), scans (`tensor_tensor_scan`, `tensor_scalar_cumulative`), reductions
through the Vector accumulator (`tensor_scalar_reduce`, `select_reduce`, `range_select`),
predicated copies, batch-norm statistics and the quadrant shuffle.

Sources (NKI 0.6 API reference, one page per instruction):
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.<name>.html

Numerics follow the same rule as `isa.py`: inputs read as fp32, math in fp32, one
round-to-nearest-even cast on write. Scans run element by element in fp32, in order, as the
pseudo code on their pages does, so their results are bit-exact to that pseudo code.

The Vector engine keeps one fp32 accumulator per lane (128), shared by every Vector instruction
with a `reduce_cmd` (the pages of exponential, range_select, select_reduce, tensor_scalar_reduce
and tensor_scalar_cumulative say so); it is separate from the Scalar engine's accumulator that
`activation` uses. It lives in `Program.vector_accumulator`.

The accumulator holds no defined value until a `reset_reduce` (or `load_reduce`) of this program,
and none after an operation with `reduce_cmd=idle`: "Even when reduce_cmd is set to idle, the
accumulator state may still be modified. Always use reset_reduce after any operations that ran with
idle mode" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.select_reduce.html).
An instruction that reads it then (`reduce_cmd=reduce`, or a `reduce_res` read-out without a reset)
is an error naming the cause; its lanes hold NaN meanwhile, like uninitialised memory.

Choices where the docs are silent (each is tested):
  * `bn_stats` splits the flattened free elements of a partition into even and odd positions and
    computes each half's mean and sum of squared deviations in fp32, two-pass; an empty half
    (one-element input) reports count 0, mean 0, 0.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import coverage, dtypes, nki_versions
from ..costmodel import costs
from ..vocabulary import VECTOR, instruction
from .enums import reduce_cmd
from .errors import ABSENT, reject_keywords
from .issue import Issue, NkiInstruction, rows_f32, scalar_stage
from .ops import OPS, Op
from .tensor import PSUM, NkiTensor

_ReduceCmd = reduce_cmd
FP32_MIN = float(np.finfo(np.float32).min)          # -3.4028235e+38, range_select's only on_false_value
BN_STATS_FMAX = 512                                  # nl.tile_size.bn_stats_fmax (bn_stats page)
COMPARISONS = ("equal", "less", "less_equal", "greater", "greater_equal")   # range_select page
# identity of each reduce op: tensor_scalar_reduce / tensor_scalar_cumulative pages
_IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}
_ROW_REDUCE = {"add": lambda x: x.sum(dim=1), "multiply": lambda x: x.prod(dim=1),
               "maximum": lambda x: x.amax(dim=1), "minimum": lambda x: x.amin(dim=1)}


def _arith(c: Issue, role: str, op: Any) -> Op:
    """A two-operand arithmetic ALU op (no bit-vector ops)."""
    op = c.op(role, op, "alu")
    if op.bitvec:
        c.fail(f"{role}={op!r} is a bit-vector op; {c.isa} takes arithmetic operators only")
    if op.binary is None:
        c.fail(f"{role}={op!r} is unary; {c.isa} needs a two-operand arithmetic operator")
    return op


def _scalar_or_column(c: Issue, role: str, value: Any, partitions: int, reads: list, fp32: bool = False) -> None:
    if isinstance(value, NkiTensor):
        reads.append((role, c.column(role, value, partitions, fp32=fp32)))
    else:
        c.number(role, value)


def _value(v: Any) -> Any:
    """A scalar operand as fp32 math sees it: a [P, 1] column or a float."""
    return rows_f32(v) if isinstance(v, NkiTensor) else float(v)


def _not_both_psum(c: Issue, a: tuple[str, NkiTensor], b: tuple[str, NkiTensor]) -> None:
    if a[1].buffer is PSUM and b[1].buffer is PSUM:
        c.fail(f"{a[0]} and {b[0]} are both in psum; at most one of them may be in PSUM")


def _accumulator(c: Issue, P: int) -> np.ndarray:
    return c.prog.vector_accumulator[:P]


_LOADING_CMDS = (reduce_cmd.reset_reduce, reduce_cmd.reduce, reduce_cmd.load_reduce)


_SELECT_REDUCE_PAGE = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.select_reduce.html"


def _command(c: Issue, cmd: Any, allowed: tuple, reads_out: bool) -> Any:
    """The reduce_cmd, checked against the accumulator's state (module docstring): `reads_out` says
    the instruction writes the accumulator to a reduce_res."""
    cmd = c.enum("reduce_cmd", cmd, _ReduceCmd)
    if cmd not in allowed:
        c.fail(f"reduce_cmd={cmd!r} is not supported; use {', '.join(a.name for a in allowed)}")
    prog = c.prog
    if cmd in (_ReduceCmd.reset_reduce, _ReduceCmd.reset, _ReduceCmd.load_reduce):
        prog.vector_accumulator_undefined = None
    if cmd is _ReduceCmd.idle:      # it may modify the accumulator, so its own read-out is undefined too
        prog.vector_accumulator_undefined = f"after the reduce_cmd=idle {c.isa} at ({c.where})"
    if prog.vector_accumulator_undefined is not None and (cmd is _ReduceCmd.reduce or reads_out):
        what = "continues the reduction in" if cmd is _ReduceCmd.reduce else "reads out into reduce_res"
        c.fail(f"reduce_cmd={cmd.name} {what} the Vector engine's accumulator, which holds no defined value "
               f"{prog.vector_accumulator_undefined}: it is not reset at kernel start, and an operation with "
               f"reduce_cmd=idle may still modify it (\"Always use reset_reduce after any operations that ran with "
               f"idle mode\", {_SELECT_REDUCE_PAGE}); start the reduction with reduce_cmd=reset_reduce or load_reduce")
    return cmd


def _initial(c: Issue, cmd: Any, role: str, value: Any, P: int, reads: list) -> None:
    """The load_reduce start value: required with load_reduce, refused otherwise."""
    if cmd is _ReduceCmd.load_reduce:
        if value is None:
            c.fail(f"reduce_cmd=load_reduce needs {role}, the accumulator's start value")
        _scalar_or_column(c, role, value, P, reads, fp32=True)
    elif value is not None:
        c.fail(f"{role} is only used with reduce_cmd=load_reduce, got reduce_cmd={cmd!r}")


def _start(c: Issue, P: int, cmd: Any, op_name: str, init: Any) -> np.ndarray:
    """The accumulator lanes after `cmd`'s reset or load (unchanged for reduce/idle)."""
    acc = _accumulator(c, P)
    if cmd in (_ReduceCmd.reset_reduce, _ReduceCmd.reset):
        acc[:] = _IDENTITY[op_name]
    elif cmd is _ReduceCmd.load_reduce:
        acc[:] = rows_f32(init).numpy()[:, 0] if isinstance(init, NkiTensor) else float(init)
    return acc


# --- two operators, element-wise -----------------------------------------------------------------
@instruction("SCALAR_TENSOR_TENSOR", engines=(VECTOR,), cost=costs.tensor_tensor_cycles, color="#2f5d8a")
def scalar_tensor_tensor(dst: NkiTensor, data: NkiTensor, op0: Any, operand0: Any, op1: Any, operand1: NkiTensor,
                         reverse0: bool = False, reverse1: bool = False, reduce_cmd: Any = ABSENT,
                         reduce_op: Any = ABSENT, reduce_res: Any = ABSENT, name: str | None = None) -> NkiInstruction:
    """dst = (data op0 operand0) op1 operand1 on the Vector engine; operand0 is a number or a
    [P, 1] tile, operand1 a tile of data's layout; reverseN makes the operand the lhs. The fused
    reduction of NKI 0.7 (reduce_cmd, reduce_op, reduce_res) is not emulated."""
    _stt_reduction(reduce_cmd=reduce_cmd, reduce_op=reduce_op, reduce_res=reduce_res)
    c = Issue("scalar_tensor_tensor", name)
    dst, data, operand1 = c.tensor("dst", dst), c.tensor("data", data), c.tensor("operand1", operand1)
    c.same_layout("dst", dst, ("data", data), ("operand1", operand1))
    op0, op1 = _arith(c, "op0", op0), _arith(c, "op1", op1)
    _not_both_psum(c, ("data", data), ("operand1", operand1))
    for i, flag in (("0", reverse0), ("1", reverse1)):
        if not isinstance(flag, bool):
            c.fail(f"reverse{i} must be a bool, got {type(flag).__name__}")
    reads = [("data", data), ("operand1", operand1)]
    _scalar_or_column(c, "operand0", operand0, data.shape[0], reads)
    ins = c.record(VECTOR, reads, [("dst", dst)],
                   {"op0": op0.name, "op1": op1.name, "reverse0": reverse0, "reverse1": reverse1, "dtype": "float32",
                    "op": op1.name})      # its tensor-tensor stage sets the cost (the page: ~ tensor_tensor's)
    if c.prog.compute:
        x = scalar_stage(op0, rows_f32(data), operand0, reverse0, False)
        y = rows_f32(operand1)
        dtypes.store(dst.arr, op1.binary(y, x) if reverse1 else op1.binary(x, y))
    return ins


# NKI 0.7's defaults of the fused-reduction keywords (the v2.33.0 scalar_tensor_tensor signature)
_STT_REDUCE_DEFAULTS = {"reduce_cmd": _ReduceCmd.reset_reduce, "reduce_op": Ellipsis, "reduce_res": None}


def _stt_reduction(**given: Any) -> None:
    """scalar_tensor_tensor's reduce_* keywords: unknown to NKI 0.6; in NKI 0.7 only their defaults
    are accepted, since the page's visible text does not say what the reduction computes."""
    if not nki_versions.applies("stt-fused-reduce"):
        reject_keywords("nisa.scalar_tensor_tensor", nki_versions.release(), **given)
    elif any(value is not ABSENT and value is not None and value is not _STT_REDUCE_DEFAULTS[key]
             for key, value in given.items()):
        coverage.NotEmulated(
            "nki.isa.scalar_tensor_tensor's fused reduction (reduce_cmd, reduce_op, reduce_res)",
            "the NKI 0.7 page adds these parameters to the signature, but its text does not say which values are "
            "reduced (the op0 result or dst), along which axes, what each reduce_cmd starts the Vector accumulator "
            "from, nor reduce_res's shape; reduce dst with nisa.tensor_reduce, or use nisa.tensor_scalar_reduce "
            f"({nki_versions.ROWS['stt-fused-reduce'].page})").fail()


# --- scans ---------------------------------------------------------------------------------------
@instruction("TENSOR_TENSOR_SCAN", engines=(VECTOR,), cost=costs.per_element_cycles, color="#5b8fd1")
def tensor_tensor_scan(dst: NkiTensor, data0: NkiTensor, data1: NkiTensor, initial: Any, op0: Any, op1: Any,
                       reverse0: bool = False, reverse1: bool = False, name: str | None = None) -> NkiInstruction:
    """Per partition, over the flattened free elements i:
    r[i] = op1(op0(data0[i], r[i-1]), data1[i]), r[-1] = initial (a number or a [P, 1] tile);
    reverse0 swaps op0's operands, reverse1 makes data1 op1's lhs."""
    c = Issue("tensor_tensor_scan", name)
    dst, data0, data1 = c.tensor("dst", dst), c.tensor("data0", data0), c.tensor("data1", data1)
    c.same_layout("dst", dst, ("data0", data0), ("data1", data1))
    op0, op1 = _arith(c, "op0", op0), _arith(c, "op1", op1)
    _not_both_psum(c, ("data0", data0), ("data1", data1))
    reads = [("data0", data0), ("data1", data1)]
    _scalar_or_column(c, "initial", initial, data0.shape[0], reads)
    ins = c.record(VECTOR, reads, [("dst", dst)],
                   {"op0": op0.name, "op1": op1.name, "reverse0": reverse0, "reverse1": reverse1, "dtype": "float32"})
    if c.prog.compute:
        a, b = rows_f32(data0), rows_f32(data1)
        prev = rows_f32(initial)[:, 0] if isinstance(initial, NkiTensor) else torch.full((a.shape[0],), float(initial))
        out = torch.empty_like(a)
        for i in range(a.shape[1]):
            t = op0.binary(prev, a[:, i]) if reverse0 else op0.binary(a[:, i], prev)
            prev = out[:, i] = op1.binary(b[:, i], t) if reverse1 else op1.binary(t, b[:, i])
        dtypes.store(dst.arr, out)
    return ins


_CUMULATIVE_OPS = ("add", "subtract", "multiply", "maximum", "minimum")
_NO_32BIT_INT = (dtypes.int32, dtypes.uint32)


@instruction("TENSOR_SCALAR_CUMULATIVE", engines=(VECTOR,), cost=costs.per_element_cycles, color="#7fa7d9")
def tensor_scalar_cumulative(dst: NkiTensor, src: NkiTensor, op0: Any, op1: Any, imm0: Any, imm1: Any = None,
                             reduce_cmd: Any = reduce_cmd.reset_reduce, name: str | None = None) -> NkiInstruction:
    """Per partition, over the flattened free elements: reg = op1(op0(src[i], imm0), reg);
    dst[i] = reg. reg starts at op1's identity (reset_reduce), at imm1 (load_reduce) or at the
    Vector accumulator's value (reduce), and is left in the accumulator."""
    c = Issue("tensor_scalar_cumulative", name)
    dst, src = c.tensor("dst", dst), c.tensor("src", src)
    c.same_layout("dst", dst, ("src", src))
    op0, op1 = _arith(c, "op0", op0), _arith(c, "op1", op1)
    if op1.name not in _CUMULATIVE_OPS:
        c.fail(f"op1={op1!r} cannot accumulate; use one of {', '.join('nl.' + n for n in _CUMULATIVE_OPS)}")
    for role, t in (("src", src), ("dst", dst)):
        if t.dtype in _NO_32BIT_INT:
            c.fail(f"{role} dtype {t.dtype.name} is not supported (int32/uint32 are an ISA limitation of this "
                   f"instruction; use bf16, fp16, fp32, fp8, uint8, uint16, int8 or int16)")
    cmd = _command(c, reduce_cmd, _LOADING_CMDS, reads_out=False)
    P = src.shape[0]
    reads = [("src", src)]
    _scalar_or_column(c, "imm0", imm0, P, reads, fp32=True)
    _initial(c, cmd, "imm1", imm1, P, reads)
    ins = c.record(VECTOR, reads, [("dst", dst)],
                   {"op0": op0.name, "op1": op1.name, "reduce_cmd": cmd.name, "accumulate": True, "dtype": "float32"})
    if c.prog.compute:
        acc = _start(c, P, cmd, op1.name, imm1)
        x = scalar_stage(op0, rows_f32(src), imm0, False, False)
        reg = torch.from_numpy(acc.copy())
        out = torch.empty_like(x)
        for i in range(x.shape[1]):
            reg = out[:, i] = op1.binary(x[:, i], reg)
        acc[:] = reg.numpy()
        dtypes.store(dst.arr, out)
    return ins


# --- reductions through the Vector accumulator ---------------------------------------------------
_TSR_REDUCE = ("add", "multiply", "maximum", "minimum")


@instruction("TENSOR_SCALAR_REDUCE", engines=(VECTOR,), cost=costs.per_element_cycles, color="#6d9eeb")
def tensor_scalar_reduce(dst: NkiTensor, data: NkiTensor, op0: Any, operand0: Any, reduce_op: Any,
                         reduce_res: NkiTensor | None = None, reverse0: bool = False,
                         reduce_cmd: Any = reduce_cmd.reset_reduce, reduce_init: Any = None,
                         reduce_res_negate: bool = False, name: str | None = None) -> NkiInstruction:
    """dst = data op0 operand0 (one arithmetic op), and the free-axis reduce_op of the fp32 result
    folded into the Vector accumulator: reset_reduce starts at reduce_op's identity, load_reduce
    at reduce_init, reduce at the accumulator; reduce_res ([P, 1]) reads it out, negated if asked."""
    c = Issue("tensor_scalar_reduce", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    c.same_layout("dst", dst, ("data", data))
    op0 = c.op("op0", op0, "alu")
    if op0.bitvec:
        c.fail(f"op0={op0!r} is a bit-vector op; tensor_scalar_reduce takes arithmetic operators only")
    red = c.op("reduce_op", reduce_op, "any")
    if red.name not in _TSR_REDUCE:
        c.fail(f"reduce_op={red!r} is not supported; use one of {', '.join('nl.' + n for n in _TSR_REDUCE)}")
    if reverse0:
        c.fail("reverse0=True is not supported yet by tensor_scalar_reduce (NKI 0.6 API reference)")
    cmd = _command(c, reduce_cmd, _LOADING_CMDS, reads_out=reduce_res is not None)
    P = data.shape[0]
    reads = [("data", data)]
    if op0.binary is None:
        if operand0 not in (None, 0, 0.0):
            c.fail(f"op0={op0!r} is unary; operand0 must be None or 0, got {operand0!r}")
    else:
        _scalar_or_column(c, "operand0", operand0, P, reads)
    _initial(c, cmd, "reduce_init", reduce_init, P, reads)
    writes = [("dst", dst)]
    if reduce_res is not None:
        writes.append(("reduce_res", c.column("reduce_res", reduce_res, P, fp32=False)))
    ins = c.record(VECTOR, reads, writes,
                   {"op0": op0.name, "reduce_op": red.name, "reduce_cmd": cmd.name, "accumulate": True,
                    "dtype": "float32"})
    if c.prog.compute:
        y = scalar_stage(op0, rows_f32(data), operand0, False, False)
        dtypes.store(dst.arr, y)
        _fold(c, P, cmd, red, y, reduce_init)
        _read_out(c, P, reduce_res, negate=reduce_res_negate)
    return ins


def _fold(c: Issue, P: int, cmd: Any, red: Op, rows: torch.Tensor, init: Any = None) -> None:
    """Fold the per-partition reduction of `rows` into the Vector accumulator by `cmd`."""
    acc = _start(c, P, cmd, red.name, init)
    if cmd is _ReduceCmd.idle:
        acc[:] = np.nan         # "the accumulator state may still be modified" (module docstring)
    if cmd in (_ReduceCmd.idle, _ReduceCmd.reset):
        return
    part = _ROW_REDUCE[red.name](rows)
    acc[:] = red.binary(torch.from_numpy(acc.copy()), part).numpy()


def _read_out(c: Issue, P: int, reduce_res: NkiTensor | None, negate: bool = False) -> None:
    if reduce_res is not None:
        acc = torch.from_numpy(_accumulator(c, P).copy())
        dtypes.store(reduce_res.arr, -acc if negate else acc)


_SELECT_REDUCE_CMDS = (reduce_cmd.idle, reduce_cmd.reset_reduce, reduce_cmd.reduce)
_PREDICATE_DTYPES = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16)


@instruction("SELECT_REDUCE", engines=(VECTOR,), cost=costs.per_element_cycles, color="#8e7cc3")
def select_reduce(dst: NkiTensor, predicate: NkiTensor, on_true: NkiTensor, on_false: Any,
                  reduce_res: NkiTensor | None = None, reduce_cmd: Any = reduce_cmd.idle,
                  reduce_op: Any = OPS["maximum"], reverse_pred: bool = False, name: str | None = None) -> NkiInstruction:
    """dst = where(predicate != 0 (inverted by reverse_pred), on_true, on_false), with an optional
    max-reduction of the result into the Vector accumulator (reset_reduce starts at -inf)."""
    c = Issue("select_reduce", name)
    dst, predicate, on_true = c.tensor("dst", dst), c.tensor("predicate", predicate), c.tensor("on_true", on_true)
    c.same_layout("dst", dst, ("predicate", predicate), ("on_true", on_true))
    _not_both_psum(c, ("on_true", on_true), ("predicate", predicate))
    if predicate.dtype not in _PREDICATE_DTYPES:
        c.fail(f"predicate dtype {predicate.dtype.name} is not supported; use int8, uint8, int16 or uint16")
    if on_true.dtype in _NO_32BIT_INT or on_true.dtype == dtypes.bool_:
        c.fail(f"on_true dtype {on_true.dtype.name} is not supported (int32, uint32 and tfloat32 are excluded)")
    red = c.op("reduce_op", reduce_op, "any")
    if red.name != "maximum":
        c.fail(f"reduce_op={red!r} is not supported; select_reduce reduces with nl.maximum only")
    cmd = _command(c, reduce_cmd, _SELECT_REDUCE_CMDS, reads_out=reduce_res is not None)
    if not isinstance(reverse_pred, bool):
        c.fail(f"reverse_pred must be a bool, got {type(reverse_pred).__name__}")
    P = on_true.shape[0]
    reads = [("predicate", predicate), ("on_true", on_true)]
    _scalar_or_column(c, "on_false", on_false, P, reads)
    writes = [("dst", dst)]
    if reduce_res is not None:
        writes.append(("reduce_res", c.column("reduce_res", reduce_res, P, fp32=False)))
        if not dtypes.is_float(reduce_res.dtype):
            c.fail(f"reduce_res dtype {reduce_res.dtype.name} must be a float type")
    ins = c.record(VECTOR, reads, writes,
                   {"reduce_op": red.name, "reduce_cmd": cmd.name, "accumulate": cmd is not _ReduceCmd.idle,
                    "dtype": "float32"})
    if c.prog.compute:
        mask = dtypes.load_int(predicate.arr).reshape(P, -1) != 0
        if reverse_pred:
            mask = ~mask
        y = torch.where(mask, rows_f32(on_true), _value(on_false))
        dtypes.store(dst.arr, y)
        _fold(c, P, cmd, red, y)
        _read_out(c, P, reduce_res)
    return ins


def _as_fp32(value: float) -> np.float32:
    """The fp32 a scalar operand becomes (out of range: +-inf, without numpy's overflow warning)."""
    with np.errstate(over="ignore"):
        return np.float32(value)


@instruction("RANGE_SELECT", engines=(VECTOR,), cost=costs.per_element_cycles, color="#b4a7d6")
def range_select(dst: NkiTensor, on_true_tile: NkiTensor, comp_op0: Any, comp_op1: Any, bound0: NkiTensor,
                 bound1: NkiTensor, reduce_cmd: Any = reduce_cmd.reset_reduce, reduce_res: NkiTensor | None = None,
                 reduce_op: Any = OPS["maximum"], range_start: int = 0, on_false_value: Any = ...,
                 name: str | None = None) -> NkiInstruction:
    """dst = on_true_tile where comp_op0(j, bound0) and comp_op1(j, bound1) for the fp32 free
    index j = range_start + position, else FP32_MIN; the max of dst folds into the Vector accumulator."""
    c = Issue("range_select", name)
    dst, on_true = c.tensor("dst", dst), c.tensor("on_true_tile", on_true_tile)
    c.same_layout("dst", dst, ("on_true_tile", on_true))
    if not dtypes.is_float(on_true.dtype):
        c.fail(f"on_true_tile dtype {on_true.dtype.name} must be a float type")
    cmps = []
    for role, op in (("comp_op0", comp_op0), ("comp_op1", comp_op1)):
        op = c.op(role, op, "alu")
        if op.name not in COMPARISONS:
            c.fail(f"{role}={op!r} is not supported; use one of {', '.join('nl.' + n for n in COMPARISONS)}")
        cmps.append(op)
    P = on_true.shape[0]
    reads = [("on_true_tile", on_true)]
    for role, b in (("bound0", bound0), ("bound1", bound1)):
        reads.append((role, c.column(role, c.tensor(role, b), P, fp32=True)))
    red = c.op("reduce_op", reduce_op, "any")
    if red.name != "maximum":
        c.fail(f"reduce_op={red!r} is not supported; range_select reduces with nl.maximum only")
    cmd = _command(c, reduce_cmd, _SELECT_REDUCE_CMDS, reads_out=reduce_res is not None)
    if isinstance(range_start, bool) or not isinstance(range_start, (int, np.integer)):
        c.fail(f"range_start must be a compile-time int, got {type(range_start).__name__} {range_start!r}")
    # compared as the fp32 the engine receives: -3.4028235e38 (a common literal) rounds to FP32_MIN exactly
    if on_false_value is not ... and _as_fp32(on_false_value) != np.float32(FP32_MIN):
        c.fail(f"on_false_value must be FP32_MIN ({FP32_MIN!r}) on this hardware, got {on_false_value!r}")
    n = on_true.elements_per_partition
    if range_start < 0 or range_start + n > 1 << 24:
        c.fail(f"range_start + free index spans [{range_start}, {range_start + n}); it must stay within "
               f"[0, 2^24] (exact in fp32)")
    writes = [("dst", dst)]
    if reduce_res is not None:
        writes.append(("reduce_res", c.column("reduce_res", reduce_res, P, fp32=False)))
    ins = c.record(VECTOR, reads, writes,
                   {"comp_op0": cmps[0].name, "comp_op1": cmps[1].name, "reduce_cmd": cmd.name,
                    "accumulate": cmd is not _ReduceCmd.idle, "dtype": "float32"})
    if c.prog.compute:
        j = torch.arange(n, dtype=torch.float32) + float(range_start)
        mask = (cmps[0].binary(j[None, :], rows_f32(bound0)) != 0) & (cmps[1].binary(j[None, :], rows_f32(bound1)) != 0)
        y = torch.where(mask, rows_f32(on_true), torch.tensor(FP32_MIN))
        dtypes.store(dst.arr, y)
        _fold(c, P, cmd, red, y)
        _read_out(c, P, reduce_res)
    return ins


# --- predicated copy -----------------------------------------------------------------------------
_COPY_PREDICATES = (dtypes.uint8, dtypes.uint16, dtypes.uint32)


@instruction("TENSOR_COPY_PREDICATED", engines=(VECTOR,), cost=costs.per_element_cycles, color="#a4c2f4")
def tensor_copy_predicated(dst: NkiTensor, src: Any, predicate: NkiTensor, reverse_pred: bool = False,
                           name: str | None = None) -> NkiInstruction:
    """dst[i] = src[i] (or the number src) where predicate[i] != 0 (inverted by reverse_pred);
    other dst elements keep their values. A number src is materialized in dst's dtype (an int exactly)."""
    c = Issue("tensor_copy_predicated", name)
    dst, predicate = c.tensor("dst", dst), c.tensor("predicate", predicate)
    c.same_layout("dst", dst, ("predicate", predicate))
    if predicate.dtype not in _COPY_PREDICATES:
        c.fail(f"predicate dtype {predicate.dtype.name} is not supported; use uint8, uint16 or uint32")
    reads = [("predicate", predicate), ("dst", dst)]      # dst: the elements it keeps
    page_07 = nki_versions.applies("copy-predicated-scalar-src")
    if isinstance(src, NkiTensor):
        src = c.tensor("src", src)
        c.same_layout("dst", dst, ("src", src))
        _not_both_psum(c, ("src", src), ("predicate", predicate))
        if src.dtype != dst.dtype:
            c.fail(f"src dtype {src.dtype.name} != dst dtype {dst.dtype.name}; they must be the same")
        if reverse_pred and page_07:
            c.fail(f"reverse_pred=True needs a scalar src on NKI 0.7, src is a tile; invert the predicate tile "
                   f"instead ({_COPY_PREDICATED_PAGE})")
        reads.insert(0, ("src", src))
    else:
        c.number("src", src)
        if page_07:
            _scalar_kind_matches(c, src, dst)
    ins = c.record(VECTOR, reads, [("dst", dst)], {"dtype": dst.dtype.name})
    if c.prog.compute:
        mask = dtypes.load_int(predicate.arr).numpy().reshape(dst.shape) != 0
        if reverse_pred:
            mask = ~mask
        if isinstance(src, NkiTensor):
            value = src.arr.reshape(dst.shape).copy()
        else:
            value = np.empty(dst.shape, dst.dtype)
            dtypes.store(value, torch.full(dst.shape, src, dtype=torch.int64 if _is_int(src) else torch.float32))
        np.copyto(dst.arr, value, where=mask)
    return ins


_COPY_PREDICATED_PAGE = nki_versions.ROWS["copy-predicated-scalar-src"].page.split("; ")[0]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer))


def _scalar_kind_matches(c: Issue, src: Any, dst: NkiTensor) -> None:
    """NKI 0.7: a number src needs dst of its kind (float or integer); the bit widths may differ."""
    if _is_int(src) != (dst.dtype in dtypes.INTS):
        kind, needs = ("an int", "an integer") if _is_int(src) else ("a float", "a float")
        c.fail(f"src={src!r} is {kind}, so dst needs {needs} dtype on NKI 0.7, got {dst.dtype.name} "
               f"({_COPY_PREDICATED_PAGE})")


# --- batch-norm statistics -----------------------------------------------------------------------
@instruction("BN_STATS", engines=(VECTOR,), cost=costs.per_element_cycles, color="#45818e")
def bn_stats(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    """Per partition, 6 values: (count, mean, variance*count) of the even-position and then of the
    odd-position free elements (at most 512 per partition), fp32."""
    c = Issue("bn_stats", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    if data.elements_per_partition > BN_STATS_FMAX:
        c.fail(f"data has {data.elements_per_partition} elements per partition; bn_stats takes at most "
               f"{BN_STATS_FMAX} (nl.tile_size.bn_stats_fmax): split the tile and combine with bn_aggr")
    _per_partition_out(c, dst, data, 6, "6 statistics per partition")
    ins = c.record(VECTOR, [("data", data)], [("dst", dst)], {"dtype": "float32"})
    if c.prog.compute:
        x = rows_f32(data)
        stats = [_moments(x[:, 0::2]), _moments(x[:, 1::2])]
        dtypes.store(dst.arr, torch.cat([torch.stack(s, dim=1) for s in stats], dim=1))
    return ins


def _per_partition_out(c: Issue, dst: NkiTensor, data: NkiTensor, n: int, what: str) -> None:
    if dst.shape[0] != data.shape[0] or dst.elements_per_partition != n:
        c.fail(f"dst must be [{data.shape[0]}, {n}] ({what}), got {dst.shape}")


def _moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    n = x.shape[1]
    count = torch.full((x.shape[0],), float(n))
    if n == 0:
        return count, torch.zeros_like(count), torch.zeros_like(count)
    mean = x.sum(dim=1) / n
    return count, mean, ((x - mean[:, None]) ** 2).sum(dim=1)


@instruction("BN_AGGR", engines=(VECTOR,), cost=costs.per_element_cycles, color="#76a5af")
def bn_aggr(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    """Combine (count, mean, variance*count) triples per partition into (mean, variance), fp32."""
    c = Issue("bn_aggr", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    if data.elements_per_partition % 3:
        c.fail(f"data has {data.elements_per_partition} elements per partition; bn_aggr reads (count, mean, "
               f"variance*count) triples, so it must be a multiple of 3")
    _per_partition_out(c, dst, data, 2, "mean, variance per partition")
    ins = c.record(VECTOR, [("data", data)], [("dst", dst)], {"dtype": "float32"})
    if c.prog.compute:
        t = rows_f32(data).reshape(data.shape[0], -1, 3)
        count, mean, m2 = t[..., 0], t[..., 1], t[..., 2]
        total = count.sum(dim=1)
        grand = (count * mean).sum(dim=1) / total
        var = (m2.sum(dim=1) + (count * (mean - grand[:, None]) ** 2).sum(dim=1)) / total
        dtypes.store(dst.arr, torch.stack([grand, var], dim=1))
    return ins


# --- cross-partition shuffle ---------------------------------------------------------------------
QUADRANT = 32
KEEP = 255      # shuffle_mask value: leave that output partition unmodified


@instruction("NC_STREAM_SHUFFLE", engines=(VECTOR,), cost=costs.per_element_cycles, color="#674ea7")
def nc_stream_shuffle(dst: NkiTensor, src: NkiTensor, shuffle_mask: Any, name: str | None = None) -> NkiInstruction:
    """Within each 32-partition quadrant, dst partition i = src partition shuffle_mask[i]
    (255: unmodified); the same mask serves every quadrant; in place is allowed."""
    c = Issue("nc_stream_shuffle", name)
    dst, src = c.tensor("dst", dst), c.tensor("src", src)
    if src.dtype != dst.dtype:
        c.fail(f"src dtype {src.dtype.name} != dst dtype {dst.dtype.name}; they must be the same")
    if src.elements_per_partition != dst.elements_per_partition:
        c.fail(f"src has {src.elements_per_partition} elements per partition but dst has "
               f"{dst.elements_per_partition}; they must match")
    mask = list(shuffle_mask) if isinstance(shuffle_mask, (list, tuple)) else None
    if mask is None or len(mask) != QUADRANT:
        c.fail(f"shuffle_mask must be a list of {QUADRANT} ints, got {shuffle_mask!r}")
    for i, m in enumerate(mask):
        if isinstance(m, bool) or not isinstance(m, (int, np.integer)) or not (0 <= m < QUADRANT or m == KEEP):
            c.fail(f"shuffle_mask[{i}]={m!r} must be a source partition 0..31 of the quadrant or {KEEP} (keep)")
    active = -(-max(src.shape[0], dst.shape[0]) // QUADRANT) * QUADRANT
    starts = {128: (0,), 96: (0,), 64: (0, 64), 32: (0, 32, 64, 96)}[active]
    for role, t in (("src", src), ("dst", dst)):
        start = _start_partition(t)
        if start not in starts:
            c.fail(f"{role} starts at partition {start}; with {active} active partitions it must start at "
                   + "/".join(map(str, starts)))
    for q in range(0, dst.shape[0], QUADRANT):
        for i, m in enumerate(mask):
            if m != KEEP and q + i < dst.shape[0] and q + m >= src.shape[0]:
                c.fail(f"shuffle_mask[{i}]={m} reads partition {q + m} of src, which has only {src.shape[0]}")
    ins = c.record(VECTOR, [("src", src), ("dst", dst)], [("dst", dst)],
                   {"dtype": dst.dtype.name})
    if c.prog.compute:
        rows_src = src.arr.reshape(src.shape[0], -1).copy()      # in place: read everything first
        out = dst.arr.reshape(dst.shape[0], -1).copy()
        for q in range(0, dst.shape[0], QUADRANT):
            for i, m in enumerate(mask):
                if m != KEEP and q + i < dst.shape[0]:
                    out[q + i] = rows_src[q + m]
        dst.arr[...] = out.reshape(dst.shape)
    return ins


def _start_partition(t: NkiTensor) -> int:
    return t.byte_offset // t.storage.bytes_per_partition


__all__ = ["scalar_tensor_tensor", "tensor_tensor_scan", "tensor_scalar_cumulative", "tensor_scalar_reduce",
           "select_reduce", "range_select", "tensor_copy_predicated", "bn_stats", "bn_aggr", "nc_stream_shuffle"]
