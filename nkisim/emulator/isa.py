"""`nki.isa` for trn2 (NeuronCore-v3): the instructions the workshop kernels use.

Every function validates its operands the way the real toolchain does (see nkisim/README.md,
"Validation rules"), appends one `Instruction` to the launch trace, then (unless dry run)
computes: inputs are read as fp32, the math runs in fp32, the result is cast to `dst.dtype`
with round-to-nearest-even. Engines and profiler opcodes follow Neuron Explorer's names.

Choices where the docs are silent or ambiguous (each is tested):
  * `activation` with `reduce_cmd` reduce/reset_reduce and `reduce_op=None` reduces with add (the
    only legal reduce op on trn2); `reduce_cmd.load_reduce` is not emulated (undocumented).
  * comparison and logical ALU ops yield 1.0 / 0.0 in the destination dtype.
  * an `activation` input outside an op's documented valid range gives NaN and a warning
    (`NkiInvalidOutputWarning`): the hardware output there is invalid, its polynomial unpublished.
  * `memset` accepts an int value for a float tile (it is exactly representable), not vice versa.
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from ..costmodel import costs
from ..vocabulary import DMA, ENGINE_BY_NISA_NAME, GPSIMD, SCALAR, VECTOR, dma_queue, instruction
from . import coverage, dtypes, nki_versions, views
from .enums import (dge_mode, engine, get_nc_version, gpsimd_engine, nc_version, oob_mode,  # noqa: F401  (nisa.*)
                    reduce_cmd, scalar_engine, tensor_engine, unknown_engine, vector_engine)
from .errors import ABSENT, reject_keywords
from .errors import NkiInvalidOutputWarning, NkiValidationError  # noqa: F401  (NkiValidationError: nisa.*)
from .isa_dma_transpose import dma_transpose  # noqa: F401  (instruction families in modules of their own)
from .isa_tensor import matmul_perf_mode, nc_matmul, nc_transpose  # noqa: F401
from .issue import Issue, NkiInstruction, lowering, rows_bits, rows_f32, rows_int, scalar_stage, spelled  # noqa: F401  (nl.*)
from .ops import OPS, Op
from .tensor import PSUM, NkiTensor, contiguous_pieces
from .trace import DmaInfo

# --- data movement -------------------------------------------------------------------------------
@instruction("DMA", engines=(DMA,), cost=None, color="#4c9a5b")
def dma_copy(dst: NkiTensor, src: NkiTensor, priority: Any = None, oob_mode: Any = oob_mode.error,
             dge_mode: Any = dge_mode.unknown, engine: Any = engine.unknown, name: str | None = None) -> NkiInstruction:
    """dst = src over the row-major order of both views; only element counts must match."""
    c = Issue("dma_copy", name)
    dst, src = c.tensor("dst", dst, on_chip=False, indirect=True), c.tensor("src", src, on_chip=False, indirect=True)
    c.enum("oob_mode", oob_mode, _OobMode)
    c.enum("dge_mode", dge_mode, _DgeMode)
    c.enum("engine", engine, _Engine)
    if src.buffer is PSUM:
        c.fail("src is in psum; PSUM is not a DMA source since NKI 0.3 (copy it to SBUF with nisa.tensor_copy first)")
    if dst.buffer is PSUM:
        c.fail("dst is in psum; dma_copy moves data between HBM and SBUF (write PSUM with compute instructions)")
    if priority is not None:
        c.fail(f"priority={priority!r} is NeuronCore-v4 (trn3) only; trn2 DMAs take no priority")
    if src.arr.size != dst.arr.size:
        c.fail(f"src has {src.size} elements {src.shape} but dst has {dst.size} {dst.shape}; element counts must match")
    if engine is not _Engine.unknown and dge_mode is not _DgeMode.hwdge:
        c.fail(f"engine={engine!r} is only valid with dge_mode=nisa.dge_mode.hwdge, got dge_mode={dge_mode!r}")
    if engine not in (_Engine.unknown, _Engine.sync, _Engine.scalar):
        c.fail(f"engine={engine!r}: a hwdge DMA is triggered from nisa.engine.sync or nisa.engine.scalar")
    if src.dtype != dst.dtype and dtypes.int64 in (src.dtype, dst.dtype):
        c.fail(f"src dtype {src.dtype.name} != dst dtype {dst.dtype.name}: a casting DMA goes through fp32, which does "
               f"not hold every 64-bit integer; nkisim moves nl.int64 between int64 tensors only (not emulated)")
    if dge_mode is _DgeMode.hwdge and src.dtype != dst.dtype:
        # "Enforces matching source and destination element types when using dge_mode=dge_mode.hwdge. Use .view()
        # to reinterpret types." (NKI 0.3.0, SDK:release-notes/components/nki.rst)
        c.fail(f"dge_mode=hwdge copies raw bytes, src dtype {src.dtype.name} != dst dtype {dst.dtype.name} "
               f"(use dge_mode none/swdge for a casting DMA, or .view() to reinterpret)")
    queue = dma_queue(dge_mode._name_, ENGINE_BY_NISA_NAME.get(engine._name_))
    chip = dst if dst.buffer.on_chip else src if src.buffer.on_chip else None
    nbytes = dst.arr.nbytes
    parts = chip.partitions if chip is not None else 1
    mode = dge_mode._name_      # Enum.name is a descriptor, several times slower than the attribute
    indirect = any(t.indirection for t in (src, dst))
    info = DmaInfo(_DIRECTION[src.buffer.on_chip and src.buffer.name, dst.buffer.on_chip and dst.buffer.name],
                   nbytes, parts, nbytes // parts if parts else 0, mode, queue, src.dtype != dst.dtype,
                   0 if indirect else contiguous_pieces(src, dst))
    indexes = [(f"{role} index", t.indirection.index) for role, t in (("src", src), ("dst", dst))
               if t.indirection and isinstance(t.indirection.index, NkiTensor)]     # not registers: no memory
    for role, t in (("src", src), ("dst", dst)):
        if t.indirection is not None and t.indirection.kind == "vector":
            _one_index_per_partition(c, role, t.indirection)
    if indirect and dge_mode in (_DgeMode.none, _DgeMode.hwdge) and any(
            t.indirection and t.indirection.kind == "vector" for t in (src, dst)):
        c.fail(f"a gather/scatter (vector_offset) DMA needs software DGE, got dge_mode={dge_mode!r}")
    if indirect and dge_mode is _DgeMode.none:
        # "When either sw_dge or hw_dge mode is used, the src and dst tensors can have a dynamic start address"
        # (dma_copy page); dge_mode none "Cannot handle dynamic (runtime-computed) addresses" (the DGE deep dive:
        # its descriptors are built at compile time)
        c.fail("dge_mode=none builds the descriptors at compile time, so it takes no dynamic (runtime) start "
               "address; use dge_mode swdge or hwdge (or unknown) for a scalar_offset / runtime-indexed view")
    ins = c.record(DMA, [("src", src)] + indexes, [("dst", dst)],
                   {"dge_mode": mode, "engine": engine._name_, "dtype": dtypes.name_of(dst.dtype)},
                   dma=info, epp=chip.elements_per_partition if chip is not None else dst.size)
    race = c.race_check([src], [dst], oob_skip=oob_mode is _OobMode.skip)
    if indirect:
        if c.prog.compute:
            _indirect_copy(c, dst, src, oob_mode is _OobMode.skip)
        race()
        return ins
    if c.prog.compute:
        if src.dtype == dst.dtype:
            dtypes.copy_bits(dst.arr, src.arr)
        else:
            dtypes.store(dst.arr, dtypes.load_f32(src.arr))
    race()
    return ins


def _one_index_per_partition(c: Issue, role: str, ind: views.Indirection) -> None:
    """dma_copy's gather/scatter: a [P, 1] index tile, one row index per partition, and a pattern
    whose leading (indexed) dim has those P rows (the dma_copy API page, "Indirect addressing")."""
    index = ind.index
    if index.elements_per_partition != 1:
        c.fail(f"{role}'s vector_offset must be a [P, 1] tile (one row index per partition), got shape {index.shape}")
    if views.pattern_rows(ind) != index.shape[0]:
        c.fail(f"{role}'s pattern has {views.pattern_rows(ind)} rows in its leading dim; it must equal vector_offset's "
               f"{index.shape[0]} partitions")


def _indirect_copy(c: Issue, dst: NkiTensor, src: NkiTensor, skip: bool) -> None:
    """A DMA through a dynamic (scalar/vector offset) view: the index tiles are read now, accesses
    outside the tensor fail (oob_mode.error) or are skipped, leaving their destination untouched."""
    s_flat, s_idx, s_ok = views.element_indices(src, skip, c.fail)
    d_flat, d_idx, d_ok = views.element_indices(dst, skip, c.fail)
    ok = s_ok & d_ok
    values = s_flat[s_idx[ok]]
    if src.dtype != dst.dtype:
        cast = np.empty(values.shape, dst.dtype)
        dtypes.store(cast, dtypes.load_f32(values))
        values = cast
    d_flat[d_idx[ok]] = values


# DmaInfo.direction by (src, dst) on-chip buffer name, False for any HBM buffer
_DIRECTION = {(a, b): f"{a or 'hbm'}->{b or 'hbm'}" for a in (False, "sbuf", "psum") for b in (False, "sbuf", "psum")}


# the parameters shadow the enum classes inside dma_copy; keep module-level aliases
_OobMode, _DgeMode, _Engine = oob_mode, dge_mode, engine


@instruction("TENSOR_COPY", engines=(VECTOR, SCALAR, GPSIMD), cost=costs.streaming_cycles, color="#9fc5e8")
def tensor_copy(dst: NkiTensor, src: NkiTensor, engine: Any = engine.unknown, name: str | None = None) -> NkiInstruction:
    """dst = src on Vector (default), Scalar or GpSimd; bit-exact for equal dtypes, else via fp32."""
    c = Issue("tensor_copy", name)
    dst, src = c.tensor("dst", dst), c.tensor("src", src)
    c.same_layout("dst", dst, ("src", src))
    lane = c.lane(engine)
    ins = c.record(lane, [("src", src)], [("dst", dst)], {"dtype": "float32"})
    if c.prog.compute:
        if src.dtype == dst.dtype:
            dtypes.copy_bits(dst.arr, src.arr)
        else:
            dtypes.store(dst.arr, rows_f32(src))
    return ins


@instruction("MEMSET", engines=(VECTOR, GPSIMD), cost=costs.memset_cycles, color="#cccccc")
def memset(dst: NkiTensor, value: Any, engine: Any = engine.unknown, name: str | None = None) -> NkiInstruction:
    """Fill dst with a compile-time constant (Vector or GpSimd)."""
    c = Issue("memset", name)
    dst = c.tensor("dst", dst)
    c.number("value", value)
    lane = c.lane(engine)
    is_int = dst.dtype in dtypes.INTS
    if is_int and not isinstance(value, (int, np.integer)):
        # the memset page (SDK:nki/api/nki/isa/__init__.py, memset) takes "a compile-time constant value" for
        # every dtype: a whole-number float (nki-library's 0.0 into a uint32 tile) is that integer; a fractional
        # one has no documented conversion, so it stays an error
        if not float(value).is_integer():
            c.fail(f"value {value!r} is not a whole number but dst dtype is {dst.dtype.name}; use an integer value")
        value = int(value)
    if is_int and dst.dtype != dtypes.bool_ and not np.iinfo(dst.dtype).min <= value <= np.iinfo(dst.dtype).max:
        c.fail(f"value {value} is out of range for dst dtype {dst.dtype.name}")
    ins = c.record(lane, [], [("dst", dst)], {"value": value, "dtype": dst.dtype.name})
    if c.prog.compute:
        if is_int:
            dst.arr[...] = value
        else:
            # an fp32 constant such as -3.4028235e38 (nki-library's FLOAT32_MIN) rounds to -FLT_MAX
            dtypes.store(dst.arr, torch.full(dst.shape, float(np.float32(value)), dtype=torch.float32))
    return ins


# --- element-wise arithmetic ---------------------------------------------------------------------
@instruction("TENSOR_TENSOR", engines=(VECTOR, GPSIMD), cost=costs.tensor_tensor_cycles, color="#3a73b5")
def tensor_tensor(dst: NkiTensor, data1: NkiTensor, data2: NkiTensor, op: Any, engine: Any = engine.unknown,
                  name: str | None = None) -> NkiInstruction:
    """dst = op(data1, data2) element-wise, fp32 math (raw integer bits for bit-vector ops)."""
    c = Issue("tensor_tensor", name)
    dst, data1, data2 = c.tensor("dst", dst), c.tensor("data1", data1), c.tensor("data2", data2)
    c.same_layout("dst", dst, ("data1", data1), ("data2", data2))
    op = c.op("op", op, "alu")
    if op.binary is None:
        c.fail(f"op={op!r} is unary; tensor_tensor needs a two-operand ALU op")
    if data1.buffer is PSUM and data2.buffer is PSUM:
        c.fail("data1 and data2 are both in psum; at most one tensor_tensor input may be in PSUM")
    operands = (dst, data1, data2)
    c.integer_operands(op, ("dst", dst), ("data1", data1), ("data2", data2))
    # int32/uint32-only operands default to GpSimd, but "the automatic GpSimd dispatch for int32/uint32
    # falls back to Vector Engine when any operand resides in PSUM" (SDK:nki/api/nki/isa/__init__.py)
    int32_only = all(t.dtype in (dtypes.int32, dtypes.uint32) for t in operands)
    in_psum = any(t.buffer is PSUM for t in operands)
    lane = c.lane(engine, GPSIMD if int32_only and not in_psum else VECTOR)
    if op.name == "power":
        lane = GPSIMD
        if in_psum:
            c.fail(f"op={op!r} runs on GpSimd, which cannot access PSUM operands")
    ins = c.record(lane, [("data1", data1), ("data2", data2)], [("dst", dst)],
                   {"op": op.name, "dtype": "int" if op.bitvec else "float32"})
    native_int = int32_only and lane == GPSIMD and op.name in _NATIVE_INT_OPS
    if c.prog.compute:
        if native_int:
            dtypes.store(dst.arr, dtypes.wrap_int(op.binary(rows_int(data1), rows_int(data2)), dst.dtype))
        elif op.bitvec:
            dtypes.store(dst.arr, dtypes.wrap_int(op.binary(rows_bits(data1), rows_bits(data2)), dst.dtype))
        else:
            dtypes.store(dst.arr, op.binary(rows_f32(data1), rows_f32(data2)))
    return ins


# "When all input/output tiles are int32 or uint32, the operation defaults to GpSimd Engine, which uses
# native integer arithmetic. This ensures exact results for all 32-bit integer values" (nki.isa.tensor_tensor,
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.tensor_tensor.html).
# Integer results wrap at 32 bits (two's complement). nl.power (negative exponents) and nl.mod / nl.fmod
# (nkisim's own lowerings; a zero divisor) keep the fp32 route.
_NATIVE_INT_OPS = frozenset({"add", "subtract", "multiply", "maximum", "minimum", "equal", "not_equal",
                             "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
                             "logical_xor"})


_SCALAR_ENGINE_PAIRS = {("multiply", "add"), ("multiply", None), ("add", None)}


@instruction("TENSOR_SCALAR", engines=(VECTOR, SCALAR, GPSIMD), cost=costs.streaming_cycles,
             color="#6aa6e0")
def tensor_scalar(dst: NkiTensor, data: NkiTensor, op0: Any, operand0: Any, reverse0: bool = False, op1: Any = None,
                  operand1: Any = None, reverse1: bool = False, engine: Any = engine.unknown,
                  name: str | None = None) -> NkiInstruction:
    """dst = (data op0 operand0) op1 operand1; reverseN swaps a stage's operands; operands are
    numbers or fp32 [P, 1] tiles broadcast along the free dims. One or two ops cost the same."""
    c = Issue("tensor_scalar", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    c.same_layout("dst", dst, ("data", data))
    stages = [(c.op("op0", op0, "alu"), operand0, reverse0, "0")]
    if op1 is None:
        if operand1 is not None:
            c.fail("operand1 is set but op1 is None; set both or neither")
    elif operand1 is None:
        c.fail(f"op1={spelled(op1)} is set but operand1 is None; set both or neither")
    else:
        stages.append((c.op("op1", op1, "alu"), operand1, reverse1, "1"))
    if len({op.bitvec for op, *_ in stages}) > 1:
        c.fail("op0 and op1 must both be arithmetic or both be bit-vector ops")
    c.integer_operands(stages[0][0], ("dst", dst), ("data", data))
    reads = [("data", data)]
    for op, operand, reverse, i in stages:
        if not isinstance(reverse, bool):
            c.fail(f"reverse{i} must be a bool, got {type(reverse).__name__}")
        if op.unary is not None and op.binary is None:
            if operand not in (None, 0, 0.0):
                c.fail(f"op{i}={op!r} is unary; operand{i} must be None or 0, got {operand!r}")
        elif isinstance(operand, NkiTensor):
            reads.append((f"operand{i}", c.column(f"operand{i}", operand, data.shape[0], fp32=not op.bitvec)))
        else:
            c.number(f"operand{i}", operand)
    names = tuple(op.name for op, *_ in stages) + ((None,) if len(stages) == 1 else ())
    lane = c.lane(engine)
    if lane == SCALAR and names not in _SCALAR_ENGINE_PAIRS:
        c.fail(f"the Scalar engine supports only (multiply, add), (multiply, None), (add, None) op pairs, got {names}")
    if lane == GPSIMD and names[0] != "rsqrt":
        c.fail(f"engine=nisa.engine.gpsimd is only allowed for nl.rsqrt, got op0={stages[0][0]!r}")
    attrs = {"op0": names[0], "op1": names[1], "reverse0": reverse0, "reverse1": reverse1,
             "dtype": "int" if stages[0][0].bitvec else "float32"}
    ins = c.record(lane, reads, [("dst", dst)], attrs)
    if c.prog.compute:
        bitvec = stages[0][0].bitvec
        x = rows_bits(data) if bitvec else rows_f32(data)
        width = (1 << 8 * data.dtype.itemsize) - 1      # a bit-vector stage's result keeps the element's bits
        for op, operand, reverse, _ in stages:
            x = scalar_stage(op, x, operand, reverse, bitvec)
            x = x & width if bitvec else x
        dtypes.store(dst.arr, dtypes.wrap_int(x, dst.dtype) if bitvec else x)
    return ins


@instruction("RECIPROCAL", engines=(VECTOR,), cost=costs.reciprocal_cycles, color="#c94c4c")
def reciprocal(dst: NkiTensor, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    """dst = 1 / data on the Vector engine (more precise than the Scalar-engine activation)."""
    c = Issue("reciprocal", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    c.same_layout("dst", dst, ("data", data))
    ins = c.record(VECTOR, [("data", data)], [("dst", dst)], {"dtype": "float32"})
    if c.prog.compute:
        dtypes.store(dst.arr, torch.reciprocal(rows_f32(data)))
    return ins


# --- Scalar engine -------------------------------------------------------------------------------
@instruction("ACTIVATE", engines=(SCALAR,), cost=costs.per_element_cycles, color="#e8852f")
def activation(dst: NkiTensor, op: Any, data: NkiTensor, bias: Any = None, scale: Any = 1.0, reduce_op: Any = None,
               reduce_res: NkiTensor | None = None, reduce_cmd: Any = reduce_cmd.idle, engine: Any = ABSENT,
               name: str | None = None) -> NkiInstruction:
    """dst = op(data * scale + bias) on the Scalar engine, with an optional free-axis sum into the
    per-program 128-lane fp32 accumulator: reset/reset_reduce zero it, reduce/reset_reduce add
    the row sums of the fp32 activated values, `reduce_res` (a [P, 1] tile) reads it out.
    `engine` (NKI 0.7) is Scalar on trn2."""
    return _activate("activation", dst, op, data, bias, scale, reduce_op, reduce_res, reduce_cmd, name, engine)


def _activation_engine(c: Issue, value: Any) -> None:
    """activation's `engine=`: a keyword of NKI 0.7 only, where GpSimd needs NeuronCore-v4; nkisim
    emulates trn2, so the Scalar engine (the default) runs every activation."""
    if not nki_versions.applies("isa-activation-engine"):
        reject_keywords(f"nisa.{c.isa}", nki_versions.release(), engine=value)
    elif value is _Engine.gpsimd:
        c.fail(f"engine=nisa.engine.gpsimd runs activations on NeuronCore-v4 (trn3) and newer only; nkisim emulates "
               f"trn2 (NeuronCore-v3), where the Scalar engine runs them (and only it has the accumulator): pass "
               f"engine=nisa.engine.scalar or leave the default ({nki_versions.ROWS['isa-activation-engine'].page})")
    elif value is not ABSENT:
        c.lane(value)


_ReduceCmd = reduce_cmd


@instruction("ACTIVATE", engines=(SCALAR,), cost=costs.per_element_cycles, color="#e8852f")
def activation_reduce(dst: NkiTensor, op: Any, data: NkiTensor, reduce_op: Any, reduce_res: NkiTensor | None,
                      bias: Any = None, scale: Any = 1.0, name: str | None = None) -> NkiInstruction:
    """`activation` with reduce_cmd=reset_reduce: dst = op(data*scale+bias), reduce_res = row sums."""
    return _activate("activation_reduce", dst, op, data, bias, scale, reduce_op, reduce_res,
                     _ReduceCmd.reset_reduce, name, ABSENT)


def _activate(isa: str, dst: Any, op: Any, data: Any, bias: Any, scale: Any, reduce_op: Any, reduce_res: Any,
              cmd: Any, name: Any, engine_arg: Any) -> NkiInstruction:
    c = Issue(isa, name)
    _activation_engine(c, engine_arg)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    c.same_layout("dst", dst, ("data", data))
    op = c.op("op", op, "act")
    c.enum("reduce_cmd", cmd, _ReduceCmd)
    if cmd is _ReduceCmd.load_reduce:
        c.fail("reduce_cmd=load_reduce is not emulated by nkisim (its semantics are undocumented)")
    if reduce_op is not None:
        if c.op("reduce_op", reduce_op, "any") is not OPS["add"]:
            c.fail(f"reduce_op must be nl.add on trn2, got {spelled(reduce_op)}")
    elif isa == "activation_reduce":
        c.fail("reduce_op must be nl.add, got None")
    P = data.shape[0]
    reads = [("data", data)]
    for role, value in (("scale", scale), ("bias", bias)):
        if isinstance(value, NkiTensor):
            reads.append((role, c.column(role, value, P, fp32=role == "scale")))
        elif value is not None:
            c.number(role, value)
    if scale is None:
        c.fail("scale must be a number or a float32 [P, 1] tile, got None")
    writes = [("dst", dst)]
    if reduce_res is not None:
        writes.append(("reduce_res", c.column("reduce_res", reduce_res, P, fp32=False)))
    accumulate = cmd in (_ReduceCmd.reduce, _ReduceCmd.reset_reduce)
    attrs = {"func": op.name, "dtype": "float32", "reduce_cmd": cmd.name}
    if accumulate:
        attrs["accumulate"] = True
    if reduce_res is not None:
        attrs["reads_accumulator"] = True
        attrs["accumulate"] = True
    ins = c.record(SCALAR, reads, writes, attrs)
    if c.prog.compute:
        if (op.act_bf16 is not None and cmd is _ReduceCmd.idle and reduce_res is None and bias is None
                and not isinstance(scale, NkiTensor) and scale == 1.0 and _bf16_shortcut(op, dst, data)):
            return ins
        x = rows_f32(data)
        if isinstance(scale, NkiTensor):
            x = x * rows_f32(scale)
        elif scale != 1.0:
            x = x * float(scale)
        if isinstance(bias, NkiTensor):
            x = x + rows_f32(bias)
        elif bias is not None:
            x = x + float(bias)
        y = op.activate(x)
        if op.valid is not None:
            y = _invalid_outside_range(c, op, x, y)
        dtypes.store(dst.arr, y)
        acc = c.prog.accumulator
        if cmd in (_ReduceCmd.reset, _ReduceCmd.reset_reduce):
            acc[:P] = 0.0
        if accumulate:
            acc[:P] += y.sum(dim=1, dtype=torch.float32).numpy()
        if reduce_res is not None:
            dtypes.store(reduce_res.arr, torch.from_numpy(acc[:P].copy()))
    return ins


def _invalid_outside_range(c: Issue, op: Op, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """NaN (and a warning) where the activation input is outside the op's documented valid range:
    the Scalar engine's output there is invalid and its polynomial is unpublished (ops.py)."""
    lo, hi = op.valid
    magnitude = x.abs() if op.name == "reciprocal" else x
    outside = ~((magnitude >= lo) & (magnitude <= hi)) & ~torch.isnan(x)
    if not bool(outside.any()):
        return y
    span = f"+-[{lo:g}, {hi:g}]" if op.name == "reciprocal" else f"[{lo:g}, {hi:g}]"
    warnings.warn(NkiInvalidOutputWarning(
        f"{c.label}: {int(outside.sum())} inputs of nl.{op.name} are outside its valid input range {span}; the "
        f"Scalar engine's output there is invalid (nkisim writes NaN) ({c.where})"), stacklevel=2)
    return y.masked_fill(outside, float("nan"))


def _bf16_shortcut(op: Op, dst: NkiTensor, data: NkiTensor) -> bool:
    """Evaluate a plain activation bf16 -> bf16 in one pass when `op` has an exact shortcut: both
    views contiguous, and dst either is data (in place) or lies in another allocation."""
    d, x = dst.arr, data.arr
    if d.dtype != dtypes.bfloat16 or x.dtype != dtypes.bfloat16 or not (d.flags.c_contiguous and x.flags.c_contiguous):
        return False
    if dst.storage is data.storage:
        if dst.byte_offset != data.byte_offset or d.size != x.size:
            return False            # partly overlapping views: the fp32 route reads all before writing
        x_flat = dtypes.torch_view(x).view(-1)
        return op.act_bf16(x_flat, x_flat)
    return op.act_bf16(dtypes.torch_view(x).view(-1), dtypes.torch_view(d).view(-1))


# --- reductions ----------------------------------------------------------------------------------
_REDUCE = {
    "add": lambda x: x.sum(dim=2),
    "multiply": lambda x: x.prod(dim=2),
    "maximum": lambda x: x.amax(dim=2),
    "minimum": lambda x: x.amin(dim=2),
    "subtract": lambda x: x[:, :, 0] - x[:, :, 1:].sum(dim=2),
    # bit-vector reductions on raw integers, logical ones on "non-zero" (1 / 0), both documented
    # for tensor_reduce (SDK:nki/api/nki/isa/__init__.py; the ALU operator table)
    "bitwise_and": lambda x: torch.from_numpy(np.bitwise_and.reduce(x.numpy(), axis=2)),
    "bitwise_or": lambda x: torch.from_numpy(np.bitwise_or.reduce(x.numpy(), axis=2)),
    "bitwise_xor": lambda x: torch.from_numpy(np.bitwise_xor.reduce(x.numpy(), axis=2)),
    "logical_and": lambda x: (x != 0).all(dim=2).to(torch.float32),
    "logical_or": lambda x: (x != 0).any(dim=2).to(torch.float32),
    "logical_xor": lambda x: ((x != 0).sum(dim=2) % 2).to(torch.float32),
}


@instruction("TENSOR_REDUCE", engines=(VECTOR,), cost=costs.reduce_cycles, color="#8c62b8")
def tensor_reduce(dst: NkiTensor, op: Any, data: NkiTensor, axis: Any, negate: bool = False, keepdims: bool = False,
                  name: str | None = None) -> NkiInstruction:
    """dst = reduction of data over trailing free axes (Vector engine, fp32 accumulate)."""
    c = Issue("tensor_reduce", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    op = c.op("op", op, "any")
    if op.name not in _REDUCE:
        c.fail(f"op={op!r} is not an emulated reduction (use one of: {', '.join('nl.' + n for n in _REDUCE)})")
    axes = (axis,) if isinstance(axis, int) else tuple(axis) if isinstance(axis, list) else axis
    if not isinstance(axes, tuple) or not axes or not all(isinstance(a, int) and not isinstance(a, bool) for a in axes):
        c.fail(f"axis must be an int or a tuple or list of ints, got {axis!r}")
    nd = data.ndim
    axes = tuple(sorted(a % nd if -nd <= a < nd else a for a in axes))
    if 0 in axes:
        c.fail("axis 0 is the partition dim; tensor_reduce reduces free axes only")
    if axes != tuple(range(nd - len(axes), nd)):
        c.fail(f"axis={axis!r} must be the trailing free dims of the {nd}-D data {data.shape}, e.g. {(nd - 1,)}")
    kept = int(np.prod(data.shape[1:nd - len(axes)]))
    if dst.shape[0] != data.shape[0]:
        c.fail(f"dst has {dst.shape[0]} partitions but data has {data.shape[0]}; they must match")
    if dst.elements_per_partition != kept:
        c.fail(f"dst has {dst.elements_per_partition} elements per partition but reducing axes {axes} of "
               f"{data.shape} leaves {kept}")
    c.integer_operands(op, ("dst", dst), ("data", data))
    if negate and (op.bitvec or op.name.startswith("logical")):
        c.fail("negate=True is only valid for arithmetic ops")
    ins = c.record(VECTOR, [("data", data)], [("dst", dst)],
                   {"op": op.name, "axis": axes, "negate": negate, "keepdims": keepdims,
                    "dtype": "int" if op.bitvec else "float32"})
    if c.prog.compute:
        if op.bitvec:
            r = _REDUCE[op.name](rows_bits(data).reshape(data.shape[0], kept, -1))
            dtypes.store(dst.arr, dtypes.wrap_int(r, dst.dtype))
        else:
            r = _REDUCE[op.name](rows_f32(data).reshape(data.shape[0], kept, -1))
            dtypes.store(dst.arr, -r if negate else r)
    return ins


# Instruction families in modules of their own (CONTRIBUTING.md, "Adding an instruction").
from .collectives import core_barrier, dma_engine, sendrecv  # noqa: E402,F401
from .isa_dma import dma_compute  # noqa: E402,F401
from .isa_gpsimd import (affine_select, iota, local_gather, nc_n_gather, nonzero_with_count,  # noqa: E402,F401
                         sequence_bounds, tensor_partition_reduce)
from .isa_random import dropout, rand_get_state, rand_set_state, rng, set_rng_seed  # noqa: E402,F401
from .isa_search import max8, nc_find_index8, nc_match_replace8, topk  # noqa: E402,F401
from .isa_vector import (bn_aggr, bn_stats, nc_stream_shuffle, range_select, scalar_tensor_tensor,  # noqa: E402,F401
                         select_reduce, tensor_copy_predicated, tensor_scalar_cumulative, tensor_scalar_reduce,
                         tensor_tensor_scan)
from .newer_cores import activate2, exponential, nc_matmul_mx, quantize_mx, rand2  # noqa: E402,F401
from .registers import (VirtualRegister, register_alloc, register_load, register_move,  # noqa: E402,F401
                        register_store)
from . import registers as _registers  # noqa: E402
from .enums import dependency as _dependency  # noqa: E402

# NKI 0.7 only (nki_versions.TABLE): served by __getattr__ while 0.7 is emulated
__getattr__ = coverage.stand_in("nki.isa", versioned={"dependency": _dependency,
                                                      **{name: getattr(_registers, name)
                                                         for name in ("NkiScalar", "scalar_load", "scalar_store")}})
