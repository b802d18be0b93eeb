"""SBUF address reuse: the dependencies a tile pipeline gets when the compiler gives a new allocation
memory an earlier one released.

The compiler "assigns an address to a tile at its first write and releases the address after its
last read" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.Allocation.html).
An address is one place: a tile's bytes in a partition are one contiguous range, which is how the
placement APIs name it (`address=(partition_offset, free_offset)` on `nl.ndarray`,
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html; a direct-allocation
function returns one start address per tile,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.sbuf.alloc.html).
The emulator gives every `nl.ndarray` its own storage, so region dependencies alone let a loop's
iterations run arbitrarily far ahead of each other; on hardware a tile made when no never-used range
of its size is left lands on bytes earlier tiles released, and its first write waits for their last
access (a write-after-read on the same addresses: "a tile can take the address of a tile freed
shortly before, so a DMA into it waits for the compute that reads the earlier tile",
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
back to back (benchmarks/dev_set/figures.json). Each earlier
allocation whose bytes it takes adds one edge (program, new first access, old last access), applied by
the scheduler like the kernel's own ordering edges. Hand-placed (`address=`) and spilled allocations
are left out: the kernel, or the spill transfers, order those. When no window is wide enough (the free
bytes suffice, as the emulator's capacity check ensured, but lie in pieces) the compiler's remedy is
not documented: the allocation then takes the oldest released bytes wherever they lie.
"""
from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass

from nkisim import limits
from nkisim.emulator.trace import Trace

NEVER_USED = -1      # the last access of bytes no allocation has held yet: older than any instruction


@dataclass(slots=True)
class _Range:
    """A contiguous byte range of a partition: held by a live allocation (`owner`), or free since the
    last access `last` of the allocation that held it."""

    start: int
    end: int
    owner: int | None
    last: int


def reuse_edges(trace: Trace, capacity: int = limits.SBUF_USABLE_BYTES_PER_PARTITION) -> list[tuple[int, int, int]]:
    """(program, later, earlier): instruction `later` (an allocation's first access) starts after
    `earlier` (the last access of an allocation whose released bytes it reuses) ends."""
    spilled = {(s.program_id, s.allocation_id) for s in trace.spills}
    by_program = defaultdict(list)
    for a in trace.sbuf_allocations:
        if not a.placed and (a.program_id, a.storage_id) not in spilled:
            by_program[a.program_id].append(a)
    edges = []
    for program, allocations in by_program.items():
        memory = _Memory(capacity)
        live: list[tuple[int, int]] = []        # heap of (last access, storage id)
        for a in sorted(allocations, key=lambda a: (a.first, a.storage_id)):
            while live and live[0][0] < a.first:
                last, owner = heapq.heappop(live)
                memory.release(owner, last)
            taken = memory.take(a.storage_id, a.bytes_per_partition)
            edges += [(program, a.first, last) for last in sorted(taken) if last != NEVER_USED]
            heapq.heappush(live, (a.last, a.storage_id))
    return edges


class _Memory:
    """One partition's usable SBUF as contiguous ranges in address order (`starts` mirrors them for
    bisection), the ranges each live allocation holds, and the ring's cursor: where the last
    allocation ended."""

    def __init__(self, capacity: int):
        self.ranges = [_Range(0, capacity, None, NEVER_USED)]
        self.starts = [0]
        self.held: dict[int, list[int]] = {}    # owner -> the starts of its ranges
        self.cursor = 0

    def take(self, owner: int, need: int) -> set[int]:
        """Give `owner` `need` bytes: the first free window at or after the cursor, else the first
        from the lowest address, else (fragmented) pieces; the last accesses of the bytes it takes."""
        for origin in (self.cursor, 0):
            i, n = max(self._index(origin), 0), len(self.ranges)
            while i < n:
                if self.ranges[i].owner is not None:
                    i += 1
                    continue
                start = max(self.ranges[i].start, origin)
                end, j = self.ranges[i].end, i + 1
                while end - start < need and j < n and self.ranges[j].owner is None:
                    end, j = self.ranges[j].end, j + 1
                if end - start >= need:
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

    def release(self, owner: int, last: int) -> None:
        """The owner's ranges become free, last accessed at `last`; free neighbours of the same age merge."""
        for start in self.held.pop(owner):
            i = self._index(start)
            self.ranges[i].owner, self.ranges[i].last = None, last
            for k in (i, i - 1):                # with the right neighbour, then the left one
                if 0 <= k < len(self.ranges) - 1 and self._same_age(self.ranges[k], self.ranges[k + 1]):
                    self.ranges[k].end = self.ranges[k + 1].end
                    del self.ranges[k + 1], self.starts[k + 1]

    def _occupy(self, owner: int, pieces: list[tuple[int, int]]) -> set[int]:
        """Mark the byte ranges `pieces` (all free) as held by `owner`; the last accesses of what they covered."""
        taken, starts = set(), self.held.setdefault(owner, [])
        for start, end in pieces:
            self._split(start)
            self._split(end)
            i = self._index(start)
            while i < len(self.ranges) and self.ranges[i].start < end:
                taken.add(self.ranges[i].last)
                self.ranges[i].owner = owner
                starts.append(self.ranges[i].start)
                i += 1
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
