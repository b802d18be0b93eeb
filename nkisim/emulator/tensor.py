"""Buffers, storages and `NkiTensor` views.

A `Storage` is one allocation (an `nl.ndarray`, or a kernel argument) backed by a contiguous
numpy array. An `NkiTensor` is a view of a storage, itself a numpy view, so slicing is free and
writes through a view land in the storage. Indexing follows NKI:
  * on-chip (sbuf/psum) tensors keep dim 0, the partition dim, even for an integer index, and
    stay at least 2-D (a dropped last free dim comes back as size 1);
  * HBM tensors drop integer-indexed dims (numpy semantics);
  * slices may have steps and negative bounds; `nl.ds(start, size)` is `start:start+size`;
    a slice reaching past the end of a dim is an error (numpy would clip it silently).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import NkiValidationError, kernel_location
from .trace import Operand, Region

PMAX = 128


@dataclass(frozen=True, eq=False)
class Buffer:
    """A memory space: `nl.sbuf`, `nl.psum`, `nl.private_hbm` (= `nl.hbm`), `nl.shared_hbm`."""

    name: str

    @property
    def on_chip(self) -> bool:
        return self.name in ("sbuf", "psum")

    def __repr__(self) -> str:
        return f"nl.{self.name}"


SBUF = Buffer("sbuf")
PSUM = Buffer("psum")
PRIVATE_HBM = Buffer("private_hbm")
SHARED_HBM = Buffer("shared_hbm")
ARG_HBM = Buffer("hbm")  # kernel arguments of an LNC=1 launch (as the official simulator labels them)


@dataclass(eq=False)
class Storage:
    """One allocation: its buffer, backing array, owner program and where the kernel made it."""

    id: int
    buffer: Buffer
    data: np.ndarray
    program: int | None          # None for storages visible to every program (shared HBM)
    name: str
    source: str                  # kernel line of the allocation
    written: bool = False        # some instruction wrote it (non-contiguous arguments are copied back)
    written_mask: dict[int, np.ndarray] = field(default_factory=dict)  # LNC=2 overlap check

    @property
    def base_ptr(self) -> int:
        return self.data.__array_interface__["data"][0]

    @property
    def bytes_per_partition(self) -> int:
        return self.data.nbytes // self.data.shape[0]


@dataclass(frozen=True)
class ds:
    """`nl.ds(start, size)`: the slice start:start+size."""

    start: int
    size: int


class NkiTensor:
    """A view of a storage: `shape, dtype, buffer, strides, offset, ndim, size, name`."""

    __slots__ = ("storage", "arr")

    def __init__(self, storage: Storage, arr: np.ndarray) -> None:
        self.storage = storage
        self.arr = arr

    shape = property(lambda self: tuple(self.arr.shape))
    dtype = property(lambda self: self.arr.dtype)
    buffer = property(lambda self: self.storage.buffer)
    ndim = property(lambda self: self.arr.ndim)
    size = property(lambda self: int(self.arr.size))
    name = property(lambda self: self.storage.name)

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    @property
    def offset(self) -> int:
        """Element offset of this view's first element in its storage."""
        return (self._ptr() - self.storage.base_ptr) // self.storage.data.itemsize

    def _ptr(self) -> int:
        return self.arr.__array_interface__["data"][0]

    @property
    def partitions(self) -> int:
        return self.arr.shape[0] if self.storage.buffer.on_chip else 1

    @property
    def elements_per_partition(self) -> int:
        return self.size // self.partitions if self.size else 0

    def __repr__(self) -> str:
        return f"NkiTensor(shape={self.shape}, dtype={self.dtype.name}, buffer={self.buffer!r}, name={self.name!r})"

    # --- views -----------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "NkiTensor":
        key = _normalise_key(key, self.arr.shape, self.buffer.on_chip)
        view = self.arr[key]
        if self.buffer.on_chip and view.ndim < 2:
            view = view.reshape(view.shape + (1,) * (2 - view.ndim))
        return NkiTensor(self.storage, view)

    def __setitem__(self, key: Any, value: Any) -> None:
        raise NkiValidationError(
            "NKI tensors are written by nki.isa instructions (dst=...) or nl.store, not by item "
            f"assignment ({kernel_location()})")

    def reshape(self, *shape: Any) -> "NkiTensor":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        where = kernel_location()
        if int(np.prod(shape)) != self.size:
            raise NkiValidationError(
                f"reshape: element count {int(np.prod(shape))} of {shape} differs from {self.size} of {self.shape} ({where})")
        if self.buffer.on_chip and shape[0] != self.shape[0]:
            raise NkiValidationError(
                f"reshape: partition dim {shape[0]} must stay {self.shape[0]} for an on-chip tensor ({where})")
        try:
            view = np.reshape(self.arr, shape, copy=False)
        except ValueError:
            raise NkiValidationError(
                f"reshape: the strided view {self.shape} cannot be reshaped to {shape} without a copy ({where})") from None
        return NkiTensor(self.storage, view)

    def view(self, dtype: Any) -> "NkiTensor":
        """Reinterpret the bytes as another dtype (the last dim scales with the itemsize ratio)."""
        from .dtypes import resolve

        dt = resolve(dtype)
        if dt is None:
            raise NkiValidationError(f"view: unsupported dtype {dtype!r} ({kernel_location()})")
        try:
            return NkiTensor(self.storage, self.arr.view(dt))
        except ValueError as err:
            raise NkiValidationError(f"view: {err} ({kernel_location()})") from None

    # --- trace ----------------------------------------------------------------------------
    def region(self) -> Region:
        """Bounding box of this view in its storage (partitions x free elements, or flat for HBM)."""
        st = self.storage
        isz = st.data.itemsize
        off = self._ptr() - st.base_ptr
        if self.arr.size == 0:
            return Region(st.id, 0, 0, 0, 0)
        if not st.buffer.on_chip:
            lo, hi = _extent(off, self.arr.shape, self.arr.strides, self.arr.itemsize)
            return Region(st.id, 0, 1, lo // isz, -(-hi // isz))
        row = st.bytes_per_partition
        p_first = off // row
        p_step = self.arr.strides[0] // row
        p_last = p_first + (self.arr.shape[0] - 1) * p_step
        lo, hi = _extent(off % row, self.arr.shape[1:], self.arr.strides[1:], self.arr.itemsize)
        return Region(st.id, min(p_first, p_last), max(p_first, p_last) + 1, lo // isz, -(-hi // isz))

    def operand(self, role: str) -> Operand:
        return Operand(
            role=role, buffer=self.buffer.name, dtype=self.dtype.name, shape=self.shape,
            partitions=self.partitions, elements_per_partition=self.elements_per_partition,
            itemsize=self.arr.itemsize,
            contiguous=self.arr.ndim == 0 or self.arr.shape[-1] == 1 or self.arr.strides[-1] == self.arr.itemsize,
            region=self.region())


def _extent(offset: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Byte range [lo, hi) touched by a strided view starting at `offset`."""
    lo = hi = offset
    for n, s in zip(shape, strides):
        span = (n - 1) * s
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return lo, hi + itemsize


def _normalise_key(key: Any, shape: tuple[int, ...], on_chip: bool) -> tuple:
    where = kernel_location
    key = key if isinstance(key, tuple) else (key,)
    if sum(k is Ellipsis for k in key) > 1:
        raise NkiValidationError(f"index: at most one '...' allowed ({where()})")
    if Ellipsis in key:
        i = key.index(Ellipsis)
        key = key[:i] + (slice(None),) * (len(shape) - len(key) + 1) + key[i + 1:]
    if len(key) > len(shape):
        raise NkiValidationError(f"index: {len(key)} indices for a {len(shape)}-D tensor of shape {shape} ({where()})")
    out = []
    for dim, (k, n) in enumerate(zip(key, shape)):
        if isinstance(k, ds):
            k = slice(k.start, k.start + k.size)
        if isinstance(k, (int, np.integer)) and not isinstance(k, bool):
            k = int(k)
            if not -n <= k < n:
                raise NkiValidationError(f"index: {k} out of bounds for dim {dim} of size {n} in {shape} ({where()})")
            k = k % n
            out.append(slice(k, k + 1) if (dim == 0 and on_chip) else k)
        elif isinstance(k, slice):
            for bound in (k.start, k.stop):
                if bound is not None and not isinstance(bound, (int, np.integer)):
                    raise NkiValidationError(f"index: slice bound {bound!r} in dim {dim} is not a compile-time int ({where()})")
                if bound is not None and not -n <= bound <= n:
                    raise NkiValidationError(
                        f"index: slice {k.start}:{k.stop} out of bounds for dim {dim} of size {n} in {shape} ({where()})")
            if k.step == 0:
                raise NkiValidationError(f"index: slice step 0 in dim {dim} ({where()})")
            out.append(k)
        else:
            raise NkiValidationError(
                f"index: unsupported index {k!r} in dim {dim} (use ints, slices, '...' or nl.ds) ({where()})")
    return tuple(out)
