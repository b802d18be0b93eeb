"""SBUF address and PSUM bank reuse: the dependencies a tile pipeline gets when the compiler gives a new
allocation memory an earlier one released.

The compiler "assigns an address to a tile at its first write and releases the address after its
last read" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.Allocation.html).
An address is one place: a tile's bytes in a partition are one contiguous range, which is how the
placement APIs name it (`address=(partition_offset, free_offset)` on `nl.ndarray`,
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html; a direct-allocation
function returns one start address per tile,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.sbuf.alloc.html).
The emulator gives every `nl.ndarray` its own storage, so region dependencies alone let a loop's
iterations run arbitrarily far ahead of each other; on hardware a tile made when no never-used range
of its size is left lands on bytes earlier tiles released, and each write into those bytes waits for
the last access of the tile that held them (a write-after-read on the same addresses: "a tile can
take the address of a tile freed shortly before, so a DMA into it waits for the compute that reads
the earlier tile",
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.AllocationMode.html).

The model places allocations in the order of their first access (the linear scan of
`nkisim/emulator/allocation.py`), each in one contiguous window of free bytes of the usable SBUF, as a
ring: the first free window at or after the end of the previous allocation, else the first one from the
lowest address. SDK 2.33's compiler may rotate the address of a tile it allocates
(`AddressRotation`, https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/api/nki.compiler.html;
by default "a memloc the backend allocates keeps rotation ON",
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.AddressRotation.html);
how is not documented, and the ring is the rotating policy the docs do describe ("give each tile a
fresh address, and reuse freed memory only after the allocation wraps around", `AllocationMode.RING`
on the AllocationMode page above). It errs towards overlap: a tile waits only for bytes the ring comes
back to. Contiguity is what makes a tile whose size no longer fits in the bytes ahead of the ring take
its predecessor's slot: free bytes scattered in smaller holes cannot hold it. This is the model's
reading of the published rmsnorm_quant timeline at S=2048, H=16384, which runs each tile's phases
back to back (benchmarks/dev_set/figures.json). Every instruction that writes the new allocation
waits, not only its first access: a tile filled by several DMAs (the matmul walkthrough's final
kernel loads each 64 KiB block in 8) has each one land on the old tile's bytes. An instruction writing
bytes [lo, hi) of the allocation gets one edge (program, that instruction, old last access) per
earlier allocation whose released bytes overlap them, applied by the scheduler like the kernel's own
ordering edges. Hand-placed (`address=`) and spilled allocations are left out: the kernel, or the
spill transfers, order those. When no window is wide enough (the free bytes suffice, as the emulator's
capacity check ensured, but lie in pieces) the compiler's remedy is not documented: the allocation then
takes the oldest released bytes wherever they lie.

PSUM is the same, smaller: 16 KiB per partition in 8 banks of 2 KiB (SDK:nki/guides/architecture/
trainium_inferentia2_arch.rst, "Near-memory accumulation in PSUM"; trn2 keeps it). The emulator checks that the
tiles live in program order fit (`emulator/psum.py`); a tile pipeline whose matmuls run ahead of the
instructions that evict their results could, in time, hold more, so the same ring places the PSUM tiles the
compiler places (`psum_tiles`: a tile's live range and size come from the instructions that touch it; a
tile of a bank or more starts at a bank's beginning, as the migration guide requires of `address=`, a smaller
one lies inside one bank, as the emulator packs it), over the banks no hand-placed tile holds. The ninth
one-bank tile of a loop lands on the first one's bank, and the matmul into it waits for that tile's eviction.
"""
from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass
from typing import Iterable

from nkisim import limits
from nkisim.emulator.trace import Allocation, Trace

NEVER_USED = -1      # the last access of bytes no allocation has held yet: older than any instruction
RESERVED = -2        # the owner of the banks hand-placed PSUM tiles hold, for the whole program


@dataclass(slots=True)
class _Range:
    """A contiguous byte range of a partition: held by a live allocation (`owner`), or free since the
    last access `last` of the allocation that held it."""

    start: int
    end: int
    owner: int | None
    last: int


@dataclass(frozen=True, slots=True)
class Reused:
    """Bytes [lo, hi) of an allocation (byte offsets within each of its partitions) that an earlier
    allocation released after its last access `last`."""

    lo: int
    hi: int
    last: int


def reused_bytes(trace: Trace, capacity: int = limits.SBUF_USABLE_BYTES_PER_PARTITION
                 ) -> dict[tuple[int, int], list[Reused]]:
    """(program, storage id) -> the released bytes the allocation lands on: SBUF tiles placed as a ring over
    `capacity` bytes, PSUM tiles as a ring over the banks no hand-placed tile holds (`psum_tiles`)."""
    spilled = {(s.program_id, s.allocation_id) for s in trace.spills}
    sbuf = defaultdict(list)
    for a in trace.sbuf_allocations:
        if not a.placed and (a.program_id, a.storage_id) not in spilled:
            sbuf[a.program_id].append(a)
    out = {}
    for program, allocations in sbuf.items():
        out |= _ring(program, allocations, _Memory(capacity))
    placed, psum = psum_tiles(trace)
    for program, allocations in psum.items():
        banks = _Memory(limits.PSUM_BANKS * limits.PSUM_BANK_BYTES, bank=limits.PSUM_BANK_BYTES,
                        reserved=placed.get(program, ()))
        out |= _ring(program, allocations, banks)
    return out


def psum_tiles(trace: Trace) -> tuple[dict[int, list[tuple[int, int]]], dict[int, list[Allocation]]]:
    """Per program: the byte ranges of the banks hand-placed PSUM tiles hold (`Trace.psum_banks`), and the live
    range of every other PSUM tile, from the first instruction that touches it to the last, with the bytes
    per partition its accesses reach (whole banks from one bank up: a tile of a bank or more starts at a
    bank's beginning, SDK:nki/migration/index.rst "Improved allocation API")."""
    first_bank = dict(trace.psum_banks)
    spans: dict[tuple[int, int], list[int]] = {}
    for ins in trace.instructions:
        for op in (*ins.reads, *ins.writes):
            if op.buffer == "psum":
                region = op.region
                span = spans.setdefault((ins.program_id, region.storage_id), [ins.index, ins.index, 0])
                span[1] = ins.index
                span[2] = max(span[2], region.f_hi * region.itemsize)
    placed, tiles, bank = defaultdict(list), defaultdict(list), limits.PSUM_BANK_BYTES
    for (program, storage), (first, last, reach) in spans.items():
        size = -(-reach // bank) * bank if reach >= bank else reach
        if storage in first_bank:
            start = first_bank[storage] * bank
            placed[program].append((start, start + max(size, bank)))
        else:
            tiles[program].append(Allocation(program, storage, first, last, size, False))
    return placed, tiles


def _ring(program: int, allocations: list[Allocation], memory: "_Memory") -> dict[tuple[int, int], list[Reused]]:
    """Place one program's allocations in order of first access; the released bytes each one takes."""
    out = {}
    live: list[tuple[int, int]] = []        # heap of (last access, storage id)
    for a in sorted(allocations, key=lambda a: (a.first, a.storage_id)):
        while live and live[0][0] < a.first:
            last, owner = heapq.heappop(live)
            memory.release(owner, last)
        taken = [r for r in memory.take(a.storage_id, a.bytes_per_partition) if r.last != NEVER_USED]
        if taken:
            out[program, a.storage_id] = taken
        heapq.heappush(live, (a.last, a.storage_id))
    return out


def reuse_edges(trace: Trace, capacity: int = limits.SBUF_USABLE_BYTES_PER_PARTITION) -> list[tuple[int, int, int]]:
    """(program, later, earlier): instruction `later` writes bytes of an allocation that an earlier one
    released, so it starts after `earlier` (that allocation's last access) ends. Every write waits, not
    only the first: a tile filled by several DMAs has each one land on the old tile's bytes."""
    reused = reused_bytes(trace, capacity)
    edges = set()
    for ins in trace.instructions if reused else ():
        for operand in ins.writes:
            if operand.buffer not in ("sbuf", "psum"):
                continue
            region = operand.region
            taken = reused.get((ins.program_id, region.storage_id))
            if taken:
                lo, hi = region.f_lo * region.itemsize, region.f_hi * region.itemsize
                edges.update((ins.program_id, ins.index, r.last) for r in taken if r.lo < hi and lo < r.hi)
    return sorted(edges)


class _Memory:
    """One partition's usable SBUF (or PSUM) as contiguous ranges in address order (`starts` mirrors them
    for bisection), the ranges each live allocation holds, and the ring's cursor: where the last
    allocation ended. PSUM has banks (`bank` bytes each): a tile of a bank or more starts at a bank's
    beginning, a smaller one lies inside one bank; `reserved` ranges (hand-placed tiles' banks) stay held."""

    def __init__(self, capacity: int, bank: int | None = None, reserved: Iterable[tuple[int, int]] = ()):
        self.ranges = [_Range(0, capacity, None, NEVER_USED)]
        self.starts = [0]
        self.held: dict[int, list[int]] = {}    # owner -> the starts of its ranges
        self.bank = bank
        merged: list[list[int]] = []
        for start, end in sorted(reserved):         # aliased hand-placed tiles may share banks
            if merged and start <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end])
        self._occupy(RESERVED, [(start, min(end, capacity)) for start, end in merged if start < capacity])
        self.cursor = 0

    def take(self, owner: int, need: int) -> list[Reused]:
        """Give `owner` `need` bytes: the first free window at or after the cursor, else the first
        from the lowest address, else (fragmented) pieces; which of its bytes held what, and until when."""
        for origin in (self.cursor, 0):
            i, n = max(self._index(origin), 0), len(self.ranges)
            while i < n:
                if self.ranges[i].owner is not None:
                    i += 1
                    continue
                end, j = self.ranges[i].end, i + 1     # the free run from range i
                while j < n and self.ranges[j].owner is None:
                    end, j = self.ranges[j].end, j + 1
                start = self._aligned(max(self.ranges[i].start, origin), need)
                if start + need <= end:
                    return self._occupy(owner, [(start, start + need)])
                i = j                           # a later start in the same free run fits no better
        pieces, left = [], need                 # fragmented: the oldest released bytes, wherever they are
        for r in sorted((r for r in self.ranges if r.owner is None), key=lambda r: (r.last, r.start)):
            if left <= 0:
                break
            size = min(r.end - r.start, left)
            pieces.append((r.start, r.start + size))
            left -= size
        return self._occupy(owner, pieces)

    def _aligned(self, start: int, need: int) -> int:
        """The first address from `start` a tile of `need` bytes may begin at (PSUM: see the class)."""
        if self.bank is None:
            return start
        if need >= self.bank or start // self.bank != (start + need - 1) // self.bank:
            return -(-start // self.bank) * self.bank
        return start

    def release(self, owner: int, last: int) -> None:
        """The owner's ranges become free, last accessed at `last`; free neighbours of the same age merge."""
        for start in self.held.pop(owner):
            i = self._index(start)
            self.ranges[i].owner, self.ranges[i].last = None, last
            for k in (i, i - 1):                # with the right neighbour, then the left one
                if 0 <= k < len(self.ranges) - 1 and self._same_age(self.ranges[k], self.ranges[k + 1]):
                    self.ranges[k].end = self.ranges[k + 1].end
                    del self.ranges[k + 1], self.starts[k + 1]

    def _occupy(self, owner: int, pieces: list[tuple[int, int]]) -> list[Reused]:
        """Mark the byte ranges `pieces` (all free) as held by `owner`, in that order from its offset 0;
        each range it covers, at its offset in the owner, with that range's last access."""
        taken, starts, offset = [], self.held.setdefault(owner, []), 0
        for start, end in pieces:
            self._split(start)
            self._split(end)
            i = self._index(start)
            while i < len(self.ranges) and self.ranges[i].start < end:
                r = self.ranges[i]
                taken.append(Reused(offset + r.start - start, offset + r.end - start, r.last))
                r.owner = owner
                starts.append(r.start)
                i += 1
            offset += end - start
            self.cursor = end
        return taken

    def _split(self, address: int) -> None:
        i = self._index(address)
        r = self.ranges[i] if i >= 0 else None
        if r is not None and r.start < address < r.end:
            self.ranges.insert(i + 1, _Range(address, r.end, r.owner, r.last))
            self.starts.insert(i + 1, address)
            r.end = address

    def _index(self, address: int) -> int:
        """The index of the range holding `address` (the last one, for the end of the memory)."""
        return bisect.bisect_right(self.starts, address) - 1

    @staticmethod
    def _same_age(left: _Range, right: _Range) -> bool:
        return left.owner is None and right.owner is None and left.last == right.last
