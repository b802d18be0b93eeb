"""GpSimd-engine instructions: generated patterns (`iota`, `affine_select`), gathers
(`nc_n_gather`, `local_gather`), `tensor_partition_reduce`, `sequence_bounds` and
`nonzero_with_count`. GpSimd cannot access PSUM, so every operand is in SBUF.

Sources (NKI 0.6 API reference, one page per instruction):
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.<name>.html
and, where a page links it as the "equivalent numpy implementation", the docs' example test
(aws-neuron-sdk nki/test/test_nki_isa_<name>.py).

Patterns: `pattern` is a list of up to four [step, num] pairs, padded to four with [0, 1]; the
value of element (p, w, z, y, x) is offset + p*channel_multiplier + w*step_w + z*step_z +
y*step_y + x*step_x in 32-bit integer arithmetic (wrapping), laid out row-major over dst's free
elements (the iota and affine_select pages).

`local_gather` follows its example test: each group of 16 partitions reads its indices
partition-first (column-major over the group's [16, k] index tile), keeps the first
num_valid_indices, and every partition p of the group copies num_elem_per_idx contiguous elements
of its own flattened src row starting at each index. (The page's prose calls the indices
"partition offsets"; its linked numpy implementation is what is emulated.)
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import dtypes, nki_versions
from ..costmodel import costs
from ..vocabulary import GPSIMD, instruction
from .issue import Issue, NkiInstruction, rows_f32
from .ops import OPS, Op
from .tensor import SBUF, NkiTensor

COMPARISONS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")
GPSIMD_CORE_PARTITIONS = 16          # each of the 8 GpSimd cores serves 16 partitions (local_gather page)
GATHER_ELEMS_PER_INDEX = (1, 2, 4, 8, 16, 32)
GATHER_MAX_INDICES = 4096            # indices per GpSimd core (local_gather page)
_INT32 = 1 << 32


def _sbuf(c: Issue, role: str, t: Any) -> NkiTensor:
    t = c.tensor(role, t)
    if t.buffer is not SBUF:
        c.fail(f"{role} is in {t.buffer.name}; GpSimd operands must be in SBUF (GpSimd cannot access PSUM)")
    return t


def _int(c: Issue, role: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        c.fail(f"{role} must be a compile-time int, got {type(value).__name__} {value!r}")
    if not -(1 << 31) <= value < 1 << 31:
        c.fail(f"{role}={value} does not fit in int32")
    return int(value)


def _pattern(c: Issue, pattern: Any, elements: int) -> list[tuple[int, int]]:
    if not isinstance(pattern, (list, tuple)) or not 1 <= len(pattern) <= 4:
        c.fail(f"pattern must be a list of 1 to 4 [step, num] pairs, got {pattern!r}")
    pairs = []
    for i, pair in enumerate(pattern):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            c.fail(f"pattern[{i}]={pair!r} must be a [step, num] pair")
        step, num = _int(c, f"pattern[{i}] step", pair[0]), _int(c, f"pattern[{i}] num", pair[1])
        if num < 1:
            c.fail(f"pattern[{i}] num={num} must be positive")
        pairs.append((step, num))
    total = int(np.prod([n for _, n in pairs]))
    if total != elements:
        c.fail(f"pattern {pattern!r} generates {total} elements per partition but dst has {elements}; they must match")
    return pairs


def _affine(pairs: list[tuple[int, int]], partitions: int, offset: int, multiplier: int) -> np.ndarray:
    """The [P, elements] int64 values of the wrapped int32 affine expression."""
    values = np.zeros(1, np.int64)
    for step, num in pairs:
        values = (values[:, None] + np.arange(num, dtype=np.int64)[None, :] * step).reshape(-1)
    values = offset + np.arange(partitions, dtype=np.int64)[:, None] * multiplier + values[None, :]
    return (values + (1 << 31)) % _INT32 - (1 << 31)


def _store_ints(dst: NkiTensor, values: np.ndarray) -> None:
    """Integer results cast to dst's dtype: via fp32 for float dtypes, saturating for ints."""
    t = torch.from_numpy(values)
    dtypes.store(dst.arr, t.to(torch.float32) if dtypes.is_float(dst.dtype) else t)


@instruction("IOTA", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#38761d")
def iota(dst: NkiTensor, pattern: Any, offset: int = 0, channel_multiplier: int = 0,
         name: str | None = None) -> NkiInstruction:
    """dst = offset + partition*channel_multiplier + the pattern's affine index (int32 math,
    cast to dst's dtype)."""
    c = Issue("iota", name)
    dst = _sbuf(c, "dst", dst)
    offset, multiplier = _int(c, "offset", offset), _int(c, "channel_multiplier", channel_multiplier)
    pairs = _pattern(c, pattern, dst.elements_per_partition)
    ins = c.record(GPSIMD, [], [("dst", dst)], {"dtype": dst.dtype.name})
    if c.prog.compute:
        _store_ints(dst, _affine(pairs, dst.shape[0], offset, multiplier))
    return ins


@instruction("AFFINE_SELECT", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#6aa84f")
def affine_select(dst: NkiTensor, pattern: Any, channel_multiplier: int, on_true_tile: NkiTensor, on_false_value: Any,
                  cmp_op: Any = None, offset: int = 0, name: str | None = None) -> NkiInstruction:
    """dst = on_true_tile where cmp_op(affine value, 0), else on_false_value; the affine value is
    iota's. The default cmp_op is nl.equal."""
    c = Issue("affine_select", name)
    dst, on_true = _sbuf(c, "dst", dst), _sbuf(c, "on_true_tile", on_true_tile)
    c.same_layout("dst", dst, ("on_true_tile", on_true))
    cmp: Op = c.op("cmp_op", OPS["equal"] if cmp_op is None else cmp_op, "alu")
    if cmp.name not in COMPARISONS:
        c.fail(f"cmp_op={cmp!r} is not a comparison; use one of {', '.join('nl.' + n for n in COMPARISONS)}")
    c.number("on_false_value", on_false_value)
    offset, multiplier = _int(c, "offset", offset), _int(c, "channel_multiplier", channel_multiplier)
    pairs = _pattern(c, pattern, dst.elements_per_partition)
    ins = c.record(GPSIMD, [("on_true_tile", on_true)], [("dst", dst)],
                   {"cmp_op": cmp.name, "dtype": dst.dtype.name})
    if c.prog.compute:
        values = torch.from_numpy(_affine(pairs, dst.shape[0], offset, multiplier))
        keep = cmp.binary(values, torch.zeros((), dtype=torch.int64)) != 0
        if on_true.dtype == dst.dtype:       # selected elements keep their bits
            false = np.empty(1, dst.dtype)
            dtypes.store(false, torch.tensor([float(on_false_value)]))
            out = np.where(keep.numpy(), on_true.arr.reshape(keep.shape), false[0])
            dst.arr[...] = out.reshape(dst.shape)
        else:
            dtypes.store(dst.arr, torch.where(keep, rows_f32(on_true), torch.tensor(float(on_false_value))))
    return ins


# --- gathers -------------------------------------------------------------------------------------
@instruction("NC_N_GATHER", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#93c47d")
def nc_n_gather(dst: NkiTensor, data: NkiTensor, indices: NkiTensor, name: str | None = None) -> NkiInstruction:
    """dst[p, k] = data[p].flatten()[indices[p, k]] (uint32 indices, within each partition)."""
    c = Issue("nc_n_gather", name)
    dst, data, indices = _sbuf(c, "dst", dst), _sbuf(c, "data", data), _sbuf(c, "indices", indices)
    c.same_layout("dst", dst, ("indices", indices))
    if data.shape[0] != dst.shape[0]:
        c.fail(f"data has {data.shape[0]} partitions but dst has {dst.shape[0]}; they must match")
    if dst.dtype != data.dtype:
        c.fail(f"dst dtype {dst.dtype.name} != data dtype {data.dtype.name}; a gather does not cast")
    if indices.dtype != dtypes.uint32:
        c.fail(f"indices dtype {indices.dtype.name} must be uint32")
    ins = c.record(GPSIMD, [("data", data), ("indices", indices)], [("dst", dst)],
                   {"dtype": dst.dtype.name})
    if c.prog.compute:
        rows = data.arr.reshape(data.shape[0], -1)
        idx = indices.arr.reshape(indices.shape[0], -1).astype(np.int64)
        _in_range(c, idx, rows.shape[1], "indices")
        dst.arr[...] = np.take_along_axis(rows, idx, axis=1).reshape(dst.shape)
    return ins


def _in_range(c: Issue, idx: np.ndarray, limit: int, role: str) -> None:
    bad = np.flatnonzero((idx < 0) | (idx >= limit))
    if bad.size:
        c.fail(f"{role} value {int(idx.reshape(-1)[bad[0]])} is out of range [0, {limit}) (first bad element "
               f"at flat position {int(bad[0])})")


@instruction("LOCAL_GATHER", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#b6d7a8")
def local_gather(dst: NkiTensor, src_buffer: NkiTensor, index: NkiTensor, num_elem_per_idx: int = 1,
                 num_valid_indices: int | None = None, name: str | None = None) -> NkiInstruction:
    """Per 16-partition group: gather num_elem_per_idx contiguous elements at each of the group's
    first num_valid_indices indices (uint16, read partition-first) from every partition's row."""
    c = Issue("local_gather", name)
    dst, src, index = _sbuf(c, "dst", dst), _sbuf(c, "src_buffer", src_buffer), _sbuf(c, "index", index)
    P = src.shape[0]
    if index.shape[0] != P or P % GPSIMD_CORE_PARTITIONS:
        c.fail(f"src_buffer and index must have the same partition count, a multiple of {GPSIMD_CORE_PARTITIONS}; "
               f"got {P} and {index.shape[0]}")
    if index.dtype != dtypes.uint16:
        c.fail(f"index dtype {index.dtype.name} must be uint16")
    if dst.dtype != src.dtype:
        c.fail(f"dst dtype {dst.dtype.name} != src_buffer dtype {src.dtype.name}; local_gather does not cast")
    if num_elem_per_idx not in GATHER_ELEMS_PER_INDEX:
        c.fail(f"num_elem_per_idx={num_elem_per_idx!r} must be one of {GATHER_ELEMS_PER_INDEX}")
    per_core = index.elements_per_partition * GPSIMD_CORE_PARTITIONS
    valid = per_core if num_valid_indices is None else _int(c, "num_valid_indices", num_valid_indices)
    if not 1 <= valid <= per_core:
        c.fail(f"num_valid_indices={valid} must be between 1 and {per_core} (the indices of one 16-partition group)")
    if valid > GATHER_MAX_INDICES:
        c.fail(f"{valid} indices per GpSimd core exceed the maximum {GATHER_MAX_INDICES}")
    if dst.shape[0] != P or dst.elements_per_partition != valid * num_elem_per_idx:
        c.fail(f"dst must have {P} partitions and {valid * num_elem_per_idx} elements per partition "
               f"(num_valid_indices x num_elem_per_idx), got {dst.shape}")
    ins = c.record(GPSIMD, [("src_buffer", src), ("index", index)], [("dst", dst)],
                   {"dtype": dst.dtype.name})
    if c.prog.compute:
        rows = src.arr.reshape(P, -1)
        idx = index.arr.reshape(P, -1).astype(np.int64)
        out = np.empty((P, valid, num_elem_per_idx), src.dtype)
        span = np.arange(num_elem_per_idx)
        for g in range(0, P, GPSIMD_CORE_PARTITIONS):
            starts = idx[g:g + GPSIMD_CORE_PARTITIONS].reshape(-1, order="F")[:valid]
            _in_range(c, starts + num_elem_per_idx - 1, rows.shape[1], "index")
            cols = (starts[:, None] + span[None, :]).reshape(-1)
            out[g:g + GPSIMD_CORE_PARTITIONS] = rows[g:g + GPSIMD_CORE_PARTITIONS][:, cols].reshape(
                GPSIMD_CORE_PARTITIONS, valid, num_elem_per_idx)
        dst.arr[...] = out.reshape(dst.shape)
    return ins


# --- across partitions ---------------------------------------------------------------------------
_PARTITION_REDUCE = {"add": lambda x: x.sum(dim=0), "maximum": lambda x: x.amax(dim=0),
                     "mean": lambda x: x.mean(dim=0), "average": lambda x: x.mean(dim=0)}
_PARTITION_BITWISE = {"bitwise_or": np.bitwise_or.reduce, "bitwise_and": np.bitwise_and.reduce,
                      "bitwise_xor": np.bitwise_xor.reduce}
_PARTITION_OPS_07 = ("add", "mean", "maximum", "bitwise_or", "bitwise_and", "bitwise_xor")
_PARTITION_OPS_06 = ("add", "average", "maximum", "bitwise_or", "bitwise_and")


@instruction("TENSOR_PARTITION_REDUCE", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#274e13")
def tensor_partition_reduce(dst: NkiTensor, op: Any, data: NkiTensor, name: str | None = None) -> NkiInstruction:
    """dst[0] = op-reduction of data over its partitions (fp32; raw bits for bitwise ops); the ops
    are the emulated version's page's (nki_versions row partition-reduce-mean-xor)."""
    c = Issue("tensor_partition_reduce", name)
    dst, data = _sbuf(c, "dst", dst), _sbuf(c, "data", data)
    op_name = _partition_op(c, op)
    if dst.shape[0] != 1 or dst.elements_per_partition != data.elements_per_partition:
        c.fail(f"dst must have 1 partition and data's {data.elements_per_partition} elements per partition, "
               f"got {dst.shape}")
    bitwise = op_name in _PARTITION_BITWISE
    if bitwise and (data.dtype not in dtypes.INTS or dst.dtype not in dtypes.INTS):
        c.fail(f"op=nl.{op_name} is a bit-vector op; data and dst must have integer dtypes")
    ins = c.record(GPSIMD, [("data", data)], [("dst", dst)],
                   {"op": op_name, "dtype": "int" if bitwise else "float32"})
    if c.prog.compute:
        if bitwise:
            r = _PARTITION_BITWISE[op_name](data.arr.reshape(data.shape[0], -1).astype(np.int64), axis=0)
            dtypes.store(dst.arr, torch.from_numpy(r))
        else:
            dtypes.store(dst.arr, _PARTITION_REDUCE[op_name](rows_f32(data)))
    return ins


def _partition_op(c: Issue, op: Any) -> str:
    """The name of a tensor_partition_reduce op among the emulated version's. NKI 0.7's page lists
    `mean`, whose only nl name is the reduction function nl.mean (it carries `isa_operator`, as nl.max does)."""
    name = getattr(op, "isa_operator", None) or c.op("op", op, "any").name
    allowed = _PARTITION_OPS_07 if nki_versions.applies("partition-reduce-mean-xor") else _PARTITION_OPS_06
    if name not in allowed:
        c.fail(f"op=nl.{name} is not a reduction of NKI {nki_versions.release()}'s tensor_partition_reduce; use "
               + ", ".join(f"nl.{n}" for n in allowed[:-1]) + f" or nl.{allowed[-1]}")
    return name


# --- segments and sparsity -----------------------------------------------------------------------
_ID_DTYPES = (dtypes.float32, dtypes.int32)


@instruction("SEQUENCE_BOUNDS", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#7f6000")
def sequence_bounds(dst: NkiTensor, segment_ids: NkiTensor, name: str | None = None) -> NkiInstruction:
    """For each of the n segment ids (one partition): [start, end) of its run of equal ids;
    padding (id 0) gets start n and end -1. dst is [1, 2, n]: starts, then ends."""
    c = Issue("sequence_bounds", name)
    dst, ids = _sbuf(c, "dst", dst), _sbuf(c, "segment_ids", segment_ids)
    if ids.shape[0] != 1 or dst.shape[0] != 1:
        c.fail(f"the partition dim must be 1, got segment_ids {ids.shape} and dst {dst.shape}")
    n = ids.elements_per_partition
    if dst.elements_per_partition != 2 * n:
        c.fail(f"dst must hold 2 x {n} values ([1, 2, {n}]: start and end per element), got {dst.shape}")
    for role, t in (("segment_ids", ids), ("dst", dst)):
        if t.dtype not in _ID_DTYPES:
            c.fail(f"{role} dtype {t.dtype.name} must be float32 or int32")
    ins = c.record(GPSIMD, [("segment_ids", ids)], [("dst", dst)], {"dtype": dst.dtype.name})
    if c.prog.compute:
        s = rows_f32(ids).numpy()[0]
        if np.any(s < 0):
            c.fail("segment ids must be non-negative")
        start, end = np.empty(n, np.int64), np.empty(n, np.int64)
        for i in range(n):
            start[i] = n if s[i] == 0 else (start[i - 1] if i and s[i] == s[i - 1] else i)
        for i in range(n - 1, -1, -1):
            end[i] = -1 if s[i] == 0 else (end[i + 1] if i < n - 1 and s[i] == s[i + 1] else i + 1)
        _store_ints(dst, np.stack([start, end])[None])
    return ins


@instruction("NONZERO_WITH_COUNT", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#bf9000")
def nonzero_with_count(dst: NkiTensor, src: NkiTensor, index_offset: int = 0, padding_val: int = -1,
                       name: str | None = None) -> NkiInstruction:
    """On partitions 0, 16, ..., 112 of the tiles only: dst = the positions (+ index_offset) of
    src's nonzero elements, then padding_val, then their count; other partitions are untouched."""
    c = Issue("nonzero_with_count", name)
    dst, src = _sbuf(c, "dst", dst), _sbuf(c, "src", src)
    if dst.shape[0] != src.shape[0]:
        c.fail(f"src has {src.shape[0]} partitions but dst has {dst.shape[0]}; they must match")
    if dst.elements_per_partition != src.elements_per_partition + 1:
        c.fail(f"dst must have one more element per partition than src ({src.elements_per_partition + 1}, the last "
               f"holds the count), got {dst.elements_per_partition}")
    if src.dtype not in _ID_DTYPES:
        c.fail(f"src dtype {src.dtype.name} must be float32 or int32")
    if dst.dtype != dtypes.int32:
        c.fail(f"dst dtype {dst.dtype.name} must be int32")
    offset, padding = _int(c, "index_offset", index_offset), _int(c, "padding_val", padding_val)
    ins = c.record(GPSIMD, [("src", src), ("dst", dst)], [("dst", dst)],
                   {"dtype": "int32"})
    if c.prog.compute:
        rows = src.arr.reshape(src.shape[0], -1)
        out = dst.arr.reshape(dst.shape[0], -1).copy()
        for p in range(0, src.shape[0], GPSIMD_CORE_PARTITIONS):
            found = np.flatnonzero(rows[p] != 0)
            out[p, :] = padding
            out[p, :found.size] = found + offset
            out[p, -1] = found.size
        dst.arr[...] = out.reshape(dst.shape)
    return ins


__all__ = ["iota", "affine_select", "nc_n_gather", "local_gather", "tensor_partition_reduce", "sequence_bounds",
           "nonzero_with_count"]
