"""PSUM as a resource of one program (physical core): banks, tile sizes, `address=`, and which
instruction last wrote each byte (for the matmul accumulate rule).

Rules, each from the NKI 0.6 documentation:
  * PSUM is 16 KiB per partition in 8 banks of 2 KiB (512 fp32) each
    (SDK:nki/guides/architecture/trainium_inferentia2_arch.rst "Near-memory accumulation in PSUM";
    SDK:nki/migration/index.rst "Improved allocation API"; trn2 keeps the 2 MiB PSUM of NeuronCore-v2,
    SDK:nki/guides/architecture/trainium2_arch.rst).
  * A PSUM tile fits one bank: at most 2 KiB per partition (512 fp32, 1024 bf16)
    ("Tile-Size Constraint #2", SDK:nki/get-started/about/tiling-overview.rst; the migration guide's
    bank example is a (128, 1024) bfloat16 tile). The 2.33 tile_size page states the limit per
    bank ("psum_bank_fmax: maximum free dimension per PSUM bank per partition"; psum_fmax "does not
    represent the free-dim size per partition"), so an allocation may span several banks, up to all
    16 KiB of a partition. What must lie in one bank is the Tensor engine's output (`operand_problem`,
    checked on its PSUM writes: a matmul accumulates in a bank); Vector and Scalar instructions may
    read or write several banks at once: the public nki-autotune repository's kernel_15, measured on
    trn2 by its authors, memsets and evacuates a (128, 2048) fp32 slice (4 banks) of its
    double-buffered (128, 2, 2048) accumulator, which nkisim used to refuse at `nl.ndarray`.
    (SDK:v2.33.0 nki/api/nki.language.tile_size.html)
  * `nl.ndarray(..., buffer=nl.psum, address=(partition_offset, byte_offset))` places a tile by hand;
    a PSUM tile must start at the beginning of a bank, byte_offset = bank * 2048, "the compiler will
    throw an error otherwise" (SDK:nki/migration/index.rst "Improved allocation API").
  * Live tiles need at most 8 banks at any time. Modeled like the SBUF footprint: a PSUM tile is live
    from the first instruction that touches it to the last. An automatically placed allocation of 2 KiB
    or more per partition takes whole banks (one per started 2 KiB); smaller ones share banks, packed
    first fit (largest first) at `tile_size.psum_min_align`: no page says how the compiler's allocator
    places them, PSUM free-dimension addresses have that finer alignment (the tile_size page;
    `nki.compiler.psum.mod_alloc` takes an address inside a bank), and giving each its own bank
    refuses kernels trn2 runs (foxl-ai/kiln's moe_dedupe keeps up to ten live PSUM tiles, four of them
    small, at the sizes its trn2 bench records). Each packed tile lies inside one bank, so a matmul
    writing it stays in its bank. Hand-placed tiles occupy their `address=` banks, which nothing else
    shares but tiles placed on the same bank (nki-library's attention kernels alias banks on purpose).
    Aliased hand-placed tiles do not share data in the emulator.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..limits import PSUM_BANK_BYTES, PSUM_BANKS, PSUM_MIN_ALIGN
from .errors import NkiValidationError
from .tensor import NkiTensor, Storage

PSUM_PARTITION_BYTES = PSUM_BANKS * PSUM_BANK_BYTES

# Who last wrote a PSUM byte (the matmul `accumulate` rule reads this).
UNWRITTEN, WRITTEN_OTHER, WRITTEN_BY_MATMUL = 0, 1, 2


def check_allocation(api: str, shape: tuple[int, ...], dtype: np.dtype, offset: int | None, where: str) -> int | None:
    """Validate a PSUM allocation (`offset`: the byte offset of its `address=`, already checked by
    `allocation.placement`); return its hand-placed bank, or None when the compiler places it."""
    per_partition = int(np.prod(shape[1:])) * dtype.itemsize
    if per_partition > PSUM_PARTITION_BYTES:
        raise NkiValidationError(
            f"{api}: PSUM capacity: {tuple(shape)} {dtype.name} needs {per_partition} bytes per partition, but PSUM "
            f"has {PSUM_PARTITION_BYTES} ({PSUM_BANKS} banks of {PSUM_BANK_BYTES} bytes); allocate fewer or smaller "
            f"PSUM tiles ({where})")
    if offset is None:
        return None
    if offset % PSUM_BANK_BYTES or not 0 <= offset < PSUM_PARTITION_BYTES:
        banks = ", ".join(str(b * PSUM_BANK_BYTES) for b in range(PSUM_BANKS))
        raise NkiValidationError(
            f"{api}: PSUM address byte offset {offset} does not start a bank; a PSUM tile starts at the beginning "
            f"of one of the {PSUM_BANKS} banks of {PSUM_BANK_BYTES} bytes (byte offset one of {banks}) ({where})")
    if offset + per_partition > PSUM_PARTITION_BYTES:
        raise NkiValidationError(
            f"{api}: PSUM capacity: {tuple(shape)} {dtype.name} placed at byte offset {offset} needs bytes up to "
            f"{offset + per_partition}, past the {PSUM_PARTITION_BYTES} bytes of a PSUM partition ({where})")
    return offset // PSUM_BANK_BYTES


def banks_of(storage: Storage) -> int:
    """How many 2 KiB banks an allocation occupies (each allocation starts a bank)."""
    return max(1, -(-storage.data.strides[0] // PSUM_BANK_BYTES))


def operand_problem(t: NkiTensor) -> str | None:
    """Why the Tensor engine cannot write PSUM view `t` (its bytes in a partition cross a bank
    boundary: tile-size constraint #2), or None."""
    row = t.storage.data.strides[0]
    first = last = t.byte_offset % row
    for n, stride in zip(t.arr.shape[1:], t.arr.strides[1:]):
        if n > 1:
            if stride > 0:
                last += (n - 1) * stride
            else:
                first += (n - 1) * stride
    last += t.arr.itemsize - 1
    if first // PSUM_BANK_BYTES == last // PSUM_BANK_BYTES:
        return None
    return (f"the Tensor engine writes one {PSUM_BANK_BYTES}-byte PSUM bank (tile-size constraint #2: at most "
            f"{PSUM_BANK_BYTES // 4} float32 per partition), but this view of {t.storage.name or 'its tile'} "
            f"{tuple(t.storage.data.shape)} {t.dtype.name} spans bytes {first}..{last} of each partition, banks "
            f"{first // PSUM_BANK_BYTES}..{last // PSUM_BANK_BYTES}; slice it bank by bank")


@dataclass
class _Tile:
    """One PSUM allocation as the bank count sees it."""

    storage: Storage
    bank: int | None
    first: int
    last: int

    def describe(self) -> str:
        st = self.storage
        placed = f", bank {self.bank}" if self.bank is not None else ""
        return f"{st.name or 'tile'} {st.data.shape} {st.data.dtype.name}{placed} ({st.source})"


class PsumState:
    """The PSUM tiles of one program: live ranges (bank count) and per-byte writer kind."""

    def __init__(self) -> None:
        self.banks: dict[int, int | None] = {}        # storage id -> hand-placed bank (or None)
        self.tiles: dict[int, _Tile] = {}              # storage id -> live range, once touched
        # storage id -> the writer kind of all its bytes while they agree (a whole-tile matmul
        # accumulation group: no per-byte pass per matmul), None once they may differ ...
        self.uniform: dict[int, int | None] = {}
        self.writers: dict[int, np.ndarray] = {}       # ... and from then on, uint8 per byte

    def allocate(self, storage: Storage, bank: int | None) -> None:
        self.banks[storage.id] = bank
        self.uniform[storage.id] = UNWRITTEN

    def touch(self, storage: Storage, index: int) -> None:
        tile = self.tiles.get(storage.id)
        if tile is None:
            self.tiles[storage.id] = _Tile(storage, self.banks.get(storage.id), index, index)
        else:
            tile.last = index

    def _bytes(self, t: NkiTensor) -> np.ndarray:
        """The writer-kind bytes under view `t` (one trailing axis for the bytes of each element)."""
        mask = self.writers[t.storage.id]
        return np.lib.stride_tricks.as_strided(mask[t.byte_offset:], t.arr.shape + (t.arr.itemsize,),
                                               t.arr.strides + (1,))

    def writer_kinds(self, t: NkiTensor) -> np.ndarray:
        """Per element of `t`: UNWRITTEN, WRITTEN_OTHER or WRITTEN_BY_MATMUL (the lowest of its bytes)."""
        kind = self.uniform[t.storage.id]
        if kind is not None:
            return np.full(t.arr.shape, kind, np.uint8)
        b = self._bytes(t)
        kinds = b[..., 0]
        for i in range(1, b.shape[-1]):     # element-wise over byte planes: much faster than min(axis=-1)
            kinds = np.minimum(kinds, b[..., i])
        return kinds

    def note_write(self, t: NkiTensor, by_matmul: bool) -> None:
        kind = WRITTEN_BY_MATMUL if by_matmul else WRITTEN_OTHER
        sid = t.storage.id
        if self.uniform[sid] == kind:
            return      # every byte already says so
        if t.byte_offset == 0 and t.arr.nbytes == t.storage.data.nbytes and t.arr.flags.c_contiguous:
            self.uniform[sid] = kind     # the whole tile
            self.writers.pop(sid, None)
            return
        if self.uniform[sid] is not None:   # its bytes start to differ: one byte each from now on
            self.writers[sid] = np.full(t.storage.data.nbytes, self.uniform[sid], np.uint8)
            self.uniform[sid] = None
        self._bytes(t)[...] = kind

    def peak_banks(self, count: int) -> tuple[int, int]:
        """(most banks live at once, instruction index where that happens) over `count` instructions."""
        if not self.tiles:
            return 0, -1
        auto = np.zeros(count + 1, np.int64)
        placed = np.zeros((PSUM_BANKS, count + 1), np.int64)
        for tile in self.tiles.values():
            n = banks_of(tile.storage)
            rows = [auto] * n if tile.bank is None else placed[tile.bank:tile.bank + n]
            for row in rows:
                row[tile.first] += 1
                row[tile.last + 1] -= 1
        live = np.cumsum(auto) + (np.cumsum(placed, axis=1) > 0).sum(axis=0)
        at = int(np.argmax(live))
        if live[at] <= PSUM_BANKS:      # a bank for every tile bounds the packed count: it fits
            return int(live[at]), at
        return self._packed_peak()

    def _packed_peak(self) -> tuple[int, int]:
        """`peak_banks` with small tiles packed, up to the first instruction where they no longer fit (where
        the allocation fails): one sweep over the tiles in order of their first instruction (the count only
        rises where a tile starts)."""
        best, live, ending = (0, -1), {}, []           # ending: heap of (last instruction, storage id)
        for tile in sorted(self.tiles.values(), key=lambda t: t.first):
            while ending and ending[0][0] < tile.first:
                live.pop(heapq.heappop(ending)[1])
            live[tile.storage.id] = tile
            heapq.heappush(ending, (tile.last, tile.storage.id))
            best = max(best, (_packed_banks(live.values()), tile.first))
            if best[0] > PSUM_BANKS:
                break
        return best

    def live_at(self, index: int) -> list[_Tile]:
        return [t for t in self.tiles.values() if t.first <= index <= t.last]


def _packed_banks(tiles: Iterable[_Tile]) -> int:
    """Banks `tiles` occupy together: hand-placed banks, whole banks for allocations of 2 KiB or more, and
    the smaller ones packed first fit, largest first (module docstring)."""
    placed: set[int] = set()
    whole, small = 0, []
    for tile in tiles:
        row = tile.storage.data.strides[0]
        if tile.bank is not None:
            placed.update(range(tile.bank, tile.bank + banks_of(tile.storage)))
        elif row >= PSUM_BANK_BYTES:
            whole += banks_of(tile.storage)
        else:
            small.append(-(-row // PSUM_MIN_ALIGN) * PSUM_MIN_ALIGN)
    free: list[int] = []           # bytes left in each bank the small tiles share
    for size in sorted(small, reverse=True):
        fit = next((i for i, room in enumerate(free) if room >= size), None)
        if fit is None:
            free.append(PSUM_BANK_BYTES - size)
        else:
            free[fit] -= size
    return len(placed) + whole + len(free)


def check_bank_count(program_id: int, state: PsumState, instructions: list) -> None:
    """Raise if more PSUM banks were live at once than trn2 has; `instructions` is the program's trace."""
    live, at = state.peak_banks(len(instructions))
    if live <= PSUM_BANKS:
        return
    tiles = "; ".join(t.describe() for t in state.live_at(at))
    raise NkiValidationError(
        f"PSUM capacity: program {program_id} needs {live} PSUM banks at once (tiles under 2 KiB per partition "
        f"packed into shared banks, a larger allocation one per started 2 KiB), but "
        f"trn2 has {PSUM_BANKS} banks of {PSUM_BANK_BYTES} bytes per partition; live PSUM tiles: {tiles}; evacuate "
        f"(tensor_copy) and stop using a PSUM tile before allocating the next ({instructions[at].source})")
