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

import enum
import functools
import itertools
import math
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import dtypes, nki_versions
from .errors import NkiRemovedApiError, NkiValidationError, NkiWarning, kernel_location
from .trace import Operand
from .views import TensorViews


class Buffer(enum.Enum):
    """A memory space, `nl.MemoryRegion`: `nl.sbuf`, `nl.psum`, `nl.private_hbm` (= `nl.hbm`), `nl.shared_hbm`.
    An Enum as on its page ("class nki.language.MemoryRegion(Enum)"; "nki.language.hbm =
    MemoryRegion.private_hbm"), so `list(nl.MemoryRegion)` and `.value` work and torch.compile takes one as a
    constant kernel argument."""

    sbuf = "sbuf"
    psum = "psum"
    private_hbm = "private_hbm"
    shared_hbm = "shared_hbm"
    hbm = "private_hbm"          # an alias: nl.hbm is nl.private_hbm

    def __init__(self, value: str) -> None:
        self.on_chip = value in ("sbuf", "psum")

    def __repr__(self) -> str:
        return f"nl.{self.value}"

    __str__ = __repr__


SBUF = Buffer.sbuf
PSUM = Buffer.psum
PRIVATE_HBM = Buffer.private_hbm
SHARED_HBM = Buffer.shared_hbm


@dataclass(eq=False)
class Storage:
    """One allocation: its buffer, backing array, owner program and where the kernel made it.

    The uninitialised-memory sentinel of a fresh allocation is deferred (`pending_fill`): writes
    of contiguous ranges are noted, and the first read (or a strided write, or the end of the
    launch) fills only what was never written. A tile or output overwritten before it is read
    never pays for the fill, and every read of never-written memory still sees the sentinel."""

    id: int
    buffer: Buffer
    data: np.ndarray
    program: int | None          # None for storages visible to every program (shared HBM)
    name: str
    source: str                  # kernel line of the allocation
    written: bool = False        # some instruction wrote it (non-contiguous arguments are copied back)
    # LNC=2 race check: program id -> per element, the epoch of that program's last write / read (-1: never)
    written_mask: dict[int, np.ndarray] = field(default_factory=dict)
    read_mask: dict[int, np.ndarray] = field(default_factory=dict)
    # program id -> per element, the raw bits that program last wrote (compared when an epoch ends), and
    # epoch -> the write-write conflicts of that epoch still to decide (cores.WriteConflict)
    last_written_bits: dict[int, np.ndarray] = field(default_factory=dict)
    write_conflicts: dict[int, Any] = field(default_factory=dict)
    pending_fill: Callable[[np.ndarray], None] | None = None
    truth_tests: int = 0         # times a view of it was a Python condition (NkiTensor.__bool__)
    partition_offset: int = 0    # on chip: the physical partition of its row 0 (`address=`, else 0)
    placed: bool = False         # on chip: placed by hand (`address=`), so the compiler cannot move or spill it
    scope_ended: str = ""        # made in a loop body function whose call has returned: that body (loop_bodies.py)
    _written_ranges: list[tuple[int, int]] = field(default_factory=list)  # element ranges, while pending

    def __post_init__(self) -> None:
        rows = self.data.shape[0] if self.data.ndim else 0   # 0-d and empty HBM arguments have no rows
        self.bytes_per_partition: int = self.data.nbytes // rows if rows else 0

    @functools.cached_property
    def base_ptr(self) -> int:
        return self.data.__array_interface__["data"][0]

    def note_write(self, view: np.ndarray, byte_offset: int) -> None:
        """An instruction is about to overwrite every element of `view` (a view of this storage)."""
        if self.pending_fill is None:
            return
        if view.nbytes == self.data.nbytes:
            self.pending_fill = None
            self._written_ranges.clear()
            return
        itemsize = self.data.itemsize
        if view.flags.c_contiguous and byte_offset % itemsize == 0 and view.nbytes % itemsize == 0:
            first = byte_offset // itemsize
            self._written_ranges.append((first, first + view.nbytes // itemsize))
        else:
            self.materialise()

    def materialise(self) -> None:
        """Fill whatever was never written, if the fill is still pending."""
        if self.pending_fill is None:
            return
        fill, self.pending_fill = self.pending_fill, None
        if not self._written_ranges:
            fill(self.data)
            return
        flat = self.data.reshape(-1)
        done = 0
        for first, end in sorted(self._written_ranges):
            if first > done:
                fill(flat[done:first])
            done = max(done, end)
        if done < flat.size:
            fill(flat[done:])
        self._written_ranges.clear()


@dataclass(frozen=True)
class ds:
    """`nl.ds(start, size)`: the slice start:start+size."""

    start: int
    size: int


# More truth tests of one tensor than any traced kernel needs: only a `while <tensor>:` loop gets there.
TRUTH_TESTS_LIMIT = 100_000


class NkiTensor(TensorViews):
    """A view of a storage: `shape, dtype, buffer, strides, offset, ndim, size, name`; the view
    methods of NKI 0.6 (`ap`, `slice`, `select`, `permute`, ...) are in `views.py`."""

    __slots__ = ("storage", "arr", "shape", "buffer", "partitions", "elements_per_partition", "_byte_offset",
                 "indirection")

    def __init__(self, storage: Storage, arr: np.ndarray, byte_offset: int | None = None) -> None:
        if type(storage) is not Storage:     # a kernel calling the documented constructor NkiTensor(shape, dtype, ...)
            raise NkiValidationError(f"nl.NkiTensor(...) is not emulated by nkisim as a constructor (the page does not "
                                     f"say what its storage argument is); allocate a tensor with nl.ndarray(shape, "
                                     f"dtype, buffer=..., name=..., address=...) ({kernel_location()})")
        self.storage = storage
        self.arr = arr
        # Offset of arr's first byte in the storage: known for the root and slice views, else read
        # from the array pointer on first use (the slow part of recording an operand).
        self._byte_offset = 0 if arr is storage.data else byte_offset
        self.shape: tuple[int, ...] = arr.shape
        self.buffer: Buffer = storage.buffer
        size = arr.size
        self.partitions: int = arr.shape[0] if storage.buffer.on_chip else 1
        self.elements_per_partition: int = size // self.partitions if size else 0
        self.indirection = None     # a views.Indirection for dynamic (scalar/vector offset) views

    dtype = property(lambda self: self.arr.dtype)
    ndim = property(lambda self: self.arr.ndim)
    size = property(lambda self: int(self.arr.size))
    name = property(lambda self: self.storage.name)

    @property
    def data(self) -> "NkiTensor":
        """The tensor itself (NKI 0.7): the operand of a tensor, as a tile grid's `.data` is the grid's."""
        if not nki_versions.applies("tensor-data"):
            raise NkiRemovedApiError(f"NkiTensor.data is not in NKI {nki_versions.release()}: "
                                     f"{nki_versions.unavailable('tensor-data')} ({kernel_location()})")
        return self

    @property
    def strides(self) -> tuple[int, ...]:
        if self.indirection is not None:
            return tuple(s for s, _ in self.indirection.pattern)
        return tuple(s // self.arr.itemsize for s in self.arr.strides)

    def contiguous_elements(self) -> int:
        """How many elements this view holds at consecutive addresses, in row-major order, before its addresses
        jump (on chip, within one partition: partitions are separate memories)."""
        arr, run = self.arr, 1
        first = 1 if self.buffer.on_chip else 0
        for n, stride in zip(reversed(arr.shape[first:]), reversed(arr.strides[first:])):
            if n == 1:
                continue
            if stride != run * arr.itemsize:
                break
            run *= n
        return run

    @property
    def offset(self) -> int:
        """Element offset of this view's first element in its storage."""
        return self.byte_offset // self.storage.data.itemsize

    @property
    def byte_offset(self) -> int:
        if self._byte_offset is None:
            self._byte_offset = self.arr.__array_interface__["data"][0] - self.storage.base_ptr
        return self._byte_offset

    def __repr__(self) -> str:
        return f"NkiTensor(shape={self.shape}, dtype={self.dtype.name}, buffer={self.buffer!r}, name={self.name!r})"

    # --- views -----------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "NkiTensor":
        if self.indirection is not None:
            raise NkiValidationError(f"index: an indirect (dynamic-offset) view cannot be indexed further; use its "
                                     f"slice/select methods on dims outside the indirection ({kernel_location()})")
        arr = self.arr
        key = key if isinstance(key, tuple) else (key,)
        shift = _plain_slice_shift(key, arr.shape, arr.strides)
        if shift is not None:        # numpy slices these exactly as NKI does
            view = arr[key]
            offset = None if self._byte_offset is None or not view.size else self._byte_offset + shift
            return NkiTensor(self.storage, view, offset)
        key = _normalise_key(key, arr.shape, self.buffer.on_chip)
        view = arr[key]
        if self.buffer.on_chip and view.ndim < 2:
            view = view.reshape(view.shape + (1,) * (2 - view.ndim))
        return NkiTensor(self.storage, view)

    # --- no Python semantics for device values --------------------------------------------------
    # The NKI compiler evaluates Python at specialization time; a tensor's values exist only on the
    # device, so it has no Python operators (SDK:nki/get-started/nki-language-guide.rst, "Compilation
    # model" and "Control flow"). As a condition it is an object like any other, so true: the front end
    # (leanprover/KLR, Term.isTrue) says so, and nki-library tests `if params.expert_index:` as "given".
    def __bool__(self) -> bool:
        self.storage.truth_tests += 1
        if self.storage.truth_tests > TRUTH_TESTS_LIMIT:
            # `while t:` on an unchanged tensor: the condition never turns false, so tracing would never end
            raise NkiValidationError(
                f"{self!r} was used as a Python condition {TRUTH_TESTS_LIMIT:,} times: a tensor condition is always "
                f"true, so a `while <tensor>:` loop never ends while the kernel is traced; loop on device values "
                f"with nl.while_loop, or on a Python count ({kernel_location()})")
        warnings.warn(NkiWarning(
            f"{self!r} used as a Python condition (if/while/and/or/not) is always true: it tests that the tensor "
            f"exists, not its values, which exist only on the device; for device-driven control flow use "
            f"nl.fori_loop/nl.while_loop ({kernel_location()})"), stacklevel=2)
        return True

    def __iter__(self) -> Any:
        raise NkiValidationError(
            f"{self!r} iterated in Python: loop over index ranges (range / nl.static_range) and slice the tensor "
            f"({kernel_location()})")

    def _no_operator(self, symbol: str) -> Any:
        raise NkiValidationError(
            f"{self!r} combined with Python operator '{symbol}': NKI tensors have no Python operators; issue an "
            f"instruction (nisa.tensor_scalar / nisa.tensor_tensor with op=nl.less, nl.add, ...) "
            f"({kernel_location()})")

    __lt__ = lambda self, other: self._no_operator("<")
    __le__ = lambda self, other: self._no_operator("<=")
    __gt__ = lambda self, other: self._no_operator(">")
    __ge__ = lambda self, other: self._no_operator(">=")
    __add__ = __radd__ = lambda self, other: self._no_operator("+")
    __sub__ = __rsub__ = lambda self, other: self._no_operator("-")
    __mul__ = __rmul__ = lambda self, other: self._no_operator("*")
    __truediv__ = __rtruediv__ = lambda self, other: self._no_operator("/")
    __neg__ = lambda self: self._no_operator("unary -")

    # `t[key] = tile` copies the tile into the view: `__setitem__` is an NkiTensor method on its
    # reference page, and the migration guide's block-dimension examples write `buf[0:128, i, 0:512] =
    # nl.load(inp[i])` (SDK:nki/migration/index.rst). The instruction is set by language.py
    # (`_assign_tile`), which may import the instruction modules that this module may not.
    assign: Callable[["NkiTensor", "NkiTensor"], None] | None = None

    def __setitem__(self, key: Any, value: Any) -> None:
        if not isinstance(value, NkiTensor):
            raise NkiValidationError(
                f"item assignment copies a tile into a view of {self!r}: the value must be an NKI tensor, got "
                f"{type(value).__name__}; fill a tile with a constant by nisa.memset ({kernel_location()})")
        NkiTensor.assign(self[key], value)

    def __iadd__(self, other: Any) -> "NkiTensor":
        # NKI 0.6 defines no `+=` on tensors (the Beta 1 `psum += nc_matmul(...)` form is gone).
        raise NkiValidationError(
            "NKI tensors have no '+='; accumulate matmuls into a PSUM tile with nisa.nc_matmul(dst=tile, ..., "
            f"accumulate=True) (or leave accumulate=None), add tiles with nisa.tensor_tensor ({kernel_location()})")

    def reshape(self, *shape: Any) -> "NkiTensor":
        shape = tuple(shape[0]) if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
        where = kernel_location()
        if self.indirection is not None:
            raise NkiValidationError(f"reshape: an indirect (dynamic-offset) view cannot be reshaped; reshape the "
                                     f"tensor before the dynamic select or .ap() ({where})")
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
        return NkiTensor(self.storage, view, self._byte_offset)

    def view(self, dtype: Any) -> "NkiTensor":
        """Reinterpret the bytes as another dtype (the last dim scales with the itemsize ratio)."""
        from .dtypes import resolve

        dt = resolve(dtype)
        if dt is None:
            refusal = getattr(dtype, "refusal", None)     # MX packed dtypes (newer_cores.py)
            raise NkiValidationError(f"{refusal('view') if refusal else f'view: unsupported dtype {dtype!r}'} "
                                     f"({kernel_location()})")
        if self.indirection is not None:
            raise NkiValidationError(f"view: not supported after a dynamic / vector select ({kernel_location()})")
        try:
            return NkiTensor(self.storage, self.arr.view(dt), self._byte_offset)
        except ValueError as err:
            raise NkiValidationError(f"view: {err} ({kernel_location()})") from None

    reinterpret_cast = view

    # --- trace ----------------------------------------------------------------------------
    def operand(self, role: str) -> Operand:
        """This view as a trace operand; its region is computed when first read (the cost model)."""
        arr = self.arr
        st = self.storage
        where = (st.id, st.buffer.on_chip, st.data.itemsize, st.bytes_per_partition, self.byte_offset, arr.shape,
                 arr.strides, arr.itemsize)
        single = arr.ndim == 0 or arr.shape[-1] == 1
        # on chip, the innermost free dim (a view of partitions only has none)
        inner = 0 if single or (st.buffer.on_chip and arr.ndim < 2) else abs(arr.strides[-1])
        return Operand(
            role, self.buffer.name, dtypes.name_of(arr.dtype), self.shape, self.partitions, self.elements_per_partition,
            arr.itemsize, single or arr.strides[-1] == arr.itemsize, where, inner)


def contiguous_pieces(*views: NkiTensor) -> int:
    """How many runs of consecutive addresses a DMA moves through these views of the same elements, in row-major
    order: a run ends wherever any view's addresses jump, every `contiguous_elements()` elements of that view
    (counted by inclusion-exclusion over the views' run lengths)."""
    n = views[0].arr.size
    runs = sorted({v.contiguous_elements() for v in views})
    return sum((-1) ** (k + 1) * (n // math.lcm(*subset))
               for k in range(1, len(runs) + 1) for subset in itertools.combinations(runs, k))


def _normalise_key(key: Any, shape: tuple[int, ...], on_chip: bool) -> tuple:
    where = kernel_location
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
    if len(out) == len(shape) and all(type(k) is int for k in out):
        # "HBM tensors: integer indexing removes the dimension. Result is at least 1D." (SDK:nki/api/nki/language/
        # __init__.py, NkiTensor.__getitem__): the last index keeps its dim, so the view is [1], not a scalar
        out[-1] = slice(out[-1], out[-1] + 1)
    return tuple(out)


def _plain_slice_shift(key: tuple, shape: tuple[int, ...], strides: tuple[int, ...]) -> int | None:
    """For step-less slices with in-range int bounds, the byte offset of the view's first element
    from the tensor's; None for any other key (it goes through `_normalise_key`)."""
    if len(key) > len(shape):
        return None
    shift = 0
    for k, n, stride in zip(key, shape, strides):
        if type(k) is not slice or k.step is not None:
            return None
        start, stop = k.start, k.stop
        if stop is not None and not (type(stop) is int and -n <= stop <= n):
            return None
        if start:
            if not (type(start) is int and -n <= start <= n):
                return None
            shift += (start + n if start < 0 else start) * stride
        elif start is not None and type(start) is not int:
            return None
    return shift
