"""SBUF address reuse: the dependencies a tile pipeline gets when the compiler gives a new allocation
memory an earlier one released.

The compiler "assigns an address to a tile at its first write and releases the address after its
last read" (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.Allocation.html).
The emulator gives every `nl.ndarray` its own storage, so region dependencies alone let a loop's
iterations run arbitrarily far ahead of each other; on hardware an allocation made when the usable
SBUF is full lands on bytes an earlier one released, and its first write waits for that one's last
access (a write-after-read on the same addresses). The model places allocations in the order of their
first access (the linear scan of `nkisim/emulator/allocation.py`): first in never-used bytes, then in
the bytes released longest ago (an assumption: the allocator's choice among free addresses is not
documented; the oldest leaves the most slack, so the model errs towards overlap). Each earlier
allocation whose bytes it takes adds one edge (program, new first access, old last access), applied
by the scheduler like the kernel's own ordering edges. Hand-placed (`address=`) and spilled
allocations are left out: the kernel, or the spill transfers, order those.
"""
from __future__ import annotations

import heapq
from collections import defaultdict, deque

from nkisim import limits
from nkisim.emulator.trace import Trace


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
        fresh = capacity
        live: list[tuple[int, int, int]] = []         # heap of (last access, storage id, bytes)
        released: deque[list[int]] = deque()          # [last access, bytes left], oldest release first
        for a in sorted(allocations, key=lambda a: (a.first, a.storage_id)):
            while live and live[0][0] < a.first:
                last, _, size = heapq.heappop(live)
                released.append([last, size])
            need = a.bytes_per_partition
            taken = min(fresh, need)
            fresh, need = fresh - taken, need - taken
            while need > 0 and released:
                chunk = released[0]
                taken = min(chunk[1], need)
                need, chunk[1] = need - taken, chunk[1] - taken
                if chunk[1] == 0:
                    released.popleft()
                edges.append((program, a.first, chunk[0]))
            heapq.heappush(live, (a.last, a.storage_id, a.bytes_per_partition))
    return edges
