"""NKI 0.7's stream buffers: `nl.alloc_stream_buffers` (in `language.py`, with the other allocations) returns an
`NkiStreamBuffers`, a fixed pool of on-chip slots that a kernel rotates through while it walks one dim of a view.

What the pages say, and nkisim does (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
nki.language.alloc_stream_buffers.html, ...NkiStreamBuffers.html, the tiled-grid-streaming tutorial and its
streaming.py example):
  * one step of the stream is the view integer-indexed at `dim`, every other coordinate kept: a tensor's
    `view[:, k, :]` for dim 1, a tile grid's column of tiles, a block grid's column of blocks;
  * `num_slots` independent SBUF or PSUM allocations, each of one step's capacity (shaped like the first step,
    `nl.empty_like` of it, with the same `dtype` and `transpose_axes` rules);
  * `buffers[k]` is slot `k % num_slots`, the same abstraction as step k (NkiTensor, NkiTileGrid or
    NkiBlockGrid); a final step that ends in a partial tile or block is the slot clamped to it (a view, no
    copy); selecting a slot allocates nothing and issues nothing;
  * k is a nonnegative compile-time Python int inside the stream (0 <= k < view.shape[dim]); an index from
    nl.fori_loop (any device value), a negative index, iterating the pool and len() are refused, as the
    NkiStreamBuffers page says they are unsupported.
Left open by the readable pages, and refused with a clear error: `address=` (where each slot of the pool goes).
The ordering the compiler enforces between uses of one slot is data dependency on that slot's storage, which the
emulator and the cost model already follow.
"""
from __future__ import annotations

from typing import Any, NoReturn

from .errors import NkiArgumentError, NkiGridIndexError, NkiValidationError, kernel_location
from .tensor import NkiTensor
from .tile_grids import PAGES, NkiGrid, is_runtime_index

ALLOC = "nl.alloc_stream_buffers"
PAGE = f"{PAGES}/nki.language.NkiStreamBuffers.html"
ALLOC_PAGE = f"{PAGES}/nki.language.alloc_stream_buffers.html"


def stream_dim(view: Any, dim: Any) -> int:
    """`dim` as an index of `view.shape` (a negative one counted from the end), after checking both."""
    if not isinstance(view, (NkiTensor, NkiGrid)):
        raise NkiArgumentError(f"{ALLOC}: view must be an NkiTensor, NkiTileGrid or NkiBlockGrid, got "
                               f"{type(view).__name__} ({ALLOC_PAGE}) ({kernel_location()})")
    if isinstance(view, NkiGrid):
        view.require_static(ALLOC)
    rank = len(view.shape)
    if type(dim) is not int or not -rank <= dim < rank:
        raise NkiArgumentError(f"{ALLOC}: dim={dim!r} is not a coordinate of view.shape {tuple(view.shape)}: the stream "
                               f"advances along one of its {rank} dims ({ALLOC_PAGE}) ({kernel_location()})")
    return dim % rank


def step(view: NkiTensor | NkiGrid, dim: int, k: int) -> NkiTensor | NkiGrid:
    """Step k of the stream: `view` integer-indexed at `dim`, every other coordinate kept."""
    return view[(slice(None),) * dim + (k,)]


class NkiStreamBuffers:
    """A pool of `num_slots` on-chip slots addressed by stream step: `buffers[k]` is slot k % num_slots."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NkiValidationError(f"nl.NkiStreamBuffers is created by {ALLOC}(view, buffer=..., dim=..., num_slots=...), "
                                 f"not constructed directly ({PAGE}) ({kernel_location()})")

    @classmethod
    def of(cls, view: NkiTensor | NkiGrid, dim: int, slots: tuple[NkiTensor | NkiGrid, ...]) -> "NkiStreamBuffers":
        """The pool of `slots` over the steps of `view` along `dim` (what alloc_stream_buffers returns)."""
        pool = object.__new__(cls)
        pool._view, pool._dim, pool._slots = view, dim, slots
        pool._steps = view.shape[dim]
        return pool

    @property
    def num_slots(self) -> int:
        return len(self._slots)

    def __repr__(self) -> str:
        return f"NkiStreamBuffers(num_slots={self.num_slots}, steps={self._steps}, slot={self._slots[0]!r})"

    def __getitem__(self, k: Any) -> NkiTensor | NkiGrid:
        where = f"{self!r}[{k!r}]"
        if is_runtime_index(k):
            raise NkiValidationError(
                f"{where}: a slot index is a compile-time Python int; an index from nl.fori_loop (or any device value) "
                f"is a compiled variable and is not supported, even when the loop bounds are constant: walk the stream "
                f"with range(view.shape[{self._dim}]) ({PAGE}) ({kernel_location()})")
        if isinstance(k, bool) or not isinstance(k, int):
            raise NkiArgumentError(f"{where}: a slot index is a nonnegative compile-time Python int, got "
                                   f"{type(k).__name__} ({PAGE}) ({kernel_location()})")
        if k < 0:
            raise NkiGridIndexError(f"{where}: negative indexing is not supported; index the stream's steps 0 .. "
                                    f"{self._steps - 1} ({PAGE}) ({kernel_location()})")
        if k >= self._steps:
            raise NkiGridIndexError(f"{where}: step {k} is outside the stream: view.shape[{self._dim}] = {self._steps} "
                                    f"steps ({PAGE}) ({kernel_location()})")
        slot = self._slots[k % self.num_slots]
        if isinstance(slot, NkiGrid) and k == self._steps - 1:
            return slot.clamped_to(step(self._view, self._dim, k))   # a partial last tile or block
        return slot

    def __iter__(self) -> NoReturn:
        raise NkiValidationError(f"iterating {self!r} is not supported: loop over range(view.shape[{self._dim}]) and "
                                 f"take buffers[k] ({PAGE}) ({kernel_location()})")

    def __len__(self) -> NoReturn:
        raise NkiValidationError(f"len({self!r}) is not supported (a stream pool has no sequence length): the stream "
                                 f"has view.shape[{self._dim}] = {self._steps} steps ({PAGE}) ({kernel_location()})")

    def __bool__(self) -> bool:
        return True


__all__ = ["NkiStreamBuffers"]
