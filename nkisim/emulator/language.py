"""`nki.language` for trn2: dtypes, buffers, tensor creation, launch queries, loops, operator
identifiers and the NKI 0.3+ element-wise callables.

The callables (`nl.add(a, b)`, `nl.exp(x)`, `nl.sum(x, axis)`, `nl.load`, `nl.store`, ...) allocate
their result in SBUF and lower to one ISA instruction each, like the real wrappers:
  unary activation functions -> nisa.activation (Scalar)
  binary ALU ops             -> nisa.tensor_tensor (two tiles) or nisa.tensor_scalar (a number
                                or a [P, 1] fp32 tile), no broadcasting otherwise
  nl.rsqrt                   -> nisa.tensor_scalar on GpSimd (since NKI 0.5)
  nl.reciprocal              -> nisa.reciprocal (Vector); nl.copy -> nisa.tensor_copy
  nl.sum/max/min/mean        -> nisa.tensor_reduce (+ one tensor_scalar scale for mean)
  nl.mean(x, axis=0)         -> nisa.tensor_partition_reduce (GpSimd, op mean; NKI 0.7 only)
  nl.load / nl.store         -> nisa.dma_copy
`nl.divide` as a callable is rejected: it is unsupported on hardware (NKI 0.4 known issue).
"""
from __future__ import annotations

import builtins
import contextlib
import dataclasses
import inspect
import os
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import numpy as np

from ..limits import (GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, PARTITIONS, PSUM_BANK_BYTES, PSUM_BANKS, PSUM_MIN_ALIGN,
                      SBUF_BYTES_PER_PARTITION, SBUF_USABLE_BYTES_PER_PARTITION)
from . import coverage, dtypes, isa, nki_versions, ops, stream_buffers, tile_grids
from .dtypes import (bfloat16, bool_, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu, float16,  # noqa: F401
                     float32, int8, int16, int32, uint8, uint16, uint32)
from .errors import NkiArgumentError, NkiValidationError, kernel_location
from .ops import OPS, Op
from .cores import current
from .tensor import PSUM, SBUF, Buffer, NkiTensor, ds  # noqa: F401  (ds: nl.ds)
from .tensor import PRIVATE_HBM, SHARED_HBM

sbuf, psum, private_hbm, shared_hbm = SBUF, PSUM, PRIVATE_HBM, SHARED_HBM
hbm = private_hbm  # `nl.hbm` is an alias of `nl.private_hbm`

globals().update(OPS)  # nl.add, nl.gelu, ... (operator identifiers and callables)

# Alignment constants are unpublished: 4 bytes is the emulator's documented guess.
tile_size = SimpleNamespace(
    pmax=PARTITIONS, psum_fmax=PSUM_BANK_BYTES // 4, psum_bank_fmax=PSUM_BANK_BYTES // 4,
    psum_bank_fmax_bytes=PSUM_BANK_BYTES, psum_num_banks=PSUM_BANKS, gemm_stationary_fmax=GEMM_STATIONARY_FMAX,
    gemm_moving_fmax=GEMM_MOVING_FMAX, bn_stats_fmax=512, psum_min_align=PSUM_MIN_ALIGN, sbuf_min_align=4,
    sbuf_fmax_bytes=SBUF_USABLE_BYTES_PER_PARTITION, sbuf_fmax=SBUF_USABLE_BYTES_PER_PARTITION // 4,
    # "Total SBUF capacity in bytes (all partitions combined)" (the tile_size page), which the migration guide sets
    # against sbuf_fmax_bytes, "the usable per-partition size": the architecture guide's 28 MiB
    sbuf_size_bytes=PARTITIONS * SBUF_BYTES_PER_PARTITION,
    total_available_sbuf_size=SBUF_USABLE_BYTES_PER_PARTITION)


# --- launch queries and loops --------------------------------------------------------------------
def program_id(axis: int = 0) -> int:
    """Index of this program in the launch grid (0 or 1 under `kernel[2]`)."""
    prog = current("nl.program_id")
    _check_axis("nl.program_id", axis)
    return prog.id


def num_programs(axes: Any = 0) -> int:
    """Number of programs along `axes` (None: the whole grid)."""
    prog = current("nl.num_programs")
    if axes is not None:
        _check_axis("nl.num_programs", axes)
    return prog.launch.lnc


def program_ndim() -> int:
    return 1


def _check_axis(api: str, axis: Any) -> None:
    if axis != 0:
        raise NkiValidationError(f"{api}: axis {axis!r} out of range; the launch grid is 1-D ({kernel_location()})")


def affine_range(start: int, stop: int | None = None, step: int = 1) -> range:
    return range(start) if stop is None else range(start, stop, step)


sequential_range = static_range = affine_range


def device_print(print_prefix: str, tensor: NkiTensor) -> None:
    """Print `print_prefix` and the tensor's values now (the page: "In CPU simulation, this prints immediately";
    the parameter names are the page's, so `print_prefix=` works as a keyword)."""
    if not isinstance(print_prefix, str):
        # "print_prefix: ... Evaluated at trace time; must be a constant string" (nl.device_print's page)
        raise NkiValidationError(f"nl.device_print: print_prefix must be a constant string, got "
                                 f"{type(print_prefix).__name__} {print_prefix!r} ({kernel_location()})")
    if isinstance(tensor, NkiTensor) and tensor.buffer is PSUM:
        # "tensor - tensor to print out. Can be in SBUF or HBM" (nl.device_print's page)
        raise NkiValidationError(f"nl.device_print: the tensor to print is in PSUM; it can be in SBUF or HBM: copy it "
                                 f"to SBUF first (nisa.tensor_copy) ({kernel_location()})")
    if current("nl.device_print").check_only:     # a body run only to check it prints nothing
        return
    tensor.storage.materialise()
    print(print_prefix, tensor.arr.astype(np.float32) if dtypes.is_float(tensor.dtype) else tensor.arr)


# --- tensor creation -----------------------------------------------------------------------------
def ndarray(shape: Any, dtype: Any, buffer: Buffer = sbuf, name: str = "", address: Any = None) -> NkiTensor:
    """Allocate an uninitialised tensor (NaN for floats, 4 for ints, so unwritten reads show).
    `address=(partition_offset, byte_offset)` places a PSUM tile on a bank by hand (see psum.py)."""
    return _allocate("nl.ndarray", shape, dtype, buffer, name, None, address)


def zeros(shape: Any, dtype: Any, buffer: Buffer = sbuf, name: str = "") -> NkiTensor:
    return _filled("nl.zeros", shape, 0, dtype, buffer, name)


def ones(shape: Any, dtype: Any, buffer: Buffer = sbuf, name: str = "") -> NkiTensor:
    return _filled("nl.ones", shape, 1, dtype, buffer, name)


def full(shape: Any, fill_value: Any, dtype: Any, buffer: Buffer = sbuf, name: str = "") -> NkiTensor:
    """An initialised tensor; on chip the fill is a `memset` instruction (it is one on hardware)."""
    return _filled("nl.full", shape, fill_value, dtype, buffer, name)


def _filled(api: str, shape: Any, fill_value: Any, dtype: Any, buffer: Buffer, name: str) -> NkiTensor:
    if isinstance(buffer, Buffer) and buffer.on_chip:
        t = _allocate(api, shape, dtype, buffer, name, None)
        with isa.lowering(api):
            isa.memset(dst=t, value=fill_value)
        return t
    return _allocate(api, shape, dtype, buffer, name, lambda a: a.fill(fill_value))


def zeros_like(x: NkiTensor, dtype: Any = None, buffer: Buffer | None = None, name: str = "") -> NkiTensor:
    """Zeros shaped like x, in x's dtype unless given; the buffer defaults to SBUF, not x's (the 2.32 page
    nki.language.zeros_like; no 2.33 page says otherwise)."""
    _check_like("nl.zeros_like", x)
    return zeros(x.shape, dtype or x.dtype, buffer or sbuf, name)


# the orders nisa.dma_transpose supports, by rank (v2.33.0 nki.language.empty_like page)
_TRANSPOSE_ORDERS = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def empty_like(x: NkiTensor | tile_grids.NkiGrid, dtype: Any = None, buffer: Buffer | None = None, name: str = "",
               *, transpose_axes: tuple[int, ...] | None = None, address: Any = None) -> Any:
    """Uninitialised storage shaped like x, in x's dtype and buffer unless given. NKI 0.7 adds
    `transpose_axes` (the shape permuted as a later nisa.dma_transpose into this SBUF tensor permutes it;
    nothing is issued), `address` (as nl.ndarray's) and tile-grid inputs (a grid of the same type,
    navigation shape, tile shape, block grouping and remainder extents, its cells packed densely)."""
    return _like("nl.empty_like", x, dtype, buffer, name, transpose_axes, address)


def _like(api: str, x: Any, dtype: Any, buffer: Buffer | None, name: str, transpose_axes: Any, address: Any) -> Any:
    if isinstance(x, tile_grids.NkiGrid) and nki_versions.applies("nki.language.NkiTileGrid"):
        return _empty_like_grid(api, x, dtype, buffer, name, transpose_axes, address)
    _check_like(api, x)
    if (transpose_axes is not None or address is not None) and not nki_versions.applies("empty-like-transpose-address"):
        raise NkiArgumentError(coverage.not_in_this_version("empty-like-transpose-address",
                                                            "nl.empty_like(transpose_axes=, address=)"))
    buffer = buffer or x.buffer
    shape = x.shape if transpose_axes is None else _transposed_shape(api, x.shape, transpose_axes, buffer)
    return _allocate(api, shape, dtype or x.dtype, buffer, name, None, address)


def _empty_like_grid(api: str, x: tile_grids.NkiGrid, dtype: Any, buffer: Buffer | None, name: str,
                     transpose_axes: Any, address: Any) -> tile_grids.NkiGrid:
    if transpose_axes is not None:
        return _transposed_tile(api, x, dtype, buffer, name, transpose_axes, address)
    element_shape, axes = x.packed()
    backing, slots = _grid_storage(api, x.tile_shape, element_shape, buffer or x.buffer, dtype or x.dtype, address, name)
    return type(x)(backing, axes, slots)


def _transposed_tile(api: str, x: tile_grids.NkiGrid, dtype: Any, buffer: Buffer | None, name: str,
                     transpose_axes: Any, address: Any) -> tile_grids.NkiGrid:
    """One tile's SBUF destination for a later nisa.dma_transpose: the selected tile's extents (and its grid's
    tile shape) permuted by transpose_axes (the v2.33.0 empty_like page; the docs' transpose.py example,
    transpose_tiled). Several tiles at once are refused: how their transposes are laid out is not on a page
    readable here."""
    if x.shape or len(x.element_shape) != len(x.tile_shape):
        raise NkiValidationError(f"{api}: transpose_axes with a selection of several tiles (grid shape "
                                 f"{x.shape}, elements {x.element_shape}) is not emulated; select one tile (every "
                                 f"coordinate an integer) and transpose tile by tile ({kernel_location()})")
    buffer = buffer or x.buffer
    element_shape = _transposed_shape(api, x.element_shape, transpose_axes, buffer)
    tile_shape = tuple(x.tile_shape[a] for a in transpose_axes)
    backing, slots = _grid_storage(api, tile_shape, element_shape, buffer, dtype or x.dtype, address, name)
    grid = tile_grids.view_grid(api, backing, tile_shape, None, slots, element_shape)
    return grid[(0,) * len(tile_shape)]


def alloc_stream_buffers(view: NkiTensor | tile_grids.NkiGrid, *, buffer: Buffer, dim: int, num_slots: int = 2,
                         dtype: Any = None, transpose_axes: tuple[int, ...] | None = None, address: Any = None,
                         name: str = "") -> stream_buffers.NkiStreamBuffers:
    """`num_slots` on-chip slots, each shaped like one step of `view` along `dim` (NKI 0.7; stream_buffers.py)."""
    api = stream_buffers.ALLOC
    dim = stream_buffers.stream_dim(view, dim)
    if not isinstance(buffer, Buffer) or not buffer.on_chip:
        raise NkiArgumentError(f"{api}: buffer must be nl.sbuf or nl.psum (the slots are on-chip work areas), got "
                               f"{getattr(buffer, 'name', buffer)!r} ({stream_buffers.ALLOC_PAGE}) ({kernel_location()})")
    if type(num_slots) is not int or num_slots < 1:
        raise NkiArgumentError(f"{api}: num_slots must be a positive Python int, got {num_slots!r} "
                               f"({stream_buffers.ALLOC_PAGE}) ({kernel_location()})")
    if address is not None:
        raise NkiValidationError(f"{api}: address= is not emulated: the page does not say where each of the "
                                 f"{num_slots} slots goes; leave the placement to the compiler ({kernel_location()})")
    first = stream_buffers.step(view, dim, 0)
    slots = tuple(_like(api, first, dtype, buffer, name, transpose_axes, None) for _ in range(num_slots))
    return stream_buffers.NkiStreamBuffers.of(view, dim, slots)


def alloc_tiles(*, tile_shape: tuple[int, ...], element_shape: tuple[int, ...], buffer: Buffer, dtype: Any,
                address: Any = None, name: str = "") -> tile_grids.NkiTileGrid:
    """New storage for `element_shape` elements as a grid of `tile_shape` tiles (NKI 0.7)."""
    return _alloc_grid("nl.alloc_tiles", tile_shape, None, element_shape, buffer, dtype, address, name)


def alloc_blocks(*, tile_shape: tuple[int, ...], block_shape: tuple[int, ...], element_shape: tuple[int, ...],
                 buffer: Buffer, dtype: Any, address: Any = None, name: str = "") -> tile_grids.NkiBlockGrid:
    """New storage for `element_shape` elements as a grid of blocks of `block_shape` tiles (NKI 0.7)."""
    return _alloc_grid("nl.alloc_blocks", tile_shape, block_shape, element_shape, buffer, dtype, address, name)


def _alloc_grid(api: str, tile_shape: Any, block_shape: Any, element_shape: Any, buffer: Any, dtype: Any,
                address: Any, name: str) -> tile_grids.NkiGrid:
    element_shape = tile_grids.check_shape(api, "element_shape", element_shape)
    tile_shape = tile_grids.check_tile_shape(api, tile_shape, element_shape)
    backing, slots = _grid_storage(api, tile_shape, element_shape, buffer, dtype, address, name)
    return tile_grids.view_grid(api, backing, tile_shape, block_shape, slots, element_shape)


def _grid_storage(api: str, tile_shape: tuple[int, ...], element_shape: tuple[int, ...], buffer: Any, dtype: Any,
                  address: Any, name: str) -> tuple[NkiTensor, tuple[int, ...] | None]:
    """HBM: the compact element extent; SBUF/PSUM: one whole-tile slot per tile (the pages' dense rank-two
    capacity layout), with the slot stride of each dim."""
    if not isinstance(buffer, Buffer):
        raise NkiArgumentError(f"{api}: buffer must be an NKI MemoryRegion (nl.sbuf, nl.psum, nl.shared_hbm, ...), got "
                               f"{type(buffer).__name__} {buffer!r} ({kernel_location()})")
    if not buffer.on_chip:
        return _allocate(api, element_shape, dtype, buffer, name, None, address), None
    if tile_shape[0] > PARTITIONS:   # the slot layout puts a tile's rows on the partitions
        raise NkiValidationError(f"{api}: tile_shape {tile_shape} in {buffer.name}: partition dim {tile_shape[0]} > "
                                 f"{PARTITIONS}, the partitions of on-chip memory; each tile's first dim is its "
                                 f"partition dim ({tile_grids.PAGES}/nki.language.alloc_tiles.html) ({kernel_location()})")
    shape, slots = tile_grids.slot_layout(tile_shape, element_shape)
    return _allocate(api, shape, dtype, buffer, name, None, address), slots


def _check_like(api: str, x: Any) -> None:
    if not isinstance(x, NkiTensor):
        grids = api == "nl.empty_like" and nki_versions.applies("nki.language.NkiTileGrid")
        what = "an NkiTensor or a tile grid (NkiTileGrid, NkiBlockGrid)" if grids else "an NkiTensor"
        hint = "; of a tile grid, take its .data" if isinstance(x, tile_grids.NkiGrid) and not grids else ""
        raise NkiValidationError(f"{api}: x must be {what}, got {type(x).__name__}{hint} ({kernel_location()})")


def _transposed_shape(api: str, shape: tuple[int, ...], axes: Any, buffer: Any) -> tuple[int, ...]:
    page = nki_versions.ROWS["empty-like-transpose-address"].page
    if axes != _TRANSPOSE_ORDERS.get(len(shape)):
        raise NkiValidationError(
            f"{api}: transpose_axes={axes!r} for a rank-{len(shape)} tensor; the supported orders are "
            f"{', '.join(f'{o} (rank {r})' for r, o in _TRANSPOSE_ORDERS.items())}, those of nisa.dma_transpose "
            f"({page}) ({kernel_location()})")
    if buffer is not SBUF:
        raise NkiValidationError(f"{api}: transpose_axes prepares an SBUF destination for nisa.dma_transpose, "
                                 f"got buffer {getattr(buffer, 'name', buffer)!r} ({page}) ({kernel_location()})")
    transposed = tuple(shape[a] for a in axes)
    if transposed[0] > PARTITIONS:
        raise NkiValidationError(
            f"{api}: transpose_axes={axes} makes the source's free dim {axes[0]} (size {transposed[0]}) the "
            f"partition dim, which holds at most {PARTITIONS} ({page}) ({kernel_location()})")
    return transposed


def _allocate(api: str, shape: Any, dtype: Any, buffer: Any, name: str, fill: Callable | None,
              address: Any = None) -> NkiTensor:
    where = kernel_location()
    prog = current(api)
    if not isinstance(buffer, Buffer):
        raise NkiValidationError(
            f"{api}: buffer must be one of nl.sbuf, nl.psum, nl.hbm, nl.private_hbm, nl.shared_hbm, got "
            f"{type(buffer).__name__} {buffer!r} ({where})")
    shape = (shape,) if isinstance(shape, int) else shape
    if not isinstance(shape, (tuple, list)) or not shape or not builtins.all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n > 0 for n in shape):
        raise NkiValidationError(f"{api}: shape must be a tuple of positive compile-time ints, got {shape!r} ({where})")
    # a one-dim on-chip tensor is its partition dim alone, one element per partition: the register_load and
    # register_store pages (2.32 and v2.33.0) allocate nl.ones([1], ..., buffer=nl.sbuf) as a one-element source
    dt = dtypes.resolve(dtype)
    if dt is None:
        if isinstance(dtype, PackedDType):
            raise NkiValidationError(f"{dtype.refusal(api)} ({where})")
        raise NkiValidationError(f"{api}: dtype {dtype!r} is not an NKI dtype ({dtypes.names()}) ({where})")
    return prog.allocate(tuple(int(n) for n in shape), dt, buffer, name, where, fill, api, address)


# --- element-wise callables ----------------------------------------------------------------------
def call_op(op: Op, *args: Any, dtype: Any = None) -> NkiTensor:
    """The NKI 0.3+ callable form of an operator identifier (see the module docstring)."""
    api = f"nl.{op.name}"
    _no_grids(api, *args)
    if op.name == "divide":
        raise NkiValidationError(f"nl.divide is not supported on hardware (NKI 0.4 known issue); use nisa.reciprocal "
                                 f"then nl.multiply ({kernel_location()})")
    if not (op.is_alu or op.act):
        raise NkiValidationError(f"{api} is an operator identifier (an op= argument of an ISA instruction), not a "
                                 f"callable ({kernel_location()})")
    if len(args) == 1 and (op.act is not None or op.unary is not None):
        (x,) = args
        out = _result(api, x.shape, dtype or x.dtype)
        with isa.lowering(api):
            if op.name == "rsqrt":
                isa.tensor_scalar(dst=out, data=x, op0=op, operand0=None, engine=isa.engine.gpsimd)
            elif op.name == "reciprocal":
                isa.reciprocal(dst=out, data=x)
            elif op.name == "copy":
                isa.tensor_copy(dst=out, src=x)
            elif op.name == "sin":
                _sin_with_range_reduction(out, x)
            elif op.act is not None:
                isa.activation(dst=out, op=op, data=x)
            else:
                isa.tensor_scalar(dst=out, data=x, op0=op, operand0=None)
        return out
    if len(args) != 2 or op.binary is None:
        raise TypeError(f"{api}() takes {'1' if op.binary is None else '2'} positional arguments, got {len(args)}")
    x, y = args
    tensor = x if isinstance(x, NkiTensor) else y
    if not isinstance(tensor, NkiTensor):
        raise NkiValidationError(f"{api}: at least one argument must be a tile ({kernel_location()})")
    if dtype is None:
        kinds = {t.dtype for t in (x, y) if isinstance(t, NkiTensor)}
        dtype = kinds.pop() if len(kinds) == 1 else float32
    out = _result(api, tensor.shape, dtype)
    with isa.lowering(api):
        both = isinstance(x, NkiTensor) and isinstance(y, NkiTensor)
        if both and not (y.elements_per_partition == 1 < x.elements_per_partition):
            isa.tensor_tensor(dst=out, data1=x, data2=y, op=op)
        elif isinstance(x, NkiTensor):
            isa.tensor_scalar(dst=out, data=x, op0=op, operand0=y)
        else:
            isa.tensor_scalar(dst=out, data=y, op0=op, operand0=x, reverse0=True)
    return out


_TWO_PI = 2.0 * float(np.pi)


def _sin_with_range_reduction(out: NkiTensor, x: NkiTensor) -> None:
    """nl.sin: the Scalar engine's sin is valid on [-pi, pi] only and does no range reduction, but
    "nki.language.sin applies additional instructions to perform range reduction before the activation,
    so it stays accurate over the full input domain" (nki.api.shared, activation-table note:
    https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/nki.api.shared.html). Those
    instructions are not published; nkisim's are one Vector tensor_scalar, r = (x + pi) mod 2pi in
    [0, 2pi), and the activation sin(r - pi) = sin(x), in fp32: an absolute error of about |x| * 2^-24 (the
    rounding of x + pi), e.g. 5e-8 at 9.0 and 3e-4 at 1e4."""
    reduced = _result("nl.sin", x.shape, float32)
    with isa.lowering("nl.mod"):
        isa.tensor_scalar(dst=reduced, data=x, op0=OPS["add"], operand0=float(np.pi), op1=OPS["mod"],
                          operand1=_TWO_PI)
    isa.activation(dst=out, op=OPS["sin"], data=reduced, bias=-float(np.pi))


def _no_grids(api: str, *values: Any) -> None:
    """A tile grid where a tensor belongs: name its .data (the callables read a tensor's shape first)."""
    for value in values:
        if isinstance(value, tile_grids.NkiGrid):
            raise NkiValidationError(f"{api}: got the {type(value).__name__} {value.shape}; an NKI instruction takes a "
                                     f"grid's tensor operand, its .data ({kernel_location()})")


def _result(api: str, shape: tuple[int, ...], dtype: Any) -> NkiTensor:
    return _allocate(api, shape, dtype, sbuf, "", None)


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """`axis` as documented for reductions: an int, or a tuple or list of ints."""
    axes = (axis,) if isinstance(axis, (int, np.integer)) else tuple(axis)
    return tuple(sorted(int(a) % ndim for a in axes))


def _free_axes(api: str, x: NkiTensor, axis: Any) -> tuple[int, ...]:
    """`axis` of a free-axis reduction: the partition dim (0) is refused by name (their pages say "must
    be free dimensions"; of the reductions only nl.mean's 2.33 page adds axis 0 on its own)."""
    axes = _axes(axis, x.ndim)
    if 0 in axes:
        raise NkiValidationError(f"{api}: axis={axis!r} includes the partition dim (0); {api} reduces free axes "
                                 f"only, the last contiguous ones ({kernel_location()})")
    return axes


def _reduce(api: str, op: Op, x: NkiTensor, axis: Any, dtype: Any, keepdims: bool) -> NkiTensor:
    _no_grids(api, x)
    axes = _free_axes(api, x, axis)
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    if not keepdims:
        shape = tuple(n for d, n in enumerate(x.shape) if d not in axes)
        shape = shape if len(shape) >= 2 else shape + (1,)
    out = _result(api, shape, dtype or x.dtype)
    with isa.lowering(api):
        isa.tensor_reduce(dst=out, op=op, data=x, axis=axes, keepdims=keepdims)
    return out


def sum(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:  # noqa: A001
    return _reduce("nl.sum", OPS["add"], x, axis, dtype, keepdims)


def max(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:  # noqa: A001
    return _reduce("nl.max", OPS["maximum"], x, axis, dtype, keepdims)


def min(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:  # noqa: A001
    return _reduce("nl.min", OPS["minimum"], x, axis, dtype, keepdims)


def mean(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    if 0 in _axes(axis, x.ndim) and nki_versions.applies("mean-partition-axis"):
        return _partition_mean(x, axis, dtype)
    total = _reduce("nl.mean", OPS["add"], x, axis, float32, keepdims)
    count = x.size // total.size
    out = _result("nl.mean", total.shape, dtype or x.dtype)
    with isa.lowering("nl.mean"):
        isa.tensor_scalar(dst=out, data=total, op0=OPS["multiply"], operand0=1.0 / count)
    return out


mean.isa_operator = "mean"  # tensor_partition_reduce's `mean` op (NKI 0.7 page) is passed as nl.mean
# the maximum / minimum ALU ops by their reduction functions: "The reduce_op can be any of nl.add, nl.multiply, nl.max
# or nl.min" (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_scalar_reduce.html)
max.isa_operator = "maximum"
min.isa_operator = "minimum"


def _partition_mean(x: NkiTensor, axis: Any, dtype: Any) -> NkiTensor:
    """nl.mean over the partitions (NKI 0.7): axis 0 alone, dim 0 kept as size one (keepdims has no
    effect there), one GpSimd tensor_partition_reduce."""
    if _axes(axis, x.ndim) != (0,):
        raise NkiValidationError(f"nl.mean: axis={axis!r} mixes the partition dim (0) with free dims; NKI 0.7's "
                                 f"nl.mean reduces axis 0 only on its own, in a call of its own "
                                 f"(the v2.33.0 nki.language.mean page) ({kernel_location()})")
    out = _result("nl.mean", (1,) + x.shape[1:], dtype or x.dtype)
    with isa.lowering("nl.mean"):
        isa.tensor_partition_reduce(dst=out, op=mean, data=x)
    return out


def load(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """Copy an HBM tensor into a new SBUF tile (one dma_copy)."""
    _no_grids("nl.load", src)
    out = _result("nl.load", src.shape if len(src.shape) >= 2 else src.shape + (1,), dtype or src.dtype)
    with isa.lowering("nl.load"):
        isa.dma_copy(dst=out, src=src)
    return out


def store(dst: NkiTensor, value: NkiTensor) -> None:
    """Copy an SBUF tile to an HBM tensor (one dma_copy)."""
    with isa.lowering("nl.store"):
        isa.dma_copy(dst=dst, src=value)


def matmul(x: NkiTensor, y: NkiTensor, transpose_x: bool = False) -> NkiTensor:
    """x @ y (or x.T @ y with transpose_x=True) into a new float32 PSUM tile: one nc_matmul, plus a
    Tensor-engine transpose of x through PSUM and SBUF when x is not already [K, M]
    (SDK:nki/api/nki/language/__init__.py `matmul`)."""
    _no_grids("nl.matmul", x, y)
    for role, t in (("x", x), ("y", y)):    # "x: a tile on SBUF", "y: a tile on SBUF" (nl.matmul's page)
        if isinstance(t, NkiTensor) and t.buffer is not sbuf:
            raise NkiValidationError(f"nl.matmul: {role} is in {t.buffer.name}; x and y are tiles on SBUF (load or "
                                     f"copy it there first) ({kernel_location()})")
    with isa.lowering("nl.matmul"):
        stationary = x
        if not transpose_x:
            xt = _allocate("nl.matmul", (x.elements_per_partition, x.shape[0]), x.dtype, psum, "", None)
            isa.nc_transpose(dst=xt, data=x, engine=isa.engine.tensor)
            stationary = _result("nl.matmul", xt.shape, x.dtype)
            isa.tensor_copy(dst=stationary, src=xt)
        out = _allocate("nl.matmul", (stationary.elements_per_partition, y.elements_per_partition), float32, psum,
                        "", None)
        isa.nc_matmul(dst=out, stationary=stationary, moving=y)
    return out


def transpose(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """x[P, F] transposed into a new PSUM tile [F, P] (SDK:nki/api/nki/language/__init__.py `transpose`);
    a `dtype` other than x's adds a cast copy into SBUF."""
    _no_grids("nl.transpose", x)
    out = _allocate("nl.transpose", (x.elements_per_partition, x.shape[0]), x.dtype, psum, "", None)
    with isa.lowering("nl.transpose"):
        isa.nc_transpose(dst=out, data=x)
        return _as_dtype("nl.transpose", out, dtype)


def load_transpose2d(src: NkiTensor, dtype: Any = None) -> NkiTensor:
    """A 2-D HBM tensor [A, B] loaded transposed into a new SBUF tile [B, A]: one dma_transpose, plus a
    cast copy when `dtype` differs (SDK:nki/api/nki/language/__init__.py `load_transpose2d`)."""
    if not isinstance(src, NkiTensor) or src.ndim != 2:
        raise NkiValidationError(f"nl.load_transpose2d: src must be a 2-D tensor, got {src!r} ({kernel_location()})")
    out = _result("nl.load_transpose2d", (src.shape[1], src.shape[0]), src.dtype)
    with isa.lowering("nl.load_transpose2d"):
        isa.dma_transpose(dst=out, src=src)
        return _as_dtype("nl.load_transpose2d", out, dtype)


def _as_dtype(api: str, t: NkiTensor, dtype: Any) -> NkiTensor:
    """`t` itself, or a copy cast to `dtype` in a new SBUF tile (one tensor_copy)."""
    if dtype is None or dtypes.resolve(dtype) == t.dtype:
        return t
    cast = _result(api, t.shape, dtype)
    isa.tensor_copy(dst=cast, src=t)
    return cast


# --- randomness and gathers (nki.isa instructions of isa_random / isa_gpsimd) ---------------------
def random_seed(seed: NkiTensor) -> None:
    """Seed the generator `rand` and `dropout` draw from: one nisa.set_rng_seed
    (SDK:nki/api/nki/language/__init__.py `random_seed`)."""
    with isa.lowering("nl.random_seed"):
        isa.set_rng_seed(src_seeds=seed)


_RAND_BITS = 16     # uniform in [0, 1): 16 random bits scaled by 2^-16 (the rng page's normalisation)


def rand(shape: Any, dtype: Any, buffer: Buffer = sbuf, name: str = "") -> NkiTensor:
    """A new tensor of uniform values in [0, 1) on sbuf, psum or hbm (its page's three buffers): on chip,
    nisa.rng into uint16, then one tensor_scalar scaling by 2^-16 (SDK:nki/api/nki/language/__init__.py
    `rand`; nki.isa.rng page); in HBM, where rng cannot write, such SBUF tiles of up to 128 rows of
    the first dim, each DMA'd into place."""
    out = _allocate("nl.rand", shape, dtype, buffer, name, None)
    if out.buffer.on_chip:
        _random_fill(out)
        return out
    with isa.lowering("nl.rand"):
        for row in range(0, out.shape[0], PARTITIONS):
            rows = builtins.min(PARTITIONS, out.shape[0] - row)
            tile = _allocate("nl.rand", (rows, *out.shape[1:]), dtype, sbuf, "", None)
            _random_fill(tile)
            isa.dma_copy(dst=out[row:row + rows], src=tile)
    return out


def _random_fill(out: NkiTensor) -> None:
    bits = _allocate("nl.rand", out.shape, uint16, out.buffer, "", None)
    with isa.lowering("nl.rand"):
        isa.rng(dst=bits)
        isa.tensor_scalar(dst=out, data=bits, op0=OPS["multiply"], operand0=2.0 ** -_RAND_BITS)


def dropout(x: NkiTensor, rate: Any, dtype: Any = None) -> NkiTensor:
    """x with each element zeroed with probability `rate` (a number or a [P, 1] tile): one
    nisa.dropout, plus a cast copy when `dtype` differs (SDK:nki/api/nki/language/__init__.py `dropout`)."""
    out = _result("nl.dropout", x.shape, x.dtype)
    with isa.lowering("nl.dropout"):
        isa.dropout(dst=out, data=x, prob=rate)
        return _as_dtype("nl.dropout", out, dtype)


def shared_identity_matrix(n: int, dtype: Any = uint8, dst: NkiTensor | None = None) -> NkiTensor:
    """An n x n identity in SBUF (in `dst` if given): a shared-HBM constant, filled before the kernel
    runs, copied in by one dma_copy (SDK:nki/api/nki/language/__init__.py `shared_identity_matrix`,
    "the same behavior" as `shared_constant`)."""
    _check_shared_constant_dtype("nl.shared_identity_matrix", dtype)
    constant = _allocate("nl.shared_identity_matrix", (n, n), dtype, shared_hbm, "identity",
                         lambda a: np.copyto(a, np.eye(n, dtype=np.float32).astype(a.dtype)))
    if dst is None:
        dst = _result("nl.shared_identity_matrix", (n, n), dtype)
    with isa.lowering("nl.shared_identity_matrix"):
        isa.dma_copy(dst=dst, src=constant)
    return dst


from .newer_cores import PackedDType, float4_e2m1fn_x4, float8_e4m3fn_x4, float8_e5m2_x4  # noqa: E402,F401
from .registers import dynamic_range as _dynamic_range, fori_loop, while_loop  # noqa: E402,F401


ops.set_lowering(call_op)


# --- types, memory-region queries, views, ordering ------------------------------------------------
DType = np.dtype        # nl.float32, nl.bfloat16, ... are numpy dtypes in the emulator


def _fields_left_to_none(cls: type, fields: dict[str, Any], n_positional: int, kwargs: dict[str, Any]) -> list[str]:
    """Fields without a default that this call leaves out: the compiler's default initializer takes
    them as None ("def __init__(self, x = None, y = False)", language guide, Class Support:
    SDK:nki/get-started/nki-language-guide.rst). Only when the class keeps that generated initializer."""
    init_fields = [f for f in fields.values() if f.init]
    if list(inspect.signature(cls.__init__).parameters)[1:] != [f.name for f in init_fields]:
        return []   # the class wrote its own __init__: Python's call rules apply
    return [f.name for f in init_fields[n_positional:] if f.name not in kwargs
            and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]


def _below_nkiobject(cls: type) -> tuple[type, ...]:
    """The classes of `cls`'s MRO that derive from NKIObject, `cls` first."""
    return cls.__mro__[:cls.__mro__.index(NKIObject)]


def _keeps_generated_init(cls: type) -> bool:
    """A class with annotated fields and no __init__ of its own (below NKIObject)."""
    below = _below_nkiobject(cls)
    return any(vars(c).get("__annotations__") for c in below) and not any("__init__" in vars(c) for c in below)


def _generated_init(cls: type, args: tuple, kwargs: dict[str, Any]) -> Any:
    """NKI 0.6's front end compiles a class "with and without the @dataclass decorator ... in the same way",
    creating `__init__(self, x = None, y = False)` from its annotated fields and their class-level defaults, then
    `__post_init__` (language guide 2.32, Class Support). The class itself is left as it is."""
    names = list(dict.fromkeys(n for c in reversed(_below_nkiobject(cls)) for n in vars(c).get("__annotations__", {})))
    if len(args) > len(names):
        raise NkiArgumentError(f"{cls.__name__}(): {len(args)} positional arguments for {len(names)} fields "
                               f"{names} ({kernel_location()})")
    values = {n: getattr(cls, n, None) for n in names}
    values.update(zip(names, args))
    for key in [k for k in kwargs if k in values]:
        values[key] = kwargs.pop(key)
    obj = type.__call__(cls, **kwargs)          # NKIObject.__init__: remaining keywords become attributes
    for name, value in values.items():
        setattr(obj, name, value)
    if hasattr(obj, "__post_init__"):
        obj.__post_init__()
    return obj


class _NKIObjectType(type):
    """Construction of NKIObject subclasses: besides a dataclass's own fields, keyword arguments may
    set any attribute the class declares (nki-library declares some without annotations, which
    `@dataclass` does not turn into fields), as `NKIObject.__init__(**kwargs)` documents."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        fields = getattr(cls, "__dataclass_fields__", None)
        if fields is None and nki_versions.applies("nkiobject-classes") and _keeps_generated_init(cls):
            return _generated_init(cls, args, kwargs)
        if fields is None:
            return super().__call__(*args, **kwargs)
        declared = {k: kwargs.pop(k) for k in list(kwargs) if k not in fields and hasattr(cls, k)}
        for name in _fields_left_to_none(cls, fields, len(args), kwargs):
            kwargs[name] = None
        obj = super().__call__(*args, **kwargs)
        for key, value in declared.items():
            setattr(obj, key, value)
        return obj


class NKIObject(metaclass=_NKIObjectType):
    """Base class of NKI kernel dataclasses and configuration objects (nl.NKIObject): keyword
    arguments become attributes."""

    def __init__(self, **kwargs: Any) -> None:
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __eq__(self, other: Any) -> Any:
        # NKI 0.6: "Equality in NKI is structural" (language guide, Class Support); NKI 0.7 follows Python,
        # identity unless the class defines __eq__ (a dataclass does), so `==` "can behave differently"
        # (announce-nki-specialization-change)
        if nki_versions.applies("structural-equality"):
            return type(self) is type(other) and vars(self) == vars(other)
        return NotImplemented

    __hash__ = object.__hash__


MemoryRegion = Buffer       # nl.MemoryRegion: the Enum whose members are nl.sbuf, nl.psum, nl.private_hbm, nl.shared_hbm


def _buffer_of(api: str, buffer: Any) -> Buffer:
    if isinstance(buffer, NkiTensor):
        return buffer.buffer
    if not isinstance(buffer, Buffer):
        raise NkiValidationError(f"{api}: expected a buffer such as nl.sbuf, got {type(buffer).__name__} {buffer!r} "
                                 f"({kernel_location()})")
    return buffer


def is_psum(buffer: Any) -> bool:
    return _buffer_of("nl.is_psum", buffer) is PSUM


def is_sbuf(buffer: Any) -> bool:
    return _buffer_of("nl.is_sbuf", buffer) is SBUF


def is_hbm(buffer: Any) -> bool:
    return not _buffer_of("nl.is_hbm", buffer).on_chip


def is_on_chip(buffer: Any) -> bool:
    return _buffer_of("nl.is_on_chip", buffer).on_chip


@contextlib.contextmanager
def no_reorder() -> Iterator[None]:
    """Keep program order inside the block: the compiler puts a dependency edge between every pair
    of its instructions (SDK:nki/guides/how-to-scheduling-apis.rst, "no-reorder blocks"); the trace
    records them as a chain (`Trace.order_edges`) for the cost model, and nkisim executes in program
    order anyway. The block is dynamically scoped (it covers the functions called under it), which
    is what the dynamic loops' refusal to run inside one (registers.py) reads."""
    prog = current("nl.no_reorder")
    if not prog.no_reorder_depth:
        prog.no_reorder_last = None     # a new block: nothing before it is chained to it
    prog.no_reorder_depth += 1
    try:
        yield
    finally:
        prog.no_reorder_depth -= 1


def _assign_tile(dst: NkiTensor, value: NkiTensor) -> None:
    """`dst_view = value` by item assignment (tensor.py). The compiler's lowering is not documented:
    nkisim copies with `tensor_copy` between on-chip tiles and with `dma_copy` when a side is in HBM."""
    with isa.lowering("item assignment"):
        if dst.buffer.on_chip and value.buffer.on_chip:
            isa.tensor_copy(dst=dst, src=value)
        else:
            isa.dma_copy(dst=dst, src=value)


NkiTensor.assign = staticmethod(_assign_tile)


def expand_dims(x: NkiTensor, axis: int) -> NkiTensor:
    """A view with a new size-1 dim at `axis` (no instruction)."""
    return x.expand_dim(axis)


def broadcast_to(x: NkiTensor, shape: Any, dtype: Any = None) -> NkiTensor:
    """A new SBUF tile of `shape` holding x repeated along its size-1 dims (numpy broadcasting,
    same rank); x is "the source tile in SBUF or PSUM" (its page). The compiler's lowering is not
    documented: nkisim issues one SBUF-to-SBUF `dma_copy` from a stride-0 view, which can repeat
    partitions as well as free elements, after a Vector copy to SBUF of a PSUM source (no DMA reads PSUM)."""
    api = "nl.broadcast_to"
    shape = tuple(shape)
    if not isinstance(x, NkiTensor) or not x.buffer.on_chip:
        raise NkiValidationError(f"{api}: x must be a tile in SBUF or PSUM ({kernel_location()})")
    if len(shape) != x.ndim or any(n != m and n != 1 for n, m in zip(x.shape, shape)):
        raise NkiValidationError(f"{api}: cannot broadcast {x.shape} to {shape}; ranks must match and each dim "
                                 f"must match or be 1 ({kernel_location()})")
    if shape == x.shape and (dtype is None or dtypes.resolve(dtype) == x.dtype):
        return x
    out = _result(api, shape, dtype or x.dtype)
    with isa.lowering(api):
        if x.buffer is PSUM:
            staged = _result(api, x.shape, x.dtype)
            isa.tensor_copy(dst=staged, src=x, engine=isa.engine.vector)
            x = staged
        isa.dma_copy(dst=out, src=NkiTensor(x.storage, np.broadcast_to(x.arr, shape), x.byte_offset))
    return out


# --- composite reductions and normalisations -----------------------------------------------------
def prod(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = False) -> NkiTensor:
    return _reduce("nl.prod", OPS["multiply"], x, axis, dtype, keepdims)


def all(x: NkiTensor, axis: Any, dtype: Any = None) -> NkiTensor:  # noqa: A001
    """1 where every element along `axis` is non-zero: (x != 0), then a minimum reduction."""
    flags = _result("nl.all", x.shape, float32)
    with isa.lowering("nl.all"):
        isa.tensor_scalar(dst=flags, data=x, op0=OPS["not_equal"], operand0=0.0)
    return _reduce("nl.all", OPS["minimum"], flags, axis, dtype or x.dtype, False)


def var(x: NkiTensor, axis: Any, dtype: Any = None, keepdims: bool = True) -> NkiTensor:
    """Population variance E[x^2] - E[x]^2 in fp32; the result keeps the reduced dims (documented:
    keepdims is ignored)."""
    api = "nl.var"
    _free_axes(api, x, axis)
    mean_x = mean(x, axis, dtype=float32, keepdims=True)
    squares = _result(api, x.shape, float32)
    with isa.lowering(api):
        isa.tensor_tensor(dst=squares, data1=x, data2=x, op=OPS["multiply"])
    mean_sq = mean(squares, axis, dtype=float32, keepdims=True)
    out = _result(api, mean_x.shape, dtype or x.dtype)
    sq_mean = _result(api, mean_x.shape, float32)
    with isa.lowering(api):
        isa.tensor_tensor(dst=sq_mean, data1=mean_x, data2=mean_x, op=OPS["multiply"])
        isa.tensor_tensor(dst=out, data1=mean_sq, data2=sq_mean, op=OPS["subtract"])
    return out


def _row_blocks(api: str, x: NkiTensor, axis: Any) -> list[NkiTensor]:
    """x as [P, F] views, F the elements of `axis`: one view per index of the free dims before it. The axes must be
    the tile's last contiguous dim(s) (the nl.softmax page: "must be free dimensions, not partition dimension (0);
    can only be the last contiguous dim(s) of the tile"), so [P, A, B] with axis=2 is A blocks of [P, B]."""
    axes = _axes(axis, x.ndim)
    if not axes or 0 in axes or axes != tuple(range(axes[0], x.ndim)):
        raise NkiValidationError(f"{api}: axis {axis!r} must be the last contiguous free dim(s) of the {x.shape} "
                                 f"tile, e.g. {x.ndim - 1} or {list(range(1, x.ndim))} ({kernel_location()})")
    blocks = [x[(slice(None), *lead)] for lead in np.ndindex(*x.shape[1:axes[0]])]
    return [b.reshape((b.shape[0], b.elements_per_partition)) if b.ndim > 2 else b for b in blocks]


def softmax(x: NkiTensor, axis: Any = -1, dtype: Any = None) -> NkiTensor:
    """exp(x - max) / sum(exp(x - max)) along the last free dim(s), per [P, F] block (`_row_blocks`): max
    reduction, exp activation with the negated max as bias accumulating the row sums, reciprocal, multiply."""
    api = "nl.softmax"
    out = _result(api, x.shape, dtype or x.dtype)
    blocks = _row_blocks(api, x, axis)
    P, F = blocks[0].shape
    neg_max, total, inv = (_result(api, (P, 1), float32) for _ in range(3))
    e = _result(api, (P, F), float32)
    with isa.lowering(api):
        for rows, dst in zip(blocks, _row_blocks(api, out, axis)):
            isa.tensor_reduce(dst=neg_max, op=OPS["maximum"], data=rows, axis=1, negate=True)
            isa.activation(dst=e, op=OPS["exp"], data=rows, bias=neg_max, reduce_op=OPS["add"], reduce_res=total,
                           reduce_cmd=isa.reduce_cmd.reset_reduce)
            isa.reciprocal(dst=inv, data=total)
            isa.tensor_scalar(dst=dst, data=e, op0=OPS["multiply"], operand0=inv)
    return out


def rms_norm(x: NkiTensor, w: NkiTensor, axis: Any, n: int, epsilon: float = 1e-6, dtype: Any = None,
             compute_dtype: Any = None) -> NkiTensor:
    """x / sqrt(sum(x^2) / n + epsilon) * w along the last free dim(s), per [P, F] block (`_row_blocks`): square
    activation accumulating the row sums, one tensor_scalar (times 1/n, plus epsilon), rsqrt, the scaling; then
    the product with w. Its page states no rule for `axis`; the blocks take softmax's (`_row_blocks`), the
    lowering's limit: a [P, 1] column of sums per block."""
    api = "nl.rms_norm"
    scaled = _result(api, x.shape, compute_dtype or float32)
    out = _result(api, x.shape, dtype or x.dtype)
    blocks = _row_blocks(api, x, axis)
    P, F = blocks[0].shape
    squares = _result(api, (P, F), compute_dtype or float32)
    total, mean_sq, rstd = (_result(api, (P, 1), float32) for _ in range(3))
    with isa.lowering(api):
        for rows, dst in zip(blocks, _row_blocks(api, scaled, axis)):
            isa.activation(dst=squares, op=OPS["square"], data=rows, reduce_op=OPS["add"], reduce_res=total,
                           reduce_cmd=isa.reduce_cmd.reset_reduce)
            isa.tensor_scalar(dst=mean_sq, data=total, op0=OPS["multiply"], operand0=1.0 / n, op1=OPS["add"],
                              operand1=float(epsilon))
            isa.activation(dst=rstd, op=OPS["rsqrt"], data=mean_sq)
            isa.tensor_scalar(dst=dst, data=rows, op0=OPS["multiply"], operand0=rstd)
        isa.tensor_tensor(dst=out, data1=scaled, data2=w, op=OPS["multiply"])
    return out


def negative(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """-x as one tensor_scalar (x * -1)."""
    out = _result("nl.negative", x.shape, dtype or x.dtype)
    with isa.lowering("nl.negative"):
        isa.tensor_scalar(dst=out, data=x, op0=OPS["multiply"], operand0=-1.0)
    return out


def logical_not(x: NkiTensor, dtype: Any = None) -> NkiTensor:
    """XOR with 1, as documented: inputs should be 0 or 1."""
    out = _result("nl.logical_not", x.shape, dtype or x.dtype)
    with isa.lowering("nl.logical_not"):
        isa.tensor_scalar(dst=out, data=x, op0=OPS["logical_xor"], operand0=1.0)
    return out


# "Supported element types" of the nki.language.shared_constant page (2.32, v2.33.0); the packed types and
# tfloat32 it names as untested on hardware are not emulated dtypes here
_SHARED_CONSTANT_DTYPES = (float32, float16, bfloat16, int32, int16, int8, uint32, uint16, uint8, float8_e4m3fn,
                          float8_e5m2, float8_e8m0fnu)


def shared_constant(constant: Any) -> NkiTensor:
    """A shared-HBM tensor holding `constant` (a numpy array, or the path of a .npy file) of one of the
    element types its page supports."""
    api = "nl.shared_constant"
    data = np.load(constant) if isinstance(constant, (str, os.PathLike)) else np.asarray(constant)
    _check_shared_constant_dtype(api, data.dtype)
    return _allocate(api, data.shape, data.dtype, shared_hbm, "", lambda a: a.__setitem__(..., data))


def _check_shared_constant_dtype(api: str, dtype: Any) -> None:
    dt = dtypes.resolve(dtype)
    if dt is not None and dt not in _SHARED_CONSTANT_DTYPES:     # a non-NKI dtype gets _allocate's message
        raise NkiValidationError(
            f"{api}: element type {dtypes.name_of(dt)} is not supported; the supported ones are "
            f"{', '.join(dtypes.name_of(d) for d in _SHARED_CONSTANT_DTYPES)} ({kernel_location()})")


def where(condition: NkiTensor, x: Any, y: Any, dtype: Any = None) -> NkiTensor:
    """x where condition (1.0 / 0.0 values) is non-zero, else y: y copied (or memset) into the result,
    the condition cast to a uint8 predicate, then one tensor_copy_predicated of x."""
    api = "nl.where"
    _no_grids(api, condition, x, y)
    if not isinstance(condition, NkiTensor):
        raise NkiValidationError(f"{api}: condition must be a tile, got {type(condition).__name__} ({kernel_location()})")
    tiles = [t for t in (x, y) if isinstance(t, NkiTensor)]
    out = _result(api, condition.shape, dtype or (tiles[0].dtype if tiles else condition.dtype))
    predicate = _result(api, condition.shape, uint8)
    with isa.lowering(api):
        if isinstance(y, NkiTensor):
            isa.tensor_copy(dst=out, src=y)
        else:
            isa.memset(dst=out, value=y)
        isa.tensor_copy(dst=predicate, src=condition)
        if isinstance(x, NkiTensor) and x.dtype != out.dtype:
            cast = _result(api, x.shape, out.dtype)
            isa.tensor_copy(dst=cast, src=x)
            x = cast
        isa.tensor_copy_predicated(dst=out, src=x, predicate=predicate)
    return out


def gather_flattened(data: NkiTensor, indices: NkiTensor, axis: int = 0, dtype: Any = None) -> NkiTensor:
    """out[p, k] = data[p].flatten()[indices[p, k]]: one nc_n_gather (indices cast to uint32 first
    if needed), plus a cast copy when `dtype` differs. Only the default axis is documented."""
    api = "nl.gather_flattened"
    if axis != 0:
        raise NkiValidationError(f"{api}: axis={axis!r}; the reference page documents only the default axis=0 "
                                 f"(gathering from each partition's flattened free elements) ({kernel_location()})")
    with isa.lowering(api):
        if indices.dtype != uint32:
            as_u32 = _result(api, indices.shape, uint32)
            isa.tensor_copy(dst=as_u32, src=indices)
            indices = as_u32
        out = _result(api, indices.shape, data.dtype)
        isa.nc_n_gather(dst=out, data=data, indices=indices)
        return _as_dtype(api, out, dtype)


# NKI 0.6 only or 0.7 only (nki_versions.TABLE): served by __getattr__ while that release is emulated
__getattr__ = coverage.stand_in("nki.language", versioned={
    "dynamic_range": _dynamic_range, "alloc_tiles": alloc_tiles, "alloc_blocks": alloc_blocks, "int64": dtypes.int64,
    "alloc_stream_buffers": alloc_stream_buffers, "NkiStreamBuffers": stream_buffers.NkiStreamBuffers,
    **{name: getattr(tile_grids, name) for name in tile_grids.__all__}})
del alloc_tiles, alloc_blocks, alloc_stream_buffers
