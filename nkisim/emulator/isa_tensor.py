"""The Tensor engine: `nisa.nc_matmul` and `nisa.nc_transpose` (Tensor- and Vector-engine forms).

Semantics from the NKI 0.6 API reference (SDK:nki/api/nki/isa/__init__.py, rendered at
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_matmul.html and
.../nki.isa.nc_transpose.html) and the architecture guides (SDK:nki/guides/architecture/
trainium_inferentia2_arch.rst "Tensor Engine", "Near-memory accumulation in PSUM";
trainium2_arch.rst "Tensor Engine"):

  * `nc_matmul(dst, stationary[K, M], moving[K, N])` computes dst[M, N] = stationary.T @ moving:
    the contraction K is the partition dim of both inputs (<= 128), M <= 128, N <= 512 (one PSUM
    bank of fp32); inputs in SBUF, dst in PSUM; products and accumulation in fp32, dst float32.
  * Accumulation: accumulate=False overwrites dst; True adds onto what an earlier matmul left
    there (undefined on a location no matmul wrote: rejected); None (default) is the compiler's
    "first write overwrites, subsequent writes accumulate" in the arch guide's terms: the first
    matmul of an accumulation group overwrites the PSUM it writes ("the first nki.isa.nc_matmul
    instruction overwrites the destination PSUM bank"), so it adds only onto what a matmul left and
    overwrites a location never written or last written by a memset or copy (the guide's `nl.zeros`
    + matmul loop sums the products either way). Accumulating onto a location a non-matmul instruction
    wrote is undefined on NeuronCore-v3 per the nc_matmul note, so accumulate=True there is rejected.
    In a compiled loop's body the inferred flag is one for every iteration (the body is one copy).
  * Input dtypes float8_e4m3 / float8_e5m2 / bfloat16 / float16 / tfloat32 / float32; float8_e4m3fn
    needs NeuronCore-v4; if one input is float32 (or tfloat32) both must be.
  * perf_mode=double_row (FP8 only): inputs [K, 2, M] and [K, 2, N], contraction over K and the 2.
  * is_transpose=True: bit-accurate transpose mode: moving is an identity (a 0/1 matrix with at most
    one 1 per column), dst has stationary's dtype. The emulator copies bits (NaN/Inf survive).
  * tile_position / tile_size: row/column tiling of the 128x128 PE array into 32/64/128 tiles; the
    stationary tile must fit its tile. Results are the same; the trace keeps the tile (`pe_tile`), and the
    cost model runs matmuls on disjoint tiles in parallel ("allow multiple nc_matmul instructions with a
    stationary tile size smaller than [128, 128] to run in parallel", the nc_matmul page, "Tiling mode").
  * `nc_transpose`: Tensor engine up to [128, 128], SBUF -> PSUM; Vector engine up to [32, 32],
    SBUF or PSUM on both sides; dst dtype == data dtype; free dims are flattened first.
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np
import torch

from ..costmodel import tensor_engine as cost
from ..limits import GEMM_MOVING_FMAX as MOVING_FREE_MAX
from ..limits import GEMM_STATIONARY_FMAX as STATIONARY_FREE_MAX
from ..limits import PE_TILE_SIZES, WHOLE_PE_ARRAY
from ..limits import PARTITIONS as CONTRACTION_MAX
from ..vocabulary import TENSOR, VECTOR, instruction
from . import dtypes
from .enums import engine
from .issue import Issue, NkiInstruction, rows_f32
from .psum import UNWRITTEN, WRITTEN_BY_MATMUL
from .tensor import PSUM, SBUF, NkiTensor

VECTOR_TRANSPOSE_MAX = 32        # one Vector-engine reshape bank transposes 32x32

_FP32_LIKE = {"float32", "tfloat32"}
MATMUL_INPUT_DTYPES = ("float8_e4m3", "float8_e5m2", "bfloat16", "float16", "tfloat32", "float32")
DOUBLE_ROW_DTYPES = ("float8_e4m3", "float8_e5m2")


class matmul_perf_mode(enum.Enum):
    """`nisa.matmul_perf_mode`: FP8 double-row mode of the Tensor engine (NeuronCore-v3+)."""

    none = "none"
    double_row = "double_row"

    def __repr__(self) -> str:
        return f"nisa.matmul_perf_mode.{self.name}"


# --- numerics (pure functions) -------------------------------------------------------------------
def matmulrows_f32(stationary: torch.Tensor, moving: torch.Tensor) -> torch.Tensor:
    """stationary[K, M].T @ moving[K, N] with fp32 products and fp32 accumulation."""
    return stationary.T.matmul(moving)


def double_rowrows_f32(stationary: torch.Tensor, moving: torch.Tensor) -> torch.Tensor:
    """Double-FP8 matmul: stationary[K, 2, M], moving[K, 2, N], contraction over K and the 2."""
    k = stationary.shape[0]
    return matmulrows_f32(stationary.reshape(2 * k, -1), moving.reshape(2 * k, -1))


def selected_rows(moving: torch.Tensor) -> np.ndarray:
    """For a 0/1 `moving` [K, N] with at most one 1 per column: the row of that 1 per column (-1: none).
    Raises ValueError for any other matrix (transpose mode is defined for identity-like tiles only)."""
    ones, zeros = moving == 1.0, moving == 0.0
    if not bool((ones | zeros).all()) or bool((ones.sum(dim=0) > 1).any()):
        raise ValueError("moving is not an identity-like 0/1 matrix")
    rows = ones.to(torch.int64).argmax(dim=0)
    rows[~ones.any(dim=0)] = -1
    return rows.numpy()


def transpose_select(stationary: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Transpose mode, bit for bit: out[m, n] = stationary[rows[n], m] (zero bits where rows[n] < 0)."""
    raw = dtypes.raw(np.ascontiguousarray(stationary))
    out = np.zeros((raw.shape[1], rows.size), raw.dtype)
    picked = rows >= 0
    out[:, picked] = raw[rows[picked], :].T
    return out


def transpose_bits(data: np.ndarray) -> np.ndarray:
    """data[P, ...] with its free dims flattened, transposed to [F, P], raw bits."""
    return dtypes.raw(np.ascontiguousarray(data)).reshape(data.shape[0], -1).T


# --- nc_matmul -----------------------------------------------------------------------------------
@instruction("MATMUL", engines=(TENSOR,), cost=cost.matmul_cycles, color="#d4b106")
def nc_matmul(dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, is_stationary_onezero: bool = False,
              is_moving_onezero: bool = False, is_transpose: bool = False, accumulate: bool | None = None,
              tile_position: Any = (), tile_size: Any = (), perf_mode: Any = matmul_perf_mode.none,
              name: str | None = None) -> NkiInstruction:
    """dst = stationary.T @ moving on the Tensor engine (fp32 accumulate in PSUM); see the module doc."""
    c = Issue("nc_matmul", name)
    dst, stationary, moving = c.tensor("dst", dst), c.tensor("stationary", stationary), c.tensor("moving", moving)
    for role, flag in (("is_stationary_onezero", is_stationary_onezero), ("is_moving_onezero", is_moving_onezero),
                       ("is_transpose", is_transpose)):
        _check_bool(c, role, flag)
    if accumulate is not None:
        _check_bool(c, "accumulate", accumulate)
    mode = _perf_mode(c, perf_mode)
    _memory(c, dst, stationary, moving)
    _input_dtypes(c, stationary, moving, mode)
    row0, col0, rows, cols = _pe_tile(c, tile_position, tile_size)
    double = mode is matmul_perf_mode.double_row
    if double:
        if is_transpose:
            c.fail("perf_mode=double_row cannot be combined with is_transpose=True (transpose mode)")
        if cols < 128:
            c.fail(f"perf_mode=double_row cannot be combined with column tiling (tile_size column {cols} < 128)")
        for role, t in (("stationary", stationary), ("moving", moving)):
            if t.ndim < 3 or t.shape[1] != 2:
                c.fail(f"perf_mode=double_row needs {role} laid out [K, 2, free] (the contraction split over the "
                       f"partition dim and a first free dim of 2), got shape {t.shape}")
    k = stationary.shape[0]
    m = stationary.elements_per_partition // (2 if double else 1)
    n = moving.elements_per_partition // (2 if double else 1)
    if moving.shape[0] != k:
        c.fail(f"stationary has {k} partitions but moving has {moving.shape[0]}; both hold the contraction dim "
               f"on the partition axis and must match")
    if k > rows:        # reachable with row tiling only: the partition limit already caps k at 128
        c.fail(f"contraction (partition) size {k} exceeds the {rows} PE rows of tile_size row {rows}")
    if m > cols:
        c.fail(f"stationary free size {m} exceeds maximum {cols} ("
               + ("gemm_stationary_fmax, the PE columns" if cols == STATIONARY_FREE_MAX else f"tile_size column {cols}")
               + f"); tile M into pieces of at most {cols}")
    if n > MOVING_FREE_MAX:
        c.fail(f"moving free size {n} exceeds maximum {MOVING_FREE_MAX} (gemm_moving_fmax: one PSUM bank of fp32 "
               f"per partition on trn2); tile N into pieces of at most 512")
    if dst.shape[0] != m or dst.elements_per_partition != n:
        c.fail(f"dst must hold [{m}, {n}] (stationary free size x moving free size), got shape {dst.shape}")
    if is_transpose:
        if dst.dtype != stationary.dtype:
            c.fail(f"is_transpose=True writes stationary's dtype: dst dtype {dst.dtype.name} must be "
                   f"{stationary.dtype.name}")
        if accumulate:
            c.fail("is_transpose=True overwrites dst; accumulate=True is not supported in transpose mode")
    elif dst.dtype != dtypes.float32:
        c.fail(f"dst dtype {dst.dtype.name}: a matmul writes float32 to PSUM on trn2 (bfloat16 dst is NeuronCore-v4)")
    kinds = c.prog.psum.writer_kinds(dst).reshape(m, n)
    adds = _accumulating(c, kinds, accumulate, is_transpose)
    reads = [("stationary", stationary), ("moving", moving)] + ([("dst", dst)] if adds.any() else [])
    attrs = {"stationary_free": m, "moving_free": n, "contraction": k, "dtype": dtypes.name_of(stationary.dtype),
             "moving_dtype": dtypes.name_of(moving.dtype), "perf_mode": mode.value, "is_transpose": is_transpose,
             "onezero": bool(is_stationary_onezero or is_moving_onezero), "accumulate": bool(adds.any())}
    if (row0, col0, rows, cols) != WHOLE_PE_ARRAY:
        attrs["pe_tile"] = (row0, col0, rows, cols)     # the cost model runs matmuls on disjoint PE tiles in parallel
    ins = c.record(TENSOR, reads, [("dst", dst)], attrs, epp=n)
    if c.prog.compute:
        if is_transpose:
            _transpose_mode(c, dst, stationary, moving, k)
        else:
            s, mv = rows_f32(stationary), rows_f32(moving)
            prod = double_rowrows_f32(s.reshape(k, 2, -1), mv.reshape(k, 2, -1)) if double else matmulrows_f32(s, mv)
            if adds.any():
                mask = torch.from_numpy(adds)
                prod = torch.where(mask, rows_f32(dst).reshape(m, n) + prod, prod)
            dtypes.store(dst.arr, prod)
    return ins


def _check_bool(c: Issue, role: str, value: Any) -> None:
    if not isinstance(value, (bool, np.bool_)):
        c.fail(f"{role} must be a bool, got {type(value).__name__} {value!r}")


def _perf_mode(c: Issue, value: Any) -> matmul_perf_mode:
    # nki-library passes the enum's string values ('double_row', 'none'); both spellings compile.
    if isinstance(value, matmul_perf_mode):
        return value
    if isinstance(value, str) and value in matmul_perf_mode._value2member_map_:
        return matmul_perf_mode(value)
    c.fail(f"perf_mode must be a nki.isa.matmul_perf_mode member (none or double_row), got {value!r}")


def _memory(c: Issue, dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor) -> None:
    for role, t in (("stationary", stationary), ("moving", moving)):
        if t.buffer is not SBUF:
            c.fail(f"{role} is in {t.buffer.name}; the Tensor engine reads its inputs from SBUF "
                   f"(copy PSUM data to SBUF with nisa.tensor_copy first)")
    if dst.buffer is not PSUM:
        c.fail(f"dst is in {dst.buffer.name}; the Tensor engine writes its result to PSUM "
               f"(allocate dst with buffer=nl.psum, then evacuate with nisa.tensor_copy or nisa.activation)")


def _input_dtypes(c: Issue, stationary: NkiTensor, moving: NkiTensor, mode: matmul_perf_mode) -> None:
    allowed = DOUBLE_ROW_DTYPES if mode is matmul_perf_mode.double_row else MATMUL_INPUT_DTYPES
    for role, t in (("stationary", stationary), ("moving", moving)):
        name = dtypes.name_of(t.dtype)
        if name == "float8_e4m3fn":
            c.fail(f"{role} dtype float8_e4m3fn (OCP FP8) needs NeuronCore-v4 (trn3); trn2 matmuls take "
                   f"float8_e4m3 or float8_e5m2")
        if name not in allowed:
            what = "perf_mode=double_row takes" if mode is matmul_perf_mode.double_row else "the Tensor engine takes"
            c.fail(f"{role} dtype {name}: {what} {', '.join(allowed)}")
    if (dtypes.name_of(stationary.dtype) in _FP32_LIKE) != (dtypes.name_of(moving.dtype) in _FP32_LIKE):
        c.fail(f"stationary is {stationary.dtype.name} and moving is {moving.dtype.name}; if one input is "
               f"float32/tfloat32 the other must be too")


def _pe_tile(c: Issue, position: Any, size: Any) -> tuple[int, int, int, int]:
    """(first row, first column, rows, columns) of the PE tile this matmul may use."""
    if position == () and size == ():
        return WHOLE_PE_ARRAY
    pair = lambda v: isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                   for x in v)
    if not (pair(position) and pair(size)):
        c.fail(f"tile_position and tile_size must both be set, each a tuple of two ints (or both left unset), "
               f"got tile_position={position!r}, tile_size={size!r}")
    for axis, start, extent in (("row", position[0], size[0]), ("column", position[1], size[1])):
        if extent not in PE_TILE_SIZES:
            c.fail(f"tile_size {axis} size {extent} must be one of {PE_TILE_SIZES}")
        if start % extent or not 0 <= start or start + extent > 128:
            c.fail(f"tile_position {axis} start {start} must be a multiple of its tile size {extent} within the "
                   f"128 PE {axis}s")
    return position[0], position[1], size[0], size[1]


def _accumulating(c: Issue, kinds: np.ndarray, accumulate: bool | None, is_transpose: bool) -> np.ndarray:
    """Per dst element: does this matmul add onto PSUM (True) or overwrite it (False)?"""
    if accumulate is False or is_transpose:
        return np.zeros(kinds.shape, np.bool_)
    if accumulate is None:
        # the matmul accumulation group: "the first nki.isa.nc_matmul instruction overwrites the destination PSUM
        # bank", the following ones accumulate (trn1/inf2 architecture guide, "Near-memory accumulation in PSUM");
        # a memset or copy before it is overwritten, so the guide's nl.zeros + matmul loop sums the products
        adds = kinds == WRITTEN_BY_MATMUL
        bodies = c.prog.loop_bodies
        if bodies and bodies[-1].inferred_once(c.where, bool(adds.any())) != bool(adds.any()):
            c.fail(f"accumulate=None in the body of {bodies[-1].api}: the compiler infers one flag for the body's "
                   f"single copy, but dst is {'accumulated onto' if adds.any() else 'overwritten'} in iteration "
                   f"{bodies[-1].iteration} and was {'overwritten' if adds.any() else 'accumulated onto'} in "
                   f"iteration 0; pass the flag explicitly (e.g. accumulate=False in a first matmul before the loop, "
                   f"accumulate=True in the body)")
        return adds
    if (kinds == UNWRITTEN).any():
        c.fail("accumulate=True onto PSUM that no matmul has written is undefined; start the accumulation "
               "group with accumulate=False (or leave accumulate=None)")
    if (kinds != WRITTEN_BY_MATMUL).any():
        c.fail("accumulate=True onto PSUM written by a non-matmul instruction (memset, tensor_copy, ...) is "
               "undefined on trn2 (NeuronCore-v3); start the group with a matmul with accumulate=False")
    return np.ones(kinds.shape, np.bool_)


def _transpose_mode(c: Issue, dst: NkiTensor, stationary: NkiTensor, moving: NkiTensor, k: int) -> None:
    try:
        rows = selected_rows(rows_f32(moving))
    except ValueError:
        c.fail("is_transpose=True needs moving to be an identity matrix (0/1 values, at most one 1 per column); "
               "transpose mode moves data, it does not multiply")
    out = transpose_select(stationary.arr.reshape(k, -1), rows)
    dtypes.raw(dst.arr)[...] = out.reshape(dst.shape)


# --- nc_transpose --------------------------------------------------------------------------------
@instruction("TRANSPOSE", engines=(TENSOR, VECTOR), cost=cost.transpose_cycles, color="#c9a227")
def nc_transpose(dst: NkiTensor, data: NkiTensor, engine: Any = engine.unknown,
                 name: str | None = None) -> NkiInstruction:
    """dst[F, P] = data[P, F] (free dims flattened), bit-exact, on the Tensor or Vector engine."""
    c = Issue("nc_transpose", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    p, f = data.shape[0], data.elements_per_partition
    if dst.dtype != data.dtype:
        c.fail(f"dst dtype {dst.dtype.name} must equal data dtype {data.dtype.name} (a transpose does not cast)")
    if dst.shape[0] != f or dst.elements_per_partition != p:
        c.fail(f"dst must hold [{f}, {p}] (data [{p}, {f}] transposed), got shape {dst.shape}")
    fits_vector = p <= VECTOR_TRANSPOSE_MAX and f <= VECTOR_TRANSPOSE_MAX
    tensor_memory = data.buffer is SBUF and dst.buffer is PSUM
    # engine=unknown: the compiler picks by shape; either engine gives the same bits
    lane = c.lane(engine, VECTOR if fits_vector or not tensor_memory else TENSOR)
    if lane == VECTOR and not fits_vector:
        c.fail(f"data [{p}, {f}] exceeds the Vector engine's {VECTOR_TRANSPOSE_MAX}x{VECTOR_TRANSPOSE_MAX} transpose"
               + ("" if tensor_memory else "; the Tensor engine (up to 128x128) needs data in SBUF and dst in PSUM"))
    # Up to [128, 128] on the Tensor engine: the on-chip partition limit on data and dst already says so.
    if lane == TENSOR and not tensor_memory:
        c.fail(f"the Tensor engine transposes from SBUF to PSUM, got data in {data.buffer.name} and dst in "
               f"{dst.buffer.name}")
    ins = c.record(lane, [("data", data)], [("dst", dst)],
                   {"partitions_in": p, "free_in": f, "dtype": data.dtype.name}, epp=f)
    if c.prog.compute:
        dtypes.raw(dst.arr)[...] = transpose_bits(data.arr).reshape(dst.shape)
    return ins

