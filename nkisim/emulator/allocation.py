"""On-chip allocations: their placement (`address=`, `placement`), the 128-partition limit of a tile
(`check_partitions`), and the SBUF allocation model: when a program's live allocations exceed the
usable SBUF, does the compiler spill some of them to HBM or fail? (nkisim/README.md, "SBUF
allocation model"; `spills`).

"If the total size of the live data being used by a NKI kernel overflows the capacity of any on-chip
memory, the Neuron compiler will insert the necessary spills or refills between that memory and the
next-tier memory in the hierarchy"
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/about/memory-hierarchy-overview.html).
The rule, in three parts:
1. The unit is the allocation (one `nl.ndarray`): the compiler "assigns an address to a tile at its
   first write and releases the address after its last read"
   (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.Allocation.html),
   and spills or keeps a tile whole. An instruction runs on operands in SBUF, so the allocations one
   instruction touches must fit together: if they do not, no spill helps and compilation fails.
2. Otherwise the compiler spills, chosen by linear scan (the LINEAR allocation of that page; Poletto
   and Sarkar's heuristic): allocations in the order of their first use; when one would overflow the
   usable SBUF, the live allocation whose live range ends last leaves SBUF for the rest of its range.
   An allocation placed by hand (`address=`) stays where the kernel put it.
   Where an allocation sits across the partitions counts: "the start partition ... is currently handled by
   the tensor allocator in Neuron Compiler ... If 32 < num_partition <= 64, start_partition must be 0 or 64"
   (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium_inferentia2_arch.html),
   so a tile of at most 64 (32) partitions occupies one half (quarter) of the partitions, and two of them
   can sit side by side: nki-library's cross_entropy puts two (64, 65535) bf16 tiles (2 x 131,070 bytes per
   partition) in one instruction at its own test configurations. The model places each allocation, at its
   first use, where the allowed starts leave the least-loaded quarters (or at its address=), and counts
   bytes per partition quarter by quarter.
3. A spilled allocation costs HBM traffic: each instruction that reads it first reloads what it
   reads, each one that writes it saves what it wrote, unless nothing reads the allocation later
   (trace `Spill` records; the cost model turns them into DMA transfers).
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from . import nki_versions
from .errors import NkiValidationError
from .tensor import Storage
from .trace import RELOAD, SAVE, Operand, Spill
from ..limits import PARTITIONS, SBUF_BYTES_PER_PARTITION, SBUF_USABLE_BYTES_PER_PARTITION, START_PARTITIONS

RULE = 'nkisim/README.md, "SBUF allocation model"'
TILING_PAGE = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/about/tiling-overview.html"
# address=(partition_offset, free_offset) on nl.ndarray: "the partition offset corresponds to a physical
# partition lane on the hardware" (migration guide, "Improved allocation API"). The same page calls the free
# offset an element offset in one sentence, but its translation example computes it in bytes ("lists of
# virtual byte addresses", n_k * 2 per bf16 tile), and AWS's own allocator (nki-library SbufManager) passes
# byte addresses up to tile_size.total_available_sbuf_size: nkisim takes bytes, as the toolchain evidently does.
ADDRESS_PAGE = "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html"


@dataclass
class Live:
    """The live range of one SBUF allocation. It keeps a description of the allocation, not the
    allocation, so a dead tile's memory is freed (and reused, cache-warm) while the kernel runs on."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    bytes_per_partition: int
    source: str
    first: int
    last: int
    placed: bool = False        # by address=: the compiler cannot move it out
    partition_offset: int = 0   # its first partition, when placed
    accesses: list[tuple[int, bool, Operand]] = field(default_factory=list)   # (instruction, writes?, operand)

    @classmethod
    def of(cls, st: Storage, index: int) -> "Live":
        return cls(st.name, st.data.shape, st.data.dtype, st.bytes_per_partition, st.source, index, index, st.placed,
                   st.partition_offset)

    def quarter_choices(self) -> tuple[tuple[int, ...], ...]:
        """The sets of partition quarters (32 partitions each) it may occupy: its address=, else each start
        partition the allocator may give a tile of its partition count (START_PARTITIONS)."""
        rows = self.shape[0]
        starts = (self.partition_offset,) if self.placed else next(
            (s for most, s in START_PARTITIONS if rows <= most), (0,))
        return tuple(tuple(range(s // QUARTER, min(QUARTERS, -(-(s + rows) // QUARTER)))) for s in starts)

    def describe(self) -> str:
        return (f"{self.name or 'tensor'} {self.shape} {self.dtype.name} = {self.bytes_per_partition} B "
                f"({self.source})")


def placement(api: str, shape: tuple[int, ...], itemsize: int, buffer: str, address: Any, where: str) -> tuple[int, int]:
    """The checked (partition_offset, free_offset) of an on-chip allocation; (0, 0) when the compiler
    places it. A hand-placed tile must lie within the buffer's partitions and, in SBUF, its bytes."""
    if address is None:
        return 0, 0
    if (not isinstance(address, tuple) or len(address) != 2
            or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in address)):
        raise NkiValidationError(
            f"{api}: address must be a tuple (partition_offset, free_offset) of compile-time ints, got {address!r} "
            f"({ADDRESS_PAGE}, \"Improved allocation API\") ({where})")
    partition, offset = (int(a) for a in address)
    if partition < 0 or partition + shape[0] > PARTITIONS:
        raise NkiValidationError(
            f"{api}: address partition offset {partition} with {shape[0]} partitions covers partitions "
            f"{partition}..{partition + shape[0] - 1}; {buffer} has partitions 0..{PARTITIONS - 1} (the partition "
            f"offset is a physical partition lane, {ADDRESS_PAGE}) ({where})")
    if buffer == "sbuf":
        end = offset + int(np.prod(shape[1:])) * itemsize
        if offset < 0 or end > SBUF_BYTES_PER_PARTITION:
            raise NkiValidationError(
                f"{api}: address free offset {offset} places the tile's {end - offset} bytes per partition at bytes "
                f"{offset}..{end - 1}, beyond the {SBUF_BYTES_PER_PARTITION} bytes of an SBUF partition (the free "
                f"offset is a byte address within each partition, {ADDRESS_PAGE}) ({where})")
    return partition, offset


def check_hbm_address(api: str, address: Any, where: str) -> None:
    """The address= of an HBM tensor, checked, not used: nkisim keeps every HBM tensor in storage of its own,
    so two tensors at one address do not alias. NKI 0.7 takes a 1-tuple (free_offset,); NKI 0.6's page has
    one form, (partition_offset, free_offset), for every buffer."""
    row = nki_versions.ROWS["hbm-address-free-offset"]
    one_tuple = nki_versions.applies("hbm-address-free-offset")
    size, form = (1, "(free_offset,)") if one_tuple else (2, "(partition_offset, free_offset)")
    if (not isinstance(address, tuple) or len(address) != size
            or not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) and a >= 0 for a in address)):
        raise NkiValidationError(
            f"{api}: the address of an HBM tensor in NKI {nki_versions.release()} is a tuple {form} of non-negative "
            f"compile-time ints, got {address!r} ({row.page}) ({where})")


def check_partitions(isa: str, role: str, st: Storage, where: str) -> None:
    """An instruction touches a tile of more than 128 partitions, even through a view of fewer: "the P
    dimension size of a tile in both SBUF and PSUM must never exceed nki.language.tile_size.pmax == 128"
    (tile-size constraint #1 is about the tile). Checked at the tile's first use (an unused allocation
    costs nothing, as in the SBUF footprint)."""
    if st.data.shape[0] > PARTITIONS:
        raise NkiValidationError(
            f"{isa}: {role} is a view of the {st.buffer.name} tensor {st.data.shape} allocated at ({st.source}), "
            f"whose partition dimension {st.data.shape[0]} exceeds maximum {PARTITIONS}: \"the P dimension size of a "
            f"tile in both SBUF and PSUM must never exceed nki.language.tile_size.pmax == {PARTITIONS}\" (tile-size "
            f"constraint #1, {TILING_PAGE}); allocate [{PARTITIONS}, ...] tiles, e.g. a list of them ({where})")


QUARTER = PARTITIONS // 4       # the start-partition rule's granularity
QUARTERS = PARTITIONS // QUARTER


def place(load: list[int], live: Live) -> tuple[int, ...]:
    """Where the allocator puts `live` given the bytes per partition already in each quarter: the allowed
    quarters with the least load (then the lowest start)."""
    return min(live.quarter_choices(), key=lambda quarters: (max(load[q] for q in quarters), quarters))


def packed_bytes(lives: list[Live]) -> int:
    """The bytes per partition of the fullest quarter once `lives` are placed, largest first."""
    load = [0] * QUARTERS
    for live in sorted(lives, key=lambda l: -l.bytes_per_partition):
        for q in place(load, live):
            load[q] += live.bytes_per_partition
    return max(load)


def peak_bytes(lives: list[Live]) -> tuple[int, int]:
    """(peak bytes per partition, instruction index where it is reached): each allocation placed at its first
    use, live until its last."""
    if not lives:
        return 0, -1
    starting: dict[int, list[Live]] = defaultdict(list)
    ending: dict[int, list[tuple[Live, tuple[int, ...]]]] = defaultdict(list)
    for live in lives:
        starting[live.first].append(live)
    load = [0] * QUARTERS
    peak, at = -1, -1
    for index in sorted(set(starting) | {live.last for live in lives}):
        for live in starting.get(index, ()):
            quarters = place(load, live)
            for q in quarters:
                load[q] += live.bytes_per_partition
            ending[live.last].append((live, quarters))
        if max(load) > peak:
            peak, at = max(load), index
        for live, quarters in ending.pop(index, ()):
            for q in quarters:
                load[q] -= live.bytes_per_partition
    return peak, at


def spills(program: int, lives: list[Live], peak: int, at: int, source_of: Callable[[int], str]) -> list[Spill]:
    """What the compiler would spill so that `program` (its SBUF allocations `lives`, peaking at `peak`
    bytes per partition at instruction `at`; `source_of` gives an instruction's kernel line) fits the
    usable SBUF; an NkiValidationError if no spill can make it fit."""
    _check_working_sets(program, lives, peak, at, source_of)
    spilled = _linear_scan(lives)
    if spilled is None:
        placed = "; ".join(l.describe() for l in lives if l.placed)
        raise NkiValidationError(
            f"SBUF capacity: program {program} needs {peak} bytes per partition at its peak ({source_of(at)}), "
            f"exceeding the usable {SBUF_USABLE_BYTES_PER_PARTITION}, and what would have to leave SBUF is placed by "
            f"address=, which the compiler does not move ({RULE}): {placed}")
    return [s for live in spilled for s in _transfers(program, live)]


def _check_working_sets(program: int, lives: list[Live], peak: int, at: int, source_of: Callable[[int], str]) -> None:
    """Fail where one instruction's own allocations exceed the usable SBUF (part 1 of the rule)."""
    used: dict[int, list[Live]] = defaultdict(list)
    for live in lives:
        for index in {index for index, _, _ in live.accesses}:
            used[index].append(live)
    index, needed = max(((i, packed_bytes(ls)) for i, ls in used.items()), key=lambda pair: (pair[1], -pair[0]))
    if needed <= SBUF_USABLE_BYTES_PER_PARTITION:
        return
    top = "; ".join(l.describe() for l in sorted(used[index], key=lambda l: -l.bytes_per_partition)[:5])
    raise NkiValidationError(
        f"SBUF capacity: program {program} needs {needed} bytes per partition for the allocations one instruction "
        f"uses at once, exceeding the usable {SBUF_USABLE_BYTES_PER_PARTITION} bytes per partition of trn2 (its "
        f"peak of live allocations: {peak} bytes at ({source_of(at)})); the compiler spills whole "
        f"allocations to HBM, but an instruction's own must all be in SBUF ({RULE}); they are: {top}; make them "
        f"smaller, e.g. fewer tiles per allocation; the instruction is at ({source_of(index)})")


def _linear_scan(lives: list[Live]) -> list[Live] | None:
    """The allocations linear scan spills (part 2 of the rule), in the order it spills them; None if
    only hand-placed allocations are left to spill."""
    order = sorted(range(len(lives)), key=lambda i: (lives[i].first, i))
    resident = [False] * len(lives)
    where: list[tuple[int, ...]] = [()] * len(lives)  # the quarters each allocation occupies
    ending: list[tuple[int, int]] = []               # (last use, i) of the resident allocations
    furthest: list[tuple[int, int, int]] = []        # (-last, -first, -i): the spill candidates, furthest end first
    used = [0] * QUARTERS

    def leave(j: int) -> None:
        resident[j] = False
        for q in where[j]:
            used[q] -= lives[j].bytes_per_partition

    spilled = []
    for i in order:
        live = lives[i]
        while ending and ending[0][0] < live.first:
            _, j = heapq.heappop(ending)
            if resident[j]:
                leave(j)
        resident[i], where[i] = True, place(used, live)
        for q in where[i]:
            used[q] += live.bytes_per_partition
        heapq.heappush(ending, (live.last, i))
        heapq.heappush(furthest, (-live.last, -live.first, -i))
        kept = []
        while max(used) > SBUF_USABLE_BYTES_PER_PARTITION:
            if not furthest:
                return None
            entry = heapq.heappop(furthest)
            j = -entry[2]
            full = any(used[q] > SBUF_USABLE_BYTES_PER_PARTITION for q in where[j])
            if resident[j] and (lives[j].placed or not full):
                kept.append(entry)       # placed by hand, or in quarters that are not over: leaving frees nothing
            elif resident[j]:
                leave(j)
                spilled.append(lives[j])
        for entry in kept:
            heapq.heappush(furthest, entry)
    return spilled


def _transfers(program: int, live: Live) -> list[Spill]:
    """A spilled allocation's reloads (before each instruction that reads it) and saves (after each one
    that writes it, if a later one reads it) of the bytes the instruction accesses; operands accessing
    the same view count once."""
    last_read = max((index for index, is_write, _ in live.accesses if not is_write), default=-1)
    seen = set()
    out = []
    for index, is_write, op in live.accesses:
        key = (index, is_write, op.region.p_lo, op.region.p_hi, op.region.f_lo, op.region.f_hi)
        if key in seen or (is_write and index >= last_read):
            continue
        seen.add(key)
        out.append(Spill(program, index, SAVE if is_write else RELOAD, op.region.storage_id, live.describe(),
                         op.partitions, op.elements_per_partition * op.itemsize))
    return out


def warning_text(plans: dict[int, tuple[int, int, list[Spill]]], source_of) -> str:
    """One warning for a launch: per program, the peak, what would be spilled (by kernel line) and the
    traffic. `plans` maps program id -> (peak, instruction index of the peak, spills)."""
    parts = []
    for pid, (peak, at, program_spills) in sorted(plans.items()):
        spilled: dict[int, str] = {s.allocation_id: s.allocation for s in program_spills}
        by_line: dict[str, int] = defaultdict(int)
        for description in spilled.values():
            by_line[description] += 1
        listed = "; ".join(f"{n} x {d}" if n > 1 else d for d, n in sorted(by_line.items(), key=lambda kv: -kv[1]))
        saved = sum(s.nbytes for s in program_spills if s.kind == SAVE)
        reloaded = sum(s.nbytes for s in program_spills if s.kind == RELOAD)
        parts.append(f"program {pid} needs {peak} bytes per partition at its peak ({source_of(pid, at)}), above the "
                     f"usable {SBUF_USABLE_BYTES_PER_PARTITION}; the compiler would spill {len(spilled)} "
                     f"allocation(s) to HBM: {listed}; that adds {saved / 1e6:.2f} MB of saves and "
                     f"{reloaded / 1e6:.2f} MB of reloads, which the trn2 cost model (estimate) charges")
    return ("SBUF spill (every instruction's own allocations fit, so the compiler spills rather than fail; "
            f"{RULE}): " + " | ".join(parts))
