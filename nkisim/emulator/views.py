"""`NkiTensor` view methods of NKI 0.6: access patterns (`.ap()`), dynamic (indirect) access and
the shape-based view primitives built on them.

Semantics, from the API reference page of `nki.language.NkiTensor`
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.language.NkiTensor.html)
and the access-pattern deep dive (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/deep-dives/nki-aps.html):
  * every view shares its tensor's storage; a pattern `[[step, num], ...]` addresses the storage
    flattened to 1-D: element (i0, i1, ...) is `offset + sum(ik * stepk)`; the view's shape is the nums;
  * `.ap(offset=None)` keeps the view's storage offset, `offset=N` adds N elements to it;
    `dtype=` reinterprets the storage (pattern and offset count elements of that dtype);
  * on-chip (SBUF/PSUM) patterns start with the partition dim, whose step must be the storage's
    elements per partition (a partition cannot be skipped);
  * `scalar_offset` (a [1, 1] SBUF tile, or a VirtualRegister such as a dynamic loop's index,
    as in the nl.fori_loop and dynamic-loops docs) adds `value * stride(indirect_dim)` elements at run
    time, the stride of that dim of the tensor `.ap()` is called on (`prod(shape[indirect_dim+1:])` when
    it is contiguous); `vector_offset` (a [P, 1] SBUF tile, `indirect_dim=0` only) makes partition p start at
    `offset + value[p] * stride(0)`, the pattern's leading step being ignored;
  * a dynamic `select` / `vector_select` is the same indirection built from the view's own strides;
  * "Indirect views cannot be re-indirected, and the dimension that participates in the indirection
    cannot be further sliced or selected" (`is_indirect` on that page): the vector dim (0), or the
    `indirect_dim` of a `scalar_offset` `.ap()` (a dynamic `select` removes its dim);
  * "The tensor being indexed (the one .ap() is called on) must be in HBM" for a `vector_offset`
    (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_copy.html,
    "Indirect addressing").
Indirect views are resolved when an instruction uses them (`resolve`, `element_indices`): the
index tile's values are read at that point, as the DMA engine reads them.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, NoReturn

import numpy as np

from .dtypes import resolve as resolve_dtype
from .errors import NkiValidationError, kernel_location


@dataclass(frozen=True)
class Indirection:
    """The run-time part of an indirect view: `index` values times `scale` elements are added to
    the start (scalar) or to each partition's start (vector)."""

    kind: str                     # "scalar" or "vector"
    index: Any                    # the NkiTensor holding the offsets
    scale: int                    # elements per index step
    pattern: tuple[tuple[int, int], ...]
    offset: int                   # element offset of the static part, in units of `dtype`
    dtype: np.dtype
    dim: int | None = None        # the view's dim that takes part in the indirection (None: none left)
    limit: int | None = None      # index values in [0, limit) stay inside the selection (a tile grid's runtime index)


class OutOfBoundsView:
    """An .ap() view whose pattern reaches outside its storage. Building one is not an error, using one is:
    nki-library's output_projection_tkg builds its stationary view one step past the last weight column
    ("the last psum tile may be incomplete") and issues the nc_matmul only under `if h_2_idx < cfg.h_2_size`,
    and neither the NkiTensor page nor the access-pattern deep dive checks bounds where a view is built."""

    __slots__ = ("shape", "dtype", "buffer", "why")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, buffer: Any, why: str) -> None:
        self.shape, self.dtype, self.buffer, self.why = shape, dtype, buffer, why

    ndim = property(lambda self: len(self.shape))

    def refuse(self, use: str) -> NoReturn:
        raise NkiValidationError(f"{use}: this tensor {self.why} ({kernel_location()})")

    def __getattr__(self, name: str) -> Any:       # every other view method and attribute
        self.refuse(f"NkiTensor.{name}")

    def __getitem__(self, key: Any) -> Any:
        self.refuse("index")

    def __repr__(self) -> str:
        return f"OutOfBoundsView(shape={self.shape}, dtype={self.dtype.name})"


def _fail(api: str, msg: str) -> None:
    raise NkiValidationError(f"{api}: {msg} ({kernel_location()})")


def _int(api: str, role: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        _fail(api, f"{role} must be a compile-time int, got {type(value).__name__} {value!r}")
    return int(value)


def _dim(api: str, t: Any, dim: Any, extra: int = 0) -> int:
    dim = _int(api, "dim", dim)
    n = t.ndim + extra
    if not -n <= dim < n:
        _fail(api, f"dim {dim} out of range for a {t.ndim}-D tensor of shape {t.shape}")
    return dim % n


def _resolve_dtype(api: str, dtype: Any) -> np.dtype:
    dt = resolve_dtype(dtype)
    if dt is None:
        _fail(api, f"dtype {dtype!r} is not an NKI dtype")
    return dt


class TensorViews:
    """Mixin of `NkiTensor`: every method returns a new view of the same storage (no copy)."""

    __slots__ = ()

    # --- queries ---------------------------------------------------------------------------------
    def is_contiguous(self) -> bool:
        """Row-major contiguous over the free dims (on chip) or all dims (HBM); size-1 dims ignored."""
        expected = 1
        dims = range(1 if self.buffer.on_chip else 0, self.ndim)
        for d in reversed(dims):
            if self.shape[d] != 1 and self.strides[d] != expected:
                return False
            expected *= self.shape[d]
        return True

    def get_pattern(self) -> list[list[int]]:
        """`[[stride, count], ...]`, one pair per dim, in elements."""
        if self.indirection is not None:
            return [list(p) for p in self.indirection.pattern]
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    def is_indirect(self) -> bool:
        return self.indirection is not None

    def indirect(self, index: Any, num_elem: Any = None) -> Any:
        """Tensor Indirection: NeuronCore-v4 (trn3) only (NkiTensor reference page)."""
        _fail("NkiTensor.indirect", "Tensor Indirection is available on NeuronCore-v4 (trn3) and later; nkisim "
                                    "emulates trn2 (NeuronCore-v3), where it does not exist")

    # --- the access pattern ----------------------------------------------------------------------
    def ap(self, pattern: Any, offset: Any = None, scalar_offset: Any = None, vector_offset: Any = None,
           indirect_dim: Any = 0, dtype: Any = None) -> Any:
        """The view `pattern` describes over this tensor's storage (see the module docstring)."""
        api = "NkiTensor.ap"
        dt = self.dtype if dtype is None else _resolve_dtype(api, dtype)
        pairs = _pattern(api, pattern)
        base_bytes = self.storage_offset_bytes()
        if base_bytes % dt.itemsize:
            _fail(api, f"the view's offset of {base_bytes} bytes is not a whole number of {dt.name} elements")
        start = base_bytes // dt.itemsize + (0 if offset is None else _int(api, "offset", offset))
        if scalar_offset is not None and vector_offset is not None:
            _fail(api, "give at most one of scalar_offset and vector_offset")
        if scalar_offset is None and vector_offset is None:
            return self._strided(api, pairs, start, dt, defer_bounds=True)
        indirect_dim = _dim(api, self, indirect_dim)
        scale = self._indirect_step(api, indirect_dim, dt)
        if vector_offset is not None:
            if indirect_dim != 0:
                _fail(api, f"vector_offset supports indirect_dim=0 only, got {indirect_dim}")
            if self.buffer.on_chip:
                _fail(api, f"the tensor indexed by a vector_offset must be in HBM, this one is in {self.buffer.name} "
                           f"(dma_copy reference, \"Indirect addressing\"); gather on chip with nisa.nc_n_gather or "
                           f"nisa.local_gather")
            return self._indirect(api, "vector", vector_offset, scale, pairs, start, dt, dim=0)
        return self._indirect(api, "scalar", scalar_offset, scale, pairs, start, dt,
                              dim=indirect_dim if indirect_dim < len(pairs) else None)

    def _indirect_step(self, api: str, dim: int, dt: np.dtype) -> int:
        """Elements of `dt` one index step on `dim` moves: the stride of this view's dim ("indirect_dim: dimension in
        self.shape whose stride scales the indirect scalar/vector offset", NkiTensor.ap, 2.32 API stub). On a
        contiguous tensor that is prod(shape[dim + 1:]), the access-pattern deep dive's formula; on a permuted or
        sliced view it is the view's own stride (nki-library's attention_tkg indexes a permuted block table so)."""
        step = self.arr.strides[dim]
        if step % dt.itemsize:
            _fail(api, f"dim {dim} steps {step} bytes, not a whole number of {dt.name} elements; an indirect offset "
                       f"on it cannot be counted in {dt.name} elements")
        return step // dt.itemsize

    def runtime_view(self, kind: str, index: Any, scale: int, pattern: list[list[int]], offset: int,
                     dim: int | None, limit: int) -> Any:
        """The indirect view a tile grid's runtime index selects (tile_grids.py): `pattern` at `offset` elements
        of this tensor's storage, `index` values times `scale` elements added to the start ("scalar") or to
        each partition's start ("vector"); values outside [0, limit) are out of bounds."""
        pairs = tuple((int(s), int(n)) for s, n in pattern)
        return self._indirect("grid index", kind, index, scale, pairs, offset, self.dtype, dim, limit)

    def storage_offset_bytes(self) -> int:
        return self.indirection.offset * self.indirection.dtype.itemsize if self.indirection is not None else self.byte_offset

    def _strided(self, api: str, pairs: tuple[tuple[int, int], ...], start: int, dt: np.dtype,
                 defer_bounds: bool = False) -> Any:
        flat = _flat(self.storage.data, dt)
        pairs = self._partition_step(api, pairs, dt)
        counts = [n for _, n in pairs]
        if 0 in counts:
            _fail(api, f"every count must be positive, got pattern {[list(p) for p in pairs]}")
        lo = start + sum(s * (n - 1) for s, n in pairs if s < 0)
        hi = start + sum(s * (n - 1) for s, n in pairs if s > 0)
        if lo < 0 or hi >= flat.size:
            reach = (f"pattern {[list(p) for p in pairs]} at offset {start} reaches elements {lo}..{hi}, outside the "
                     f"{flat.size} {dt.name} elements of {self.storage.name or 'the tensor'}'s storage")
            if not defer_bounds:
                _fail(api, reach)
            return OutOfBoundsView(tuple(counts), dt, self.buffer,
                                   f"is an .ap() view built at {kernel_location()} whose {reach}")
        arr = np.lib.stride_tricks.as_strided(flat[start:], shape=tuple(counts),
                                              strides=tuple(s * dt.itemsize for s, _ in pairs))
        return type(self)(self.storage, arr, start * dt.itemsize)

    def _partition_step(self, api: str, pairs: tuple[tuple[int, int], ...], dt: np.dtype) -> tuple[tuple[int, int], ...]:
        """An on-chip pattern's leading pair steps one partition: its step is the element count of the
        tensor's free dims (access-pattern deep dive), that of the storage or, for a view such as a column
        slice, of the view (nki-library's MLP writes so). Returned with the storage's partition step."""
        if not self.buffer.on_chip:
            return pairs
        per_partition = self.storage.bytes_per_partition // dt.itemsize
        view_free = math.prod(self.shape[1:]) * self.dtype.itemsize // dt.itemsize
        step, count = pairs[0]
        if len(pairs) < 2 or (count > 1 and step not in (per_partition, view_free)):
            _fail(api, f"an on-chip pattern starts with the partition dim, whose step must be the {per_partition} "
                       f"{dt.name} elements of a partition (a partition cannot be skipped), got "
                       f"{[list(p) for p in pairs]}")
        return ((per_partition, count),) + pairs[1:]

    def _indirect(self, api: str, kind: str, index: Any, scale: int, pairs: tuple[tuple[int, int], ...],
                  start: int, dt: np.dtype, dim: int | None = None, limit: int | None = None) -> Any:
        if self.indirection is not None:
            _fail(api, "this view is already indirect; only one dynamic index per view")
        if kind == "scalar" and _is_register(index):      # a loop's induction register (nl.fori_loop docs)
            if self.buffer.on_chip and getattr(index, "dtype", None) == np.int64:
                _fail(api, f"an nl.int64 NkiScalar offsets HBM access patterns only; on an {self.buffer.name} operand "
                           f"the offset must be nl.int32 (nki.isa.scalar_load page: on-chip buffers are megabytes, so "
                           f"a 64-bit offset there is rejected rather than narrowed)")
            pairs = self._partition_step(api, pairs, dt)
            return self._make_indirect(Indirection(kind, index, scale, pairs, start, dt, dim, limit))
        if not isinstance(index, type(self)) or index.buffer.name != "sbuf":
            _fail(api, f"the {kind} offset must be an SBUF tile, got {type(index).__name__}")
        if index.dtype.kind not in "iu":
            _fail(api, f"the {kind} offset tile must hold integers, got {index.dtype.name}")
        if kind == "scalar" and index.size != 1:
            _fail(api, f"scalar_offset must be a [1, 1] tile, got shape {index.shape}")
        if kind == "vector":
            # dma_copy takes one index per partition ([P, 1]); dma_transpose's gather form also takes
            # [128, N], read column by column. Each instruction checks its own form.
            if index.ndim > 2 and all(n == 1 for n in index.shape[2:]):
                # [P, N, 1, ...] names the same indices as [P, N] (nki-library's router_topk writes [P, 1, 1])
                index = index.reshape(index.shape[:2])
            if index.ndim != 2:
                _fail(api, f"vector_offset must be a 2-D [P, N] SBUF tile (trailing size-1 dims allowed), got "
                           f"shape {index.shape}")
            if pairs[0][1] > index.size:
                _fail(api, f"the pattern's leading count {pairs[0][1]} exceeds the {index.size} indices of "
                           f"vector_offset {index.shape}")
        else:
            pairs = self._partition_step(api, pairs, dt)
        return self._make_indirect(Indirection(kind, index, scale, pairs, start, dt, dim, limit))

    def _make_indirect(self, ind: Indirection) -> Any:
        shape = tuple(n for _, n in ind.pattern)
        dummy = np.lib.stride_tricks.as_strided(np.zeros(1, ind.dtype), shape=shape, strides=(0,) * len(shape))
        dummy.flags.writeable = False      # data is only reached through resolve()/element_indices()
        view = type(self)(self.storage, dummy, ind.offset * ind.dtype.itemsize)
        view.indirection = ind
        return view

    # --- shape-based primitives ------------------------------------------------------------------
    def permute(self, dims: Any) -> Any:
        api = "NkiTensor.permute"
        dims = tuple(_int(api, "dims", d) for d in dims)
        if sorted(dims) != list(range(self.ndim)):
            _fail(api, f"dims {dims} must be a permutation of range({self.ndim})")
        if (self.buffer.on_chip or self._vector()) and dims[0] != 0:
            _fail(api, f"dims[0] must be 0: the partition dim stays outermost, got {dims}")
        return self._rebuild(api, [self.get_pattern()[d] for d in dims], moved=dims.index)

    def broadcast(self, dim: Any, size: Any) -> Any:
        api = "NkiTensor.broadcast"
        dim, size = _dim(api, self, dim), _int(api, "size", size)
        if self.shape[dim] != 1:
            _fail(api, f"dim {dim} has size {self.shape[dim]}; only a size-1 dim can be broadcast")
        if dim == 0 and self.buffer.on_chip:
            _fail(api, "the partition dim (0) of an on-chip tensor cannot be broadcast")
        pattern = self.get_pattern()
        pattern[dim] = [0, size]
        return self._rebuild(api, pattern)

    def expand_dim(self, dim: Any) -> Any:
        api = "NkiTensor.expand_dim"
        dim = _dim(api, self, dim, extra=1)
        if dim == 0 and (self.buffer.on_chip or self._vector()):
            _fail(api, "cannot insert a dim before the partition dim (dim must not be 0)")
        pattern = self.get_pattern()
        pattern.insert(dim, [1, 1])
        return self._rebuild(api, pattern, moved=lambda d: d + (d >= dim))

    def squeeze_dim(self, dim: Any) -> Any:
        api = "NkiTensor.squeeze_dim"
        dim = _dim(api, self, dim)
        if self.shape[dim] != 1:
            _fail(api, f"dim {dim} has size {self.shape[dim]}; only a size-1 dim can be removed")
        if dim == 0 and (self.buffer.on_chip or self._vector()):
            _fail(api, "the partition dim (0) cannot be removed")
        pattern = self.get_pattern()
        del pattern[dim]
        return self._rebuild(api, pattern, moved=lambda d: None if d == dim else d - (d > dim))

    def reshape_dim(self, dim: Any, shape: Any) -> Any:
        api = "NkiTensor.reshape_dim"
        dim = _dim(api, self, dim)
        sizes = [_int(api, "shape", n) for n in shape]
        sizes = _infer(api, sizes, self.shape[dim])
        if dim == 0 and (self.buffer.on_chip or self._vector()) and len(sizes) != 1:
            _fail(api, f"the partition dim (0) cannot be split, got shape {tuple(sizes)}")
        pattern = self.get_pattern()
        stride = pattern[dim][0]
        split = [[stride * math.prod(sizes[i + 1:]), n] for i, n in enumerate(sizes)]
        return self._rebuild(api, pattern[:dim] + split + pattern[dim + 1:],
                             moved=lambda d: d if d < dim else None if d == dim else d + len(sizes) - 1)

    def flatten_dims(self, start_dim: Any, end_dim: Any) -> Any:
        api = "NkiTensor.flatten_dims"
        start, end = _dim(api, self, start_dim), _dim(api, self, end_dim)
        if start > end:
            _fail(api, f"start_dim {start} is after end_dim {end}")
        if start == 0 and (self.buffer.on_chip or self._vector()) and end > 0:
            _fail(api, "the partition dim (0) cannot be merged: start_dim must be > 0")
        pattern = self.get_pattern()
        for d in range(start, end):
            if pattern[d][1] != 1 and pattern[d + 1][1] != 1 and pattern[d][0] != pattern[d + 1][0] * pattern[d + 1][1]:
                _fail(api, f"dims {start}..{end} of {self.shape} (strides {self.strides}) are not contiguous in memory")
        live = [p for p in pattern[start:end + 1] if p[1] != 1] or [pattern[end]]
        merged = [live[-1][0], math.prod(p[1] for p in pattern[start:end + 1])]
        return self._rebuild(api, pattern[:start] + [merged] + pattern[end + 1:],
                             moved=lambda d: d if d < start else None if d <= end else d - (end - start))

    def rearrange(self, src_pattern: Any, dst_pattern: Any, fixed_sizes: dict[str, int] | None = None) -> Any:
        """einops-style: split the grouped dims of `src_pattern`, reorder to `dst_pattern`, merge its groups."""
        api = "NkiTensor.rearrange"
        src, dst = _groups(api, src_pattern), _groups(api, dst_pattern)
        if len(src) != self.ndim:
            _fail(api, f"src_pattern has {len(src)} dims but the tensor has {self.ndim} ({self.shape})")
        names = [n for g in src for n in g]
        if sorted(names) != sorted(n for g in dst for n in g) or len(set(names)) != len(names):
            _fail(api, f"src_pattern {src_pattern!r} and dst_pattern {dst_pattern!r} must name the same dims once each")
        fixed = dict(fixed_sizes or {})
        view = self
        at = 0
        for group, n in zip(src, self.shape):
            if len(group) > 1:
                sizes = _infer(api, [fixed.get(g, -1) for g in group], n)
                fixed.update(zip(group, sizes))
                view = view.reshape_dim(at, tuple(sizes))
            else:
                fixed[group[0]] = n
            at += len(group)
        view = view.permute(tuple(names.index(n) for g in dst for n in g))
        at = 0
        for group in dst:
            if len(group) > 1:
                view = view.flatten_dims(at, at + len(group) - 1)
            at += 1
        return view

    def slice(self, dim: Any, start: Any, end: Any, step: Any = 1) -> Any:
        api = "NkiTensor.slice"
        dim = _dim(api, self, dim)
        start, end, step = (_int(api, r, v) for r, v in (("start", start), ("end", end), ("step", step)))
        if not 0 <= start < end <= self.shape[dim] or step < 1:
            _fail(api, f"need 0 <= start < end <= {self.shape[dim]} and step >= 1 for dim {dim}, got "
                       f"start={start}, end={end}, step={step}")
        if self.indirection is not None and self._indirect_dims(dim):
            _fail(api, f"dim {dim} takes part in this view's indirection and cannot be sliced")
        pattern = self.get_pattern()
        stride = pattern[dim][0]
        pattern[dim] = [stride * step, len(range(start, end, step))]
        return self._rebuild(api, pattern, shift=stride * start)

    def select(self, dim: Any, index: Any) -> Any:
        api = "NkiTensor.select"
        dim = _dim(api, self, dim)
        pattern = self.get_pattern()
        if isinstance(index, type(self)):
            if dim == 0 and self.buffer.on_chip:
                _fail(api, "a dynamic select on an on-chip tensor cannot use the partition dim (0)")
            if self.indirection is not None:
                _fail(api, "this view is already indirect; only one dynamic select per view")
            stride = pattern.pop(dim)[0]
            return self._indirect(api, "scalar", index, stride, tuple(map(tuple, pattern)), self.offset_elements(),
                                  self.dtype)
        index = _int(api, "index", index)
        if not 0 <= index < self.shape[dim]:
            _fail(api, f"index {index} out of range for dim {dim} of size {self.shape[dim]}")
        if self.indirection is not None and self._indirect_dims(dim):
            _fail(api, f"dim {dim} takes part in this view's indirection and cannot be selected")
        if dim == 0 and self.buffer.on_chip:
            _fail(api, "the partition dim (0) of an on-chip tensor cannot be removed; slice it instead")
        stride = pattern.pop(dim)[0]
        if self.buffer.on_chip and len(pattern) < 2:
            pattern.append([1, 1])      # on-chip views keep a free dim, as indexing does
        return self._rebuild(api, pattern, shift=stride * index, moved=lambda d: d - (d > dim))

    def vector_select(self, dim: Any, vector_offset: Any) -> Any:
        api = "NkiTensor.vector_select"
        if _int(api, "dim", dim) != 0:
            _fail(api, f"dim must be 0, got {dim}")
        if self.buffer.on_chip:
            _fail(api, f"vector_select is only supported on HBM tensors, this one is in {self.buffer.name}")
        if self.indirection is not None:
            _fail(api, "this view is already indirect; only one dynamic select per view")
        if not isinstance(vector_offset, type(self)):
            _fail(api, f"vector_offset must be an SBUF tile, got {type(vector_offset).__name__}")
        pattern = self.get_pattern()
        stride = pattern[0][0]
        pattern[0] = [stride, vector_offset.shape[0]]
        return self._indirect(api, "vector", vector_offset, stride, tuple(map(tuple, pattern)), self.offset_elements(),
                              self.dtype, dim=0)

    def offset_elements(self) -> int:
        return self.storage_offset_bytes() // self.dtype.itemsize

    # --- helpers ---------------------------------------------------------------------------------
    def _vector(self) -> bool:
        return self.indirection is not None and self.indirection.kind == "vector"

    def _indirect_dims(self, dim: int) -> bool:
        """Whether `dim` takes part in the indirection: the per-partition dim of a vector offset, the
        `indirect_dim` of a scalar-offset `.ap()` (a dynamic select's dim is already gone)."""
        return self.indirection.dim == dim

    def _rebuild(self, api: str, pattern: list[list[int]], shift: int = 0,
                 moved: Callable[[int], int | None] = lambda d: d) -> Any:
        """The view `pattern` describes; `moved` maps an old dim to its new number (None: merged away)."""
        pairs = tuple((int(s), int(n)) for s, n in pattern)
        ind = self.indirection
        if ind is None:
            return self._strided_unchecked(pairs, self.offset_elements() + shift)
        dim = None if ind.dim is None else moved(ind.dim)
        return self._make_indirect(dataclasses.replace(ind, pattern=pairs, offset=ind.offset + shift, dim=dim))

    def _strided_unchecked(self, pairs: tuple[tuple[int, int], ...], start: int) -> Any:
        dt = self.dtype
        flat = _flat(self.storage.data, dt)
        arr = np.lib.stride_tricks.as_strided(flat[start:] if start < flat.size else flat[:0], shape=tuple(n for _, n in pairs),
                                              strides=tuple(s * dt.itemsize for s, _ in pairs))
        return type(self)(self.storage, arr, start * dt.itemsize)


def _flat(data: np.ndarray, dt: np.dtype) -> np.ndarray:
    flat = data.reshape(-1)
    return flat if flat.dtype == dt else flat.view(np.uint8).view(dt)


def _pattern(api: str, pattern: Any) -> tuple[tuple[int, int], ...]:
    if not isinstance(pattern, (list, tuple)) or not pattern or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 for p in pattern):
        _fail(api, f"pattern must be a non-empty list of [step, num] pairs, got {pattern!r}")
    pairs = tuple((_int(api, "step", s), _int(api, "num", n)) for s, n in pattern)
    if any(n < 1 for _, n in pairs):
        _fail(api, f"every num must be positive, got pattern {[list(p) for p in pairs]}")
    return pairs


def _infer(api: str, sizes: list[int], total: int) -> list[int]:
    unknown = [i for i, n in enumerate(sizes) if n == -1]
    if len(unknown) > 1 or any(n < 1 for n in sizes if n != -1):
        _fail(api, f"sizes {tuple(sizes)} may contain one -1, the others must be positive")
    known = math.prod(n for n in sizes if n != -1)
    if unknown:
        if total % known:
            _fail(api, f"cannot split {total} into {tuple(sizes)}")
        sizes[unknown[0]] = total // known
    if math.prod(sizes) != total:
        _fail(api, f"sizes {tuple(sizes)} multiply to {math.prod(sizes)}, not {total}")
    return sizes


def _groups(api: str, pattern: Any) -> list[tuple[str, ...]]:
    out = []
    for item in pattern:
        group = (item,) if isinstance(item, str) else tuple(item)
        if not group or not all(isinstance(g, str) for g in group):
            _fail(api, f"a pattern holds dim names or tuples of dim names, got {item!r}")
        out.append(group)
    return out


# --- resolution at instruction time --------------------------------------------------------------
def element_indices(t: Any, oob_skip: bool, fail: Callable[[str], None]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(flat storage in the view's dtype, element index of every view element in row-major order,
    validity mask) for a plain or indirect view; out-of-bounds accesses fail unless `oob_skip`."""
    ind = t.indirection
    if ind is None:
        flat = _flat(t.storage.data, t.dtype)
        idx = t.offset_elements() + _grid([s for s in t.strides], t.shape)
        return flat, idx.reshape(-1), np.ones(idx.size, bool)
    flat = _flat(t.storage.data, ind.dtype)
    values = _index_values(ind)
    if ind.kind == "vector":   # a [P, N] index tile is read column by column, as many as the pattern's rows
        values = values.reshape(ind.index.shape).T.reshape(-1)[:pattern_rows(ind)]
    pattern = ind.pattern
    if ind.kind == "scalar":
        values = values[:1]
        idx = ind.offset + int(values[0]) * ind.scale + _grid([s for s, _ in pattern], [n for _, n in pattern])
        idx = idx.reshape(-1)
        row_ok = np.array([bool((idx >= 0).all() and (idx < flat.size).all())])
        valid = np.full(idx.size, row_ok[0] and _within_limit(ind, values)[0])
    else:
        rest = _grid([s for s, _ in pattern[1:]], [n for _, n in pattern[1:]]).reshape(-1)
        starts = ind.offset + values * ind.scale
        rows = starts[:, None] + rest[None, :]
        row_ok = (values >= 0) & (rows >= 0).all(axis=1) & (rows < flat.size).all(axis=1)
        idx = rows.reshape(-1)
        valid = np.repeat(row_ok & _within_limit(ind, values), rest.size)
    if not valid.all():
        if not oob_skip:
            fail(_out_of_bounds(t, ind, values, row_ok, flat.size) +
                 " (oob_mode=nisa.oob_mode.error; use oob_mode.skip to skip them)")
        idx = np.where(valid, idx, 0)
    return flat, idx, valid


def _within_limit(ind: Indirection, values: np.ndarray) -> np.ndarray:
    return np.ones(values.size, bool) if ind.limit is None else (values >= 0) & (values < ind.limit)


def _out_of_bounds(t: Any, ind: Indirection, values: np.ndarray, in_storage: np.ndarray, size: int) -> str:
    beyond = values[~_within_limit(ind, values)]
    if beyond.size:
        valid = f"0..{ind.limit - 1}" if ind.limit else "none: no whole coordinate fits in the tensor"
        return (f"runtime grid index value(s) {beyond[:4].tolist()} select outside the grid selection (valid values: "
                f"{valid}; a runtime coordinate moves a whole tile, rows are counted from the selection's first)")
    return (f"indirect {ind.kind} offset value(s) {values[~in_storage][:4].tolist()} address outside the {size} "
            f"elements of {t.storage.name or 'the tensor'}")


def storage_elements(t: Any, oob_skip: bool, fail: Callable[[str], None]) -> np.ndarray:
    """The flat indices, in the storage's own dtype, of the storage elements a plain or indirect
    view accesses (skipped out-of-bounds accesses left out; a `dtype=` view of other-sized
    elements covers every storage element its bytes touch)."""
    _, idx, ok = element_indices(t, oob_skip, fail)
    idx = idx[ok]
    view_size = (t.indirection.dtype if t.indirection is not None else t.dtype).itemsize
    size = t.storage.data.itemsize
    if view_size == size:
        return idx
    first = idx * view_size // size
    return (first[:, None] + np.arange(max(1, view_size // size))).reshape(-1)


def pattern_rows(ind: Indirection) -> int:
    """Rows a vector-indirect view gathers: the count of its pattern's leading (indexed) dim."""
    return ind.pattern[0][1]


def _grid(strides: list[int], shape: tuple[int, ...] | list[int]) -> np.ndarray:
    idx = np.zeros(tuple(shape), np.int64)
    for d, (s, n) in enumerate(zip(strides, shape)):
        idx += (np.arange(n, dtype=np.int64) * s).reshape((1,) * d + (n,) + (1,) * (len(shape) - d - 1))
    return idx


def _is_register(index: Any) -> bool:
    """A VirtualRegister (registers.py, which builds on this module, so it is recognised by its method)."""
    return callable(getattr(type(index), "scalar_offset_value", None))


def _index_values(ind: Indirection) -> np.ndarray:
    if _is_register(ind.index):
        return np.array([ind.index.scalar_offset_value()], np.int64)
    ind.index.storage.materialise()      # a never-written index reads the uninitialised sentinel
    return ind.index.arr.reshape(-1).astype(np.int64)


def resolve(t: Any, fail: Callable[[str], None], compute: bool = True) -> Any:
    """A scalar-indirect view as the plain view its index selects now (compute-engine operands);
    a dry run has no index values and takes index 0."""
    ind = t.indirection
    if ind is None:
        return t
    if ind.kind == "vector":
        fail("a vector_offset (per-partition indirect) view is a DMA operand of an HBM tensor; "
             "compute engines cannot use it")
    value = int(_index_values(ind)[0]) if compute else 0
    if not _within_limit(ind, np.array([value]))[0]:
        fail(_out_of_bounds(t, ind, np.array([value]), np.array([True]), 0))
    plain = type(t)(t.storage, t.storage.data, 0)
    return plain._strided("indirect access", ind.pattern, ind.offset + value * ind.scale, ind.dtype)
