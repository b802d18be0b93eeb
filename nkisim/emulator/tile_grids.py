"""NKI 0.7's tile-grid views: `nl.tiles`, `nl.blocks` and the `NkiGrid` classes (`nl.alloc_tiles`,
`nl.alloc_blocks` and `nl.empty_like` of a grid allocate through `language.py`).

What the reference pages say, and nkisim does (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/
api/generated/nki.language.tiles.html, ...NkiGrid.html, ...NkiTileGrid.html, ...blocks.html, ...alloc_tiles.html,
...alloc_blocks.html and the v2.33.0 nki.language.empty_like page):
  * a grid is a view: creating or indexing one allocates nothing and moves no data;
  * `tile_shape` (at least two dims) applies to the trailing dims of the tensor; the dims before it stay
    untiled and are indexed one slab (element) at a time; a tiled dim counts tiles, the last one clamped
    to the tensor's extent (a remainder tile);
  * `blocks` groups `block_shape` tiles per tiled dim into one coordinate; `nl.tiles` of a block grid (or
    of a selected block) exposes its tiles again;
  * integer indexing consumes a coordinate but keeps a grid; slices (positive steps) keep the dim;
    `nl.contiguous_indices` / `nl.interleaved_indices` are the built-in slices of one shard's coordinates
    (their pages: adjacent or round-robin, no shard empty, exact compile-time ints);
  * `.data` is the selection as one NkiTensor operand, when one can represent it exactly
    (`is_data_representable`);
  * allocated grids: HBM storage is the compact element extent; SBUF/PSUM use a dense rank-two capacity
    layout (every tile gets a full tile's slot along the free dim); `empty_like` keeps the grid type,
    navigation shape, tile shape, block grouping and remainder extents, packing gapped cells densely.
What the pages readable here leave open, nkisim decides, or refuses with a clear error:
  * an integer index on an untiled dim drops that dim from `element_shape` and `.data` (one slab);
  * SBUF/PSUM slots are ordered row-major over (untiled coordinates, tile coordinates); an on-chip `.data`
    spans one tile, or consecutive full tiles along the last dim of a two-dim tile;
  * a gapped selection (a slice step > 1, as `nl.interleaved_indices` gives) of an HBM grid has a `.data` whose
    access pattern keeps the gaps, the gapped dim as two dims [coordinates, one coordinate's extent] (a single dim
    on an untiled dim); an on-chip one, or one ending in a clamped remainder, has none: copy its tiles one by one;
  * runtime indices (the tiled-grid-selection tutorial: "a NkiScalar, or ... an SBUF NkiTensor shaped (1, 1) for
    one coordinate or (K, 1) for a vector of row indices"; the docs' indirect_indexing.py gather example) select
    regions of HBM grids, one per selection: a runtime coordinate moves a whole coordinate's extent (a
    remainder tile at that coordinate is out of bounds, so dma_copy's oob_mode decides), K row indices count
    rows of the first tiled dim from the selection's first row (at most one tile's rows); `.data` is then an
    indirect view (scalar offset, or vector offset for a gather / scatter DMA);
  * `nl.empty_like(one_tile, transpose_axes=...)` is that tile's SBUF destination with its extents permuted (the
    docs' transpose.py example transposes tile by tile);
  * runtime indices on on-chip grids, runtime slice bounds and transposed allocations of several tiles at once
    are not emulated.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import NkiArgumentError, NkiGridIndexError, NkiValidationError, NkiValueError, kernel_location
from .tensor import NkiTensor

PAGES = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated"
TUTORIAL = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/tutorials/tiled-grid-selection.html"


@dataclass(frozen=True)
class Cell:
    """One tile (or one slab of an untiled dim) along one source dim: its element range [start, stop)
    in the backing tensor and its coordinate in the backing's slot order."""
    index: int
    start: int
    stop: int

    @property
    def extent(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Runtime:
    """An index known only on device: an NkiScalar or a (1, 1) SBUF integer tensor picks one coordinate
    ("scalar"), a (K, 1) one picks K element rows ("vector"). Value v moves the selection `step` elements
    per unit along its dim; values outside [0, limit) select outside the grid selection."""
    kind: str
    index: Any
    step: int
    limit: int


@dataclass(frozen=True)
class Axis:
    """One source dim of a grid selection."""
    cells: tuple[Cell, ...]
    nominal: int           # elements of a whole tile (1 on an untiled dim)
    tiled: bool
    group: int = 1         # tiles per grid coordinate (block_shape entry; 1 for a tile grid)
    kept: bool = True      # still a grid dim (False once an integer index consumed it)
    step: int = 1          # source cells between successive coordinates (a slice's step)
    runtime: Runtime | None = None    # the selection starts at cells[0] moved by a device-side index

    @property
    def coordinates(self) -> int:
        return -(-len(self.cells) // self.group)

    @property
    def extent(self) -> int:
        return sum(c.extent for c in self.cells)

    @property
    def contiguous(self) -> bool:
        return all(a.stop == b.start for a, b in zip(self.cells, self.cells[1:]))

    def coordinate(self, k: int) -> tuple[Cell, ...]:
        return self.cells[k * self.group:(k + 1) * self.group]


class NkiGrid:
    """A tensor region addressed by tile (or block) coordinates: `shape`, `tile_shape`, `element_shape`,
    `dtype`, `buffer`, `data`, `is_data_representable`, `is_remainder`, `index_step_elements`."""

    def __init__(self, backing: NkiTensor, axes: tuple[Axis, ...], slots: tuple[int, ...] | None = None) -> None:
        self._backing = backing     # the source tensor (view / HBM) or the slot tensor (on-chip allocation)
        self._axes = axes
        self._slots = slots         # slot stride per axis of an on-chip allocation; None for a view

    # --- geometry --------------------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(a.coordinates for a in self._axes if a.kept)

    @property
    def tile_shape(self) -> tuple[int, ...]:
        return tuple(a.nominal for a in self._axes if a.tiled)

    @property
    def element_shape(self) -> tuple[int, ...]:
        return tuple(a.extent for a in self._axes if a.tiled or a.kept)

    @property
    def index_step_elements(self) -> tuple[int, ...]:
        return tuple(a.nominal * a.group * a.step for a in self._axes if a.kept)

    @property
    def is_remainder(self) -> bool:
        return any(c.extent < a.nominal for a in self._axes for c in a.cells)

    dtype = property(lambda self: self._backing.dtype)
    buffer = property(lambda self: self._backing.buffer)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(shape={self.shape}, tile_shape={self.tile_shape}, element_shape="
                f"{self.element_shape}, dtype={self.dtype.name}, buffer={self.buffer!r})")

    # --- the operand -------------------------------------------------------------------------------------------
    @property
    def is_data_representable(self) -> bool:
        return self._data_refusal() is None

    @property
    def data(self) -> NkiTensor:
        why = self._data_refusal()
        if why is not None:
            raise NkiValidationError(f"{type(self).__name__}.data: {why}; is_data_representable is False, so index "
                                     f"its tiles one at a time ({PAGES}/nki.language.NkiGrid.html) ({kernel_location()})")
        return self._view() if self._slots is None else self._slot_view()

    def _data_refusal(self) -> str | None:
        runtime = [d for d, a in enumerate(self._axes) if a.runtime is not None]
        if runtime and self._axes[runtime[0]].runtime.kind == "vector" and self._operand_dims()[0] != runtime[0]:
            return (f"the (K, 1) row indices select along dim {runtime[0]}, which must be the leading dim of the "
                    f"operand (one row per partition): select the untiled dims before it with integers")
        gapped = [d for d, a in enumerate(self._axes) if not a.contiguous]
        if gapped and self._slots is not None:
            return f"the selection skips cells along dim {gapped[0]} (a slice step > 1), so no one tensor holds it"
        uneven = [d for d in gapped if len({sum(c.extent for c in self._axes[d].coordinate(k))
                                            for k in range(self._axes[d].coordinates)}) > 1]
        if uneven:
            return (f"the selection skips cells along dim {uneven[0]} and its last cell is a clamped remainder, so no "
                    f"one access pattern holds it")
        if self._slots is None:
            return None
        kept_slabs = [d for d, a in enumerate(self._axes) if not a.tiled and a.kept]
        if kept_slabs:
            return (f"untiled dim {kept_slabs[0]} of an on-chip grid is still a grid dim: select one slab with an "
                    f"integer index")
        tiled = [a for a in self._axes if a.tiled]
        multi = [d for d, a in enumerate(tiled) if len(a.cells) > 1]
        if not multi:
            return None
        last = len(tiled) - 1
        if multi != [last] or len(tiled) != 2:
            return (f"an on-chip grid keeps each tile in its own slot along the free dim, so its .data spans one tile "
                    f"or consecutive tiles along the last dim of a two-dim tile; this selection spans "
                    f"{[len(a.cells) for a in tiled]} tiles")
        if any(c.extent < tiled[last].nominal for c in tiled[last].cells[:-1]):
            return "a clamped tile sits before the last selected one, so the tiles are not consecutive"
        return None

    def _operand_dims(self) -> list[int]:
        """The source dims `.data` keeps: the tiled dims and the untiled grid dims."""
        return [d for d, a in enumerate(self._axes) if a.tiled or a.kept]

    def _view(self) -> NkiTensor:
        runtime = [d for d, a in enumerate(self._axes) if a.runtime is not None]
        if runtime:
            return self._runtime_view(runtime[0])
        if not all(a.contiguous for a in self._axes):
            pattern, first, _ = self._pattern()
            return self._backing.ap(pattern, offset=first)
        key = tuple(a.cells[0].start if not (a.tiled or a.kept) else slice(a.cells[0].start, a.cells[-1].stop)
                    for a in self._axes)
        return self._backing[key]

    def _pattern(self) -> tuple[list[list[int]], int, dict[int, int]]:
        """[step, count] pairs of the selection over the backing's elements, its first element relative to the
        backing's, and the pair where each kept source dim starts: a gapped dim is two pairs, [coordinate step,
        coordinates] and [1 step, a coordinate's extent], as the interleaved_indices page says .data "preserves
        those gaps in the native access pattern"."""
        strides = self._backing.strides
        pattern, starts = [], {}
        for d in self._operand_dims():
            starts[d] = len(pattern)
            a, s = self._axes[d], strides[d]
            if a.contiguous:
                pattern.append([s, a.extent])
                continue
            first, second = a.coordinate(0), a.coordinate(1)
            extent = sum(c.extent for c in first)
            pattern.append([s * (second[0].start - first[0].start), a.coordinates])
            if extent > 1:
                pattern.append([s, extent])
        return pattern, sum(a.cells[0].start * s for a, s in zip(self._axes, strides)), starts

    def _runtime_view(self, dim: int) -> NkiTensor:
        """The selection as an indirect view: the static pattern at the runtime axis's first cell, the
        device-side index moving it (a gather/scatter DMA operand for row indices)."""
        b, r = self._backing, self._axes[dim].runtime
        pattern, first, starts = self._pattern()
        return b.runtime_view(r.kind, r.index, r.step * b.strides[dim], pattern, b.offset_elements() + first,
                              starts.get(dim), r.limit)

    def _slot_view(self) -> NkiTensor:
        tiled = [a for a in self._axes if a.tiled]
        first = sum(a.cells[0].index * s for a, s in zip(self._axes, self._slots))
        count = len(tiled[-1].cells)
        rows = tiled[0].cells[0].extent
        slots = self._backing[0:rows, first:first + count]           # [rows, count, *tile free dims]
        if count > 1:     # consecutive whole tiles of a two-dim tile: one run along the free dim
            return slots.reshape(rows, count * tiled[-1].nominal)[:, 0:tiled[-1].extent]
        inner = tuple(slice(0, a.cells[0].extent) for a in tiled[1:])
        return slots[(slice(None), 0) + inner]

    # --- selection ---------------------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "NkiGrid":
        key = key if isinstance(key, tuple) else (key,)
        grid_dims = [d for d, a in enumerate(self._axes) if a.kept]
        key = _expand_ellipsis(key, len(grid_dims), self.shape)
        axes = list(self._axes)
        for d, k in zip(grid_dims, key):
            if is_runtime_index(k):
                axes[d] = self._select_at_runtime(axes[d], k, d)
            else:
                axes[d] = _select(axes[d], k, d, self.shape)
        if sum(a.runtime is not None for a in axes) > 1:
            raise NkiGridIndexError(f"grid index: a selection takes one runtime index (an indirect view cannot be "
                                    f"indirected again, {PAGES}/nki.language.NkiTensor.html) ({kernel_location()})")
        return self._with(tuple(axes))

    def _select_at_runtime(self, axis: Axis, k: Any, dim: int) -> Axis:
        """A device-side index on grid dim `dim` (the tiled-grid-selection tutorial): an NkiScalar or a (1, 1)
        SBUF int32/uint32 tensor is one coordinate, whole-sized (its extent cannot depend on the value); a
        (K, 1) one is K rows of the first tiled dim, relative to the selection's first row."""
        where = f"grid index: runtime index {k!r} in grid dim {dim}"
        if self._slots is not None:
            raise NkiValidationError(f"{where}: runtime indices select regions of an HBM grid, the DMA operands of a "
                                     f"gather or scatter; index an on-chip grid with compile-time ints "
                                     f"({TUTORIAL}) ({kernel_location()})")
        if not axis.contiguous:
            raise NkiValidationError(f"{where}: this dim was sliced with a step > 1; a runtime index needs evenly "
                                     f"spaced whole coordinates ({kernel_location()})")
        if isinstance(k, NkiTensor) and (k.buffer.name != "sbuf" or k.dtype not in (np.int32, np.uint32)
                                         or k.ndim != 2 or k.shape[1] != 1):
            raise NkiValidationError(f"{where}: an index tensor is an SBUF int32 or uint32 tensor of shape (1, 1) (one "
                                     f"coordinate) or (K, 1) (K row indices), got shape {k.shape} {k.dtype.name} in "
                                     f"{k.buffer.name} ({TUTORIAL}) ({kernel_location()})")
        rows = k.shape[0] if isinstance(k, NkiTensor) else 1
        first, length = axis.cells[0].start, self._backing.shape[dim]
        if rows == 1:
            extent = axis.nominal * axis.group
            step = extent * axis.step
            fits = max(0, (length - first - extent) // step + 1) if length >= first + extent else 0
            runtime = Runtime("scalar", k, step, min(axis.coordinates, fits))
            return dataclasses.replace(axis, cells=(Cell(0, first, first + extent),), kept=False, step=1,
                                       runtime=runtime)
        if not axis.tiled or dim != next(d for d, a in enumerate(self._axes) if a.tiled):
            raise NkiValidationError(f"{where}: (K, 1) row indices select rows of the first tiled dim (the tile's "
                                     f"partition rows), not dim {dim} ({TUTORIAL}) ({kernel_location()})")
        if rows > axis.nominal:
            raise NkiValidationError(f"{where}: {rows} row indices > {axis.nominal}, the rows of one tile (one row per "
                                     f"partition of the tile it moves into) ({kernel_location()})")
        return dataclasses.replace(axis, cells=(Cell(0, first, first + rows),), kept=False, step=1,
                                   runtime=Runtime("vector", k, 1, axis.extent))

    def _with(self, axes: tuple[Axis, ...]) -> "NkiGrid":
        return type(self)(self._backing, axes, self._slots)

    def require_static(self, api: str) -> None:
        """Refuse a selection that a runtime index moves: its tiles have no compile-time coordinates."""
        if any(a.runtime is not None for a in self._axes):
            raise NkiValidationError(f"{api}: this selection moves with a runtime index, so its tiles have no "
                                     f"compile-time coordinates; re-tile an on-chip copy of it ({kernel_location()})")

    def regrouped(self, groups: tuple[int, ...] | None) -> "NkiGrid":
        """Every tiled dim a grid dim again, `groups` tiles per coordinate (None: one; a tile grid)."""
        self.require_static("nl.tiles / nl.blocks")
        groups = iter(groups or ())
        axes = tuple(dataclasses.replace(a, kept=True, step=1, group=next(groups, 1)) if a.tiled else a
                     for a in self._axes)
        cls = NkiTileGrid if all(a.group == 1 for a in axes) else NkiBlockGrid
        return cls(self._backing, axes, self._slots)

    def clamped_to(self, step: "NkiGrid") -> "NkiGrid":
        """This on-chip grid (laid out like `step`'s first sibling by `packed`) cut to `step`'s extents: fewer or
        shorter cells where `step` ends in a partial block or tile, the same slots (no copy)."""
        theirs = [a for a in step._axes if a.tiled or a.kept]
        axes = tuple(dataclasses.replace(a, cells=tuple(Cell(c.index, c.start, c.start + s.extent)
                                                        for c, s in zip(a.cells, b.cells)))
                     for a, b in zip(self._axes, theirs))
        return self._with(axes)

    def packed(self) -> tuple[tuple[int, ...], tuple[Axis, ...]]:
        """(element shape, axes) of the same geometry laid out densely from element 0 (for empty_like)."""
        axes = []
        for a in self._axes:
            if not (a.tiled or a.kept):
                continue
            cells, start = [], 0
            for i, c in enumerate(a.cells):
                cells.append(Cell(i, start, start + c.extent))
                start += c.extent
            axes.append(dataclasses.replace(a, cells=tuple(cells), step=1, runtime=None))
        return tuple(a.extent for a in axes), tuple(axes)


class NkiTileGrid(NkiGrid):
    """A grid whose coordinates are single tiles (`nl.tiles`, `nl.alloc_tiles`)."""


class NkiBlockGrid(NkiGrid):
    """A grid whose coordinates are blocks of `block_shape` tiles (`nl.blocks`, `nl.alloc_blocks`)."""

    @property
    def block_shape(self) -> tuple[int, ...]:
        return tuple(a.group for a in self._axes if a.tiled)


# --- creation --------------------------------------------------------------------------------------------------
def tiles(source: Any, *, tile_shape: tuple[int, ...] | None = None) -> NkiTileGrid:
    """A tile-coordinate view of `source` (an NkiTensor, or a grid whose selection it re-tiles)."""
    return _grid("nl.tiles", source, tile_shape, None)


def blocks(source: Any, *, tile_shape: tuple[int, ...] | None = None, block_shape: tuple[int, ...]) -> NkiBlockGrid:
    """A block-coordinate view: `block_shape` tiles of `tile_shape` per coordinate."""
    return _grid("nl.blocks", source, tile_shape, block_shape)


def _grid(api: str, source: Any, tile_shape: Any, block_shape: Any) -> NkiGrid:
    if isinstance(source, NkiGrid):
        source.require_static(api)
        if tile_shape is not None and tuple(tile_shape) != source.tile_shape:
            source = source.data        # a new tiling of the selected region
        else:
            _check_block_shape(api, block_shape, source.tile_shape)
            return source.regrouped(block_shape)
    if not isinstance(source, NkiTensor):
        raise NkiArgumentError(f"{api}: source must be an NkiTensor, NkiTileGrid or NkiBlockGrid, got "
                               f"{type(source).__name__} ({kernel_location()})")
    if tile_shape is None:
        raise NkiArgumentError(f"{api}: tile_shape is required when the source is an NkiTensor ({kernel_location()})")
    return view_grid(api, source, tile_shape, block_shape)


def view_grid(api: str, source: NkiTensor, tile_shape: Any, block_shape: Any,
              slots: tuple[int, ...] | None = None, element_shape: tuple[int, ...] | None = None) -> NkiGrid:
    """The grid of `tile_shape` (grouped by `block_shape`) over `source`, or over `element_shape` elements
    kept in the slot tensor `source` (`slots` given: an on-chip allocation)."""
    element_shape = source.shape if element_shape is None else element_shape
    tile_shape = check_tile_shape(api, tile_shape, element_shape)
    if slots is None and source.buffer.on_chip and len(tile_shape) != len(element_shape):
        raise NkiValueError(f"{api}: tile_shape {tile_shape} leaves leading dims of the on-chip tensor {source.shape} "
                            f"untiled; untiled leading dims are an HBM tensor's ({PAGES}/nki.language.NkiTileGrid.html) "
                            f"({kernel_location()})")
    _check_block_shape(api, block_shape, tile_shape)
    untiled = len(element_shape) - len(tile_shape)
    groups = (1,) * untiled + tuple(block_shape or (1,) * len(tile_shape))
    nominal = (1,) * untiled + tile_shape
    axes = tuple(Axis(tuple(Cell(i, s, min(s + t, n)) for i, s in enumerate(range(0, n, t))), t, d >= untiled, g)
                 for d, (n, t, g) in enumerate(zip(element_shape, nominal, groups)))
    cls = NkiTileGrid if block_shape is None else NkiBlockGrid
    return cls(source, axes, slots)


def slot_layout(tile_shape: tuple[int, ...], element_shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(shape of the on-chip slot tensor [tile partitions, slots, *tile free dims], slot stride per dim):
    one whole-tile slot per cell, row-major over (untiled coordinates, tile coordinates)."""
    untiled = len(element_shape) - len(tile_shape)
    counts = tuple(element_shape[:untiled]) + tuple(-(-n // t) for n, t in zip(element_shape[untiled:], tile_shape))
    strides = tuple(int(np.prod(counts[d + 1:])) for d in range(len(counts)))
    return (tile_shape[0], math.prod(counts)) + tuple(tile_shape[1:]), strides


def check_tile_shape(api: str, tile_shape: Any, element_shape: tuple[int, ...]) -> tuple[int, ...]:
    tile_shape = check_shape(api, "tile_shape", tile_shape)
    if len(tile_shape) < 2 or len(tile_shape) > len(element_shape):
        raise NkiValueError(f"{api}: tile_shape {tile_shape} needs at least two dims and at most the tensor's "
                            f"{len(element_shape)} (shape {tuple(element_shape)}) ({PAGES}/nki.language.alloc_tiles.html) "
                            f"({kernel_location()})")
    return tile_shape


def _check_block_shape(api: str, block_shape: Any, tile_shape: tuple[int, ...]) -> None:
    """None (a tile grid) or positive tile counts, one per tile dim (the alloc_blocks page)."""
    if block_shape is not None and len(check_shape(api, "block_shape", block_shape)) != len(tile_shape):
        raise NkiValueError(f"{api}: block_shape {block_shape} must have the rank of tile_shape {tile_shape} "
                            f"({PAGES}/nki.language.alloc_blocks.html) ({kernel_location()})")


def check_shape(api: str, what: str, shape: Any) -> tuple[int, ...]:
    """A tuple of exact positive Python ints (TypeError / ValueError otherwise, as the alloc_tiles page says)."""
    if not isinstance(shape, tuple) or not all(type(n) is int for n in shape):
        raise NkiArgumentError(f"{api}: {what} must be a tuple of exact Python ints, got {shape!r} "
                               f"({PAGES}/nki.language.alloc_tiles.html) ({kernel_location()})")
    if not shape or any(n <= 0 for n in shape):
        raise NkiValueError(f"{api}: {what} {shape} must have positive entries ({kernel_location()})")
    return shape


# --- sharding coordinates ------------------------------------------------------------------------------------
def contiguous_indices(extent: int, *, shard_id: int, num_shards: int) -> slice:
    """The adjacent coordinates of [0, extent) that shard `shard_id` of `num_shards` owns: shard sizes differ by
    at most one, the lower shards taking the remainder (nki.language.contiguous_indices page)."""
    _check_sharding("nl.contiguous_indices", extent, shard_id, num_shards)
    size, extra = divmod(extent, num_shards)
    start = shard_id * size + min(shard_id, extra)
    return slice(start, start + size + (shard_id < extra))


def interleaved_indices(extent: int, *, shard_id: int, num_shards: int) -> slice:
    """Shard `shard_id`'s round-robin coordinates: shard_id, then every num_shards-th below extent
    (nki.language.interleaved_indices page); on a grid, a gapped selection."""
    _check_sharding("nl.interleaved_indices", extent, shard_id, num_shards)
    return slice(shard_id, extent, num_shards)


def _check_sharding(api: str, extent: Any, shard_id: Any, num_shards: Any) -> None:
    """Exact compile-time ints ("booleans and integer subclasses are rejected"), no empty shard."""
    for name, value in (("extent", extent), ("shard_id", shard_id), ("num_shards", num_shards)):
        if type(value) is not int:
            raise NkiArgumentError(f"{api}: {name} must be an exact Python int (a compile-time value; nl.program_id() "
                                   f"and nl.num_programs() are), got {type(value).__name__} {value!r} "
                                   f"({PAGES}/{api.replace('nl.', 'nki.language.')}.html) ({kernel_location()})")
    if extent < 1 or not 1 <= num_shards <= extent or not 0 <= shard_id < num_shards:
        raise NkiValueError(f"{api}: need extent >= 1, 1 <= num_shards <= extent (no shard is empty) and 0 <= shard_id "
                            f"< num_shards, got extent={extent}, shard_id={shard_id}, num_shards={num_shards} "
                            f"({PAGES}/{api.replace('nl.', 'nki.language.')}.html) ({kernel_location()})")


# --- indexing --------------------------------------------------------------------------------------------------
def _expand_ellipsis(key: tuple, ndim: int, shape: tuple[int, ...]) -> tuple:
    if sum(k is Ellipsis for k in key) > 1:
        raise NkiValidationError(f"grid index: at most one '...' allowed ({kernel_location()})")
    at = [i for i, k in enumerate(key) if k is Ellipsis]      # by identity: an NkiScalar's == is traced
    if at:
        i = at[0]
        key = key[:i] + (slice(None),) * (ndim - len(key) + 1) + key[i + 1:]
    if len(key) > ndim:
        raise NkiGridIndexError(f"grid index: {len(key)} indices for a grid of shape {shape} ({kernel_location()})")
    return key


def is_runtime_index(k: Any) -> bool:
    """An NkiScalar (or a loop's register) or an index tensor: a coordinate only the device knows."""
    return isinstance(k, NkiTensor) or callable(getattr(type(k), "scalar_offset_value", None))


def _select(axis: Axis, k: Any, dim: int, shape: tuple[int, ...]) -> Axis:
    n = axis.coordinates
    if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
        k = int(k)
        if not -n <= k < n:
            raise NkiGridIndexError(f"grid index: {k} out of range for grid dim {dim} of {n} coordinates (grid shape "
                                    f"{shape}) ({kernel_location()})")
        return dataclasses.replace(axis, cells=axis.coordinate(k % n), kept=False, step=1)
    if isinstance(k, slice):
        for bound in (k.start, k.stop, k.step):
            if bound is not None and not (isinstance(bound, (int, np.integer)) and not isinstance(bound, bool)):
                raise NkiValidationError(f"grid index: slice bound {bound!r} is not a compile-time int; a runtime "
                                         f"index selects one coordinate or K rows, not a slice ({kernel_location()})")
        if k.step is not None and k.step <= 0:
            raise NkiValidationError(f"grid index: slice step {k.step} in grid dim {dim}; grid slices take positive "
                                     f"steps ({PAGES}/nki.language.empty_like.html) ({kernel_location()})")
        chosen = range(n)[k]
        if not chosen:
            raise NkiGridIndexError(f"grid index: slice {k.start}:{k.stop} selects no coordinate of grid dim {dim} "
                                    f"({n} coordinates) ({kernel_location()})")
        cells = tuple(c for i in chosen for c in axis.coordinate(i))
        return dataclasses.replace(axis, cells=cells, step=axis.step * chosen.step)
    raise NkiValidationError(f"grid index: unsupported index {k!r} in grid dim {dim}: use compile-time ints, slices, "
                             f"'...', or a runtime index (an NkiScalar, or an SBUF int32/uint32 tensor of shape (1, 1) "
                             f"or (K, 1)) ({kernel_location()})")


__all__ = ["NkiGrid", "NkiTileGrid", "NkiBlockGrid", "tiles", "blocks", "contiguous_indices", "interleaved_indices"]
