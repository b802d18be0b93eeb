"""The instruction trace: what the emulator records for every ISA call, and what the cost model reads.

One `Instruction` per `nki.isa` call (and per `nki.language` callable that lowers to one), in
program order, per program (physical core). The record carries everything the trn2 cost model
needs and nothing it has to re-derive from tensors: engine, profiler opcode, element counts,
dtypes, buffers, DMA bytes and descriptor mode, the `name=` label, the kernel source line, and
the memory regions each instruction reads and writes (for producer -> consumer dependencies).

Regions are per allocation ("storage"): on-chip storages are addressed as
[partition range) x [free-element range) within a partition; HBM storages as one flat element
range (partitions = [0, 1)). A strided view is recorded as its bounding box, which can only add
dependencies, never drop one.

Records are slotted dataclasses, not frozen ones: a frozen dataclass costs several times more to
build, and the emulator builds several per instruction. Nothing changes a record once it is in a
trace; derive changed copies with `dataclasses.replace`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

ON_CHIP = ("sbuf", "psum")
HBM = ("hbm", "private_hbm", "shared_hbm")


@dataclass(slots=True)
class Region:
    """A box of one storage: partitions [p_lo, p_hi) x free elements [f_lo, f_hi), elements of the storage's
    dtype (`itemsize` bytes each), whatever the dtype of the view it bounds."""

    storage_id: int
    p_lo: int
    p_hi: int
    f_lo: int
    f_hi: int
    itemsize: int

    @classmethod
    def of_view(cls, storage_id: int, on_chip: bool, storage_itemsize: int, bytes_per_partition: int,
                byte_offset: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> "Region":
        """Bounding box of a strided view that starts `byte_offset` bytes into its storage."""
        if 0 in shape:
            return cls(storage_id, 0, 0, 0, 0, storage_itemsize)
        if not on_chip:
            lo, hi = _extent(byte_offset, shape, strides, itemsize)
            return cls(storage_id, 0, 1, lo // storage_itemsize, -(-hi // storage_itemsize), storage_itemsize)
        p_first = byte_offset // bytes_per_partition
        p_last = p_first + (shape[0] - 1) * (strides[0] // bytes_per_partition)
        lo, hi = _extent(byte_offset % bytes_per_partition, shape[1:], strides[1:], itemsize)
        return cls(storage_id, min(p_first, p_last), max(p_first, p_last) + 1, lo // storage_itemsize,
                   -(-hi // storage_itemsize), storage_itemsize)

    def overlaps(self, other: "Region") -> bool:
        return (
            self.storage_id == other.storage_id
            and self.p_lo < other.p_hi
            and other.p_lo < self.p_hi
            and self.f_lo < other.f_hi
            and other.f_lo < self.f_hi
        )


@dataclass(slots=True)
class Operand:
    """One tensor view an instruction reads or writes."""

    role: str                   # "dst", "src", "data", "data1", "bias", "reduce_res", ...
    buffer: str                 # one of ON_CHIP + HBM
    dtype: str                  # numpy-style name: "float32", "bfloat16", "float8_e4m3", ...
    shape: tuple[int, ...]
    partitions: int             # shape[0] on chip; 1 for HBM
    elements_per_partition: int
    itemsize: int
    contiguous: bool            # innermost dim has unit stride (perf-mode rule)
    _region: Region | tuple     # the Region, or the `Region.of_view` arguments: most runs never ask
    inner_stride_bytes: int = 0  # bytes between neighbours along the innermost dim (0: one element there)

    @property
    def region(self) -> Region:
        if type(self._region) is tuple:
            self._region = Region.of_view(*self._region)
        return self._region

    @property
    def nbytes(self) -> int:
        return self.partitions * self.elements_per_partition * self.itemsize


def _extent(offset: int, shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> tuple[int, int]:
    """Byte range [lo, hi) touched by a strided view starting at `offset`."""
    if len(shape) == 1:     # one free dim, or a flat HBM range: the common case
        span = (shape[0] - 1) * strides[0]
        return (offset + span, offset + itemsize) if span < 0 else (offset, offset + span + itemsize)
    lo = hi = offset
    for n, s in zip(shape, strides):
        span = (n - 1) * s
        lo, hi = (lo + span, hi) if span < 0 else (lo, hi + span)
    return lo, hi + itemsize


@dataclass(slots=True)
class DmaInfo:
    """What a `dma_copy` moved and how its descriptors were made."""

    direction: str              # "hbm->sbuf", "sbuf->hbm", "hbm->hbm", "sbuf->sbuf"
    nbytes: int                 # bytes written to dst
    partitions: int             # partitions of the on-chip side (1 for hbm->hbm)
    bytes_per_partition: int
    dge_mode: str               # "unknown", "swdge", "hwdge", "none"
    queue_engine: str           # engine whose queue triggers it: "Sync", "Scalar", "GpSimd", or "none"
    cast: bool                  # src and dst dtypes differ (cast through fp32)
    pieces: int = 0             # runs of consecutive addresses on both sides (0: one per partition row)


@dataclass(slots=True)
class Instruction:
    """One emulated instruction, as the trace stores it."""

    index: int                  # position in its program's instruction stream
    program_id: int             # physical core within the logical core (0 or 1)
    isa: str                    # the nki.isa function: "activation", "dma_copy", ...
    opcode: str                 # profiler opcode, as registered in nkisim.vocabulary: "ACTIVATE", "DMA", ...
    engine: str                 # an engine of nkisim.vocabulary.ENGINES, or vocabulary.DMA for dma_copy
    name: str | None            # the `name=` label given in the kernel
    source: str                 # "file.py:LINE" of the kernel line that issued it
    elements_per_partition: int  # N of the cost formulas (largest operand, per partition)
    partitions: int
    reads: tuple[Operand, ...]
    writes: tuple[Operand, ...]
    attrs: dict[str, Any] = field(default_factory=dict)  # op, func, reduce flags, engine kwarg...
    dma: DmaInfo | None = None


SAVE, RELOAD = "save", "reload"     # the two kinds of `Spill`


@dataclass(slots=True)
class Spill:
    """A transfer the compiler adds for an SBUF allocation it keeps in HBM because the program's live
    allocations exceed the usable SBUF (nkisim/README.md, "SBUF allocation model"): before instruction
    `index` reads the spilled allocation, a RELOAD of what it reads; after it writes it, a SAVE of what
    it wrote. The cost model turns each into a DMA transfer (`costmodel/dma.py`, `spill_transfer`)."""

    program_id: int
    index: int                  # the instruction it serves, in its program
    kind: str                   # SAVE or RELOAD
    allocation_id: int          # storage id of the spilled allocation
    allocation: str             # its description: name, shape, dtype, kernel line
    partitions: int
    bytes_per_partition: int

    @property
    def nbytes(self) -> int:
        return self.partitions * self.bytes_per_partition


@dataclass(slots=True)
class Allocation:
    """The live range of one SBUF allocation of a program, in its instruction indices: the compiler
    "assigns an address to a tile at its first write and releases the address after its last read"
    (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.Allocation.html).
    The cost model places it and reuses released addresses (`costmodel/memory_reuse.py`)."""

    program_id: int
    storage_id: int
    first: int
    last: int
    bytes_per_partition: int
    placed: bool                # by address=: where the kernel put it, not the compiler's to reuse


@dataclass
class Trace:
    """All instructions of one kernel launch, plus what the launch allocated."""

    kernel: str
    lnc: int
    instructions: list[Instruction] = field(default_factory=list)
    sbuf_peak_bytes_per_partition: dict[int, int] = field(default_factory=dict)  # per program_id
    dry_run: bool = False
    # Scheduling constraints the kernel gave the compiler (`nl.no_reorder` blocks, `with_schedule`
    # edges): (program_id, later, earlier) instruction indices; `later` starts after `earlier` ends.
    order_edges: list[tuple[int, int, int]] = field(default_factory=list)
    # `depends_on(..., kind=nisa.dependency.schedule)` edges (program_id, later, earlier): `later` starts no
    # earlier than `earlier` starts (issue order, no synchronisation). A tuple, so traces pickled before it
    # existed read the class default.
    issue_edges: tuple[tuple[int, int, int], ...] = ()
    # What the compiler would spill to make the program fit the usable SBUF (empty when it fits).
    spills: list[Spill] = field(default_factory=list)
    # Every SBUF allocation's live range (filled at the end of the launch).
    sbuf_allocations: list[Allocation] = field(default_factory=list)
    # PSUM tiles placed by hand (`address=`): (storage_id, first bank). Tiles the compiler places get banks of
    # their own. A tuple, so traces pickled before it existed read the class default.
    psum_banks: tuple[tuple[int, int], ...] = ()
    # The iteration boundaries of compiled loops (`nl.fori_loop`, `nl.while_loop`, `nl.dynamic_range`):
    # (program_id, index), every instruction before `index` ends before any from `index` on starts
    # (`costmodel/scheduler.py`, "compiled loops"). A tuple, so traces pickled before it existed read the default.
    loop_fences: tuple[tuple[int, int], ...] = ()

    def __iter__(self) -> Iterator[Instruction]:
        return iter(self.instructions)

    def __len__(self) -> int:
        return len(self.instructions)

    def program(self, program_id: int) -> list[Instruction]:
        return [i for i in self.instructions if i.program_id == program_id]

    def counts(self) -> dict[tuple[str, str], int]:
        """Instruction count per (engine, opcode), as a profile's OpcodeSummary lists them."""
        out: dict[tuple[str, str], int] = {}
        for ins in self.instructions:
            key = (ins.engine, ins.opcode)
            out[key] = out.get(key, 0) + 1
        return out
