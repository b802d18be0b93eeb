"""Per-core state of a running launch: programs (one per physical core), the launch they share,
SBUF live ranges and footprint, and which program is running now.

Each program has its own SBUF, PSUM, private HBM, registers and 128-lane Scalar (activation) and
Vector accumulators; kernel arguments and `nl.shared_hbm` allocations are shared. `shared_hbm`
tensors allocated inside the kernel are matched across programs by allocation order (shape and
dtype must agree), so both programs write one output. With LNC=2 a program reading shared HBM
elements that another program wrote, or writing elements that another program wrote or read, since
the last synchronisation both passed (core_barrier, sendrecv) races with it on hardware: a write that
leaves the values unchanged gives a `NkiRaceWarning` (the result cannot depend on the order); two
writes are an error unless each core's last write leaves the same values; a read and a write are
decided after the launch (kernel.py runs it again with the other core first: identical outputs mean
the value read never reached them, a warning; different outputs, an error).

SBUF live ranges (nkisim/README.md, "SBUF allocation model"): an SBUF allocation is live from the
first instruction that touches it (normally its first write) to the last instruction that reads or
writes it; a program's footprint is the peak, over its instruction stream, of the summed
per-partition bytes (free elements x itemsize of the whole allocation) of the live allocations.
Each allocation also keeps its accesses (instruction, operand), from which `allocation.py` decides
whether the compiler would spill or fail when that peak exceeds the usable SBUF.

`isa` and `language` import this module (never the launch machinery) to reach the running program.
"""
from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from . import dtypes
from .errors import NkiRaceWarning, NkiValidationError, kernel_location
from .allocation import Live, check_hbm_address, check_partitions, peak_bytes, placement
from .psum import PsumState, check_allocation
from .tensor import PSUM, SBUF, SHARED_HBM, Buffer, NkiTensor, Storage
from .trace import DmaInfo, Instruction, Trace
from ..limits import ACCUMULATOR_LANES


class Program:
    """The state of one physical core while it runs the kernel body."""

    def __init__(self, launch: "Launch", program_id: int) -> None:
        self.launch = launch
        self.id = program_id
        self.count = 0
        # Scalar engine (activation): registers hold what they held before the kernel, the uninitialised
        # marker (NaN), until a reduce_cmd reset/reset_reduce zeroes them (nkisim/README.md, "Numerics").
        self.accumulator = np.full(ACCUMULATOR_LANES, np.nan, np.float32)
        # Vector engine (isa_vector): undefined (NaN) until a reset_reduce / load_reduce; `vector_accumulator_undefined`
        # says why it is undefined now (None once defined), so that reading it is an error naming the cause.
        self.vector_accumulator = np.full(ACCUMULATOR_LANES, np.nan, np.float32)
        self.vector_accumulator_undefined: str | None = "since the kernel started (no reset_reduce or load_reduce yet)"
        self.rng_states: dict[str, np.ndarray] | None = None                # per engine (isa_random)
        self.sbuf: dict[int, Live] = {}
        self.psum = PsumState()
        self.shared_allocs: dict[str, int] = {}     # shared_hbm tensors allocated so far, per name ("" unnamed)
        self.epoch = 0          # synchronisations (core_barrier, sendrecv) this program has passed
        self.no_reorder_depth = 0   # open `with nl.no_reorder():` blocks (dynamic loops refuse to run in one)
        self.no_reorder_last: int | None = None   # the block's latest instruction, which the next one follows
        self.loop_bodies: list = []     # the running dynamic loops' loop_bodies.LoopBody, outermost first
        self.dynamic_trips: list[tuple[str, str, int]] = []   # (api, line, trips) of each loop with runtime bounds
        self.loop_fences: list[int] = []    # instruction counts at compiled-loop iteration boundaries (Trace.loop_fences)
        self.check_only = 0     # open compiled-loop bodies run only to check them (registers._checking_only)

    @property
    def compute(self) -> bool:
        return not self.launch.dry_run and not self.check_only

    @property
    def loop_iterations(self) -> tuple[tuple[Any, int], ...]:
        """The running dynamic-loop iterations, outermost first: (loop, iteration) pairs (dependencies)."""
        return tuple((body, body.iteration) for body in self.loop_bodies)

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype, buffer: Buffer, name: str,
                 source: str, fill: Callable[[np.ndarray], None] | None, api: str = "nl.ndarray",
                 address: Any = None) -> NkiTensor:
        partition = 0
        if buffer.on_chip:
            partition, offset = placement(api, shape, dtype.itemsize, buffer.name, address, source)
        elif address is not None:
            check_hbm_address(api, address, source)
        bank = check_allocation(api, shape, dtype, None if address is None else offset, source) if buffer is PSUM else None
        if buffer is SHARED_HBM:
            storage = self.launch.shared_storage(self, shape, dtype, name, source, fill)
        else:
            storage = self.launch.new_storage(buffer, np.empty(shape, dtype), self.id, name, source)
            if self.compute:
                storage.pending_fill = fill or dtypes.fill_uninitialised
            if buffer is PSUM:
                self.psum.allocate(storage, bank)
            storage.partition_offset = partition
            storage.placed = address is not None
        for body in self.loop_bodies:       # a compiled loop's body compares its tensors by allocation line
            body.made.add(storage.id)
        if self.loop_bodies:                # declared here (again, for a shared tensor the other core made)
            storage.scope_ended = ""
            self.loop_bodies[-1].own.append(storage)
        return NkiTensor(storage, storage.data)

    def record(self, isa: str, opcode: str, engine: str, name: str | None, source: str,
               reads: list[tuple[str, NkiTensor]], writes: list[tuple[str, NkiTensor]],
               attrs: dict[str, Any], dma: DmaInfo | None = None, epp: int | None = None) -> Instruction:
        index = self.count
        if self.check_only:     # validated, not run: no trace entry, no live range, no PSUM or written state
            for role, t in reads + writes:
                if t.buffer.on_chip:
                    check_partitions(isa, role, t.storage, source)
            return Instruction(-1, self.id, isa, opcode, engine, name, source, epp or 0, 1, (), (), attrs, dma)
        partitions = -1         # the most partitions of any on-chip operand (1 if none is on chip)
        for role, t in reads + writes:
            if t.buffer.on_chip:
                partitions = max(partitions, t.partitions)
                if t.buffer is SBUF:
                    live = self.sbuf.get(t.storage.id)
                    if live is None:
                        check_partitions(isa, role, t.storage, source)
                        self.sbuf[t.storage.id] = Live.of(t.storage, index)
                    else:
                        live.last = index
                else:
                    check_partitions(isa, role, t.storage, source)
                    self.psum.touch(t.storage, index)
        r = tuple([t.operand(role) for role, t in reads])
        w = tuple([t.operand(role) for role, t in writes])
        for operands, views, is_write in ((r, reads, False), (w, writes, True)):
            for op, (_, t) in zip(operands, views):
                if t.buffer is SBUF:
                    self.sbuf[t.storage.id].accesses.append((index, is_write, op))
        if epp is None:
            epp = max([o.elements_per_partition for o in r + w])
        ins = Instruction(index, self.id, isa, opcode, engine, name, source, epp, 1 if partitions < 0 else partitions,
                          r, w, attrs, dma)
        self.launch.trace.instructions.append(ins)
        if self.no_reorder_depth:
            if self.no_reorder_last is not None:
                self.launch.trace.order_edges.append((self.id, index, self.no_reorder_last))
            self.no_reorder_last = index
        for _, t in writes:
            t.storage.written = True
            if t.buffer is PSUM:
                self.psum.note_write(t, by_matmul=engine == "Tensor")
        if self.compute:        # a dry run writes nothing: its outputs are filled whole at the end
            for _, t in reads:
                if t.storage.pending_fill is not None:
                    t.storage.materialise()
            for _, t in writes:
                if t.storage.pending_fill is not None:
                    t.storage.note_write(t.arr, t.byte_offset)
        self.count = index + 1
        return ins

    def sbuf_peak(self) -> tuple[int, int]:
        """(peak bytes per partition, instruction index where it is reached)."""
        return peak_bytes(list(self.sbuf.values()))

    def source_of(self, index: int) -> str:
        """The kernel line of this program's instruction `index`."""
        return next(i.source for i in self.launch.trace.instructions if i.program_id == self.id and i.index == index)

    def note_shared_write(self, access: "Covered", isa: str, where: str) -> Callable[[], None] | None:
        """LNC>1: note the shared HBM elements this program is about to write. If another program
        wrote or read some of them since the last synchronisation both passed (core_barrier /
        sendrecv), the two cores race on them: return the check to run after the write. Over elements
        the other program read, a changed value is a read race (that read may see either), decided after the
        launch (kernel.py runs the launch again with the other program first and compares the outputs). Over elements
        it only wrote, what counts is each core's last write in the epoch (both cores may zero a tensor,
        then write the same values into it): a difference is noted as a `WriteConflict`, decided when
        the epoch ends (`Launch.settle_write_conflicts`). Equal values give a `NkiRaceWarning`."""
        st = access.t.storage
        wrote, read = self._concurrent(st.written_mask, access), self._concurrent(st.read_mask, access)
        self._note(st.written_mask, access)
        remember = (lambda: self._remember_written(access)) if self.compute else None
        if wrote is None and read is None:
            return remember
        other = (wrote or read)[0]
        overlap = wrote[1] | read[1] if wrote and read else (wrote or read)[1]
        kind = ("already wrote" if read is None else
                f"{'wrote and ' if wrote else ''}read without a synchronisation in between")
        before = _bits(access.values()[overlap])

        def after_the_write() -> None:
            self._same_values(access, overlap, before, other, kind, read is not None, isa, where)
            if remember is not None:
                remember()
        return after_the_write

    def _remember_written(self, access: "Covered") -> None:
        """Keep the raw bits this program just wrote, for the end-of-epoch write-write comparison."""
        st = access.t.storage
        bits = st.last_written_bits.get(self.id)
        if bits is None:
            bits = st.last_written_bits[self.id] = np.zeros(st.data.size, f"u{st.data.itemsize}")
        access.store(bits, _bits(np.ascontiguousarray(access.values())))

    def _same_values(self, access: "Covered", overlap: np.ndarray, before: np.ndarray, other: int, kind: str,
                     other_read: bool, isa: str, where: str) -> None:
        what = (f"{isa}: program {self.id} writes {int(overlap.sum())} elements of shared HBM tensor "
                f"{_storage_label(access.t.storage)} that program {other} {kind}")
        if not self.compute:
            warnings.warn(NkiRaceWarning(f"{what}; a dry run cannot compare the values: if they differ, the result "
                                         f"depends on which core goes first ({where})"), stacklevel=3)
        elif np.array_equal(_bits(access.values()[overlap]), before):
            warnings.warn(NkiRaceWarning(f"{what}, with the same values: the result does not depend on the order, "
                                         f"but both cores spend DMA time on those rows ({where})"), stacklevel=3)
        elif other_read:        # decided after the launch: does the read's value reach an output?
            self.launch.read_races.append(race_message(what, "that read may see the old or the new values",
                                                       self.launch.lnc, other, where))
        else:
            st = access.t.storage
            conflict = st.write_conflicts.get(self.epoch)
            if conflict is None:
                conflict = st.write_conflicts[self.epoch] = WriteConflict(np.zeros(st.data.size, bool))
            access.store(conflict.elements, access.epochs(conflict.elements) | overlap)
            conflict.isa, conflict.program, conflict.other, conflict.where = isa, self.id, other, where

    def note_shared_read(self, access: "Covered", isa: str, where: str) -> None:
        """LNC>1: note reads of shared HBM elements another program wrote since the last synchronisation
        both passed: without a core_barrier the value read depends on timing (kernel.py decides whether
        that reaches an output).
        Elements this program also wrote in that time are exempt: it reads its own write, unless the
        other core's write lands later with other values, which the write-write verdict at the end of
        the epoch reports (note_shared_write)."""
        st = access.t.storage
        writer = self._concurrent(st.written_mask, access)
        own = st.written_mask.get(self.id)
        if writer is not None and own is not None:
            unowned = writer[1] & (access.epochs(own) != self.epoch)
            writer = (writer[0], unowned) if unowned.any() else None
        if writer is not None:
            what = (f"{isa}: program {self.id} reads elements of shared HBM tensor {_storage_label(st)} that "
                    f"program {writer[0]} wrote without a synchronisation in between")
            if not self.compute:
                warnings.warn(NkiRaceWarning(f"{what}; a dry run cannot tell whether the value read reaches an output "
                                             f"({where})"), stacklevel=3)
            else:               # decided after the launch, as for a write over the other core's read
                self.launch.read_races.append(f"{what}; call nisa.core_barrier on both cores between the write and the "
                                              f"read ({where})")
        self._note(st.read_mask, access)

    def _note(self, masks: dict[int, np.ndarray], access: "Covered") -> None:
        """Mark the accessed elements as accessed by this program in its current epoch."""
        mask = masks.get(self.id)
        if mask is None:   # allocated once per program and storage (not as a setdefault argument, per access)
            mask = masks[self.id] = np.full(access.t.storage.data.size, -1, np.int32)
        access.store(mask, self.epoch)

    def _concurrent(self, masks: dict[int, np.ndarray], access: "Covered") -> tuple[int, np.ndarray] | None:
        """Another program that accessed some of these elements in this program's epoch (unordered
        with this access), and which of them those are; None if there is none."""
        for other, epochs in masks.items():
            overlap = access.epochs(epochs) == self.epoch if other != self.id else None
            if overlap is not None and overlap.any():
                return other, overlap
        return None


@dataclass
class Covered:
    """The storage elements of a shared-HBM tensor that one instruction operand covers: those of the
    strided view `t`, or, for an indirect (index-addressed) view, the flat storage indices its index
    values address when the instruction runs (`elements`, views.storage_elements)."""

    t: NkiTensor
    elements: np.ndarray | None = None

    def epochs(self, mask: np.ndarray) -> np.ndarray:
        """The entries of `mask` (one per storage element) for these elements."""
        return _mask_view(mask, self.t) if self.elements is None else mask[self.elements]

    def store(self, per_element: np.ndarray, values: Any) -> None:
        """Set these elements' entries of a per-storage-element array (values in the order of `epochs`)."""
        if self.elements is None:
            _mask_view(per_element, self.t)[...] = values
        else:
            per_element[self.elements] = values

    def values(self) -> np.ndarray:
        """The elements' current values, in the order of `epochs`."""
        return self.t.arr if self.elements is None else self.t.storage.data.reshape(-1)[self.elements]


@dataclass
class WriteConflict:
    """Elements of one shared-HBM storage that both programs wrote in one epoch, the later write with
    other values than the earlier; `isa`, `program`, `other`, `where` name the latest such write."""

    elements: np.ndarray
    isa: str = ""
    program: int = 0
    other: int = 0
    where: str = ""


def race_message(what: str, raced: str, lnc: int, other: int, where: str) -> str:
    return (f"{what}, with different values: on trn2 the two cores race and {raced}; with LNC={lnc} each program "
            f"must own disjoint rows, e.g. chosen by nl.program_id(0), or the accesses must be ordered by "
            f"nisa.core_barrier on both cores between program {other}'s access and this write ({where})")


def _storage_label(st: Storage) -> str:
    return f"'{st.name}' {st.data.shape}" if st.name else f"{st.data.shape} ({st.source})"


def _bits(values: np.ndarray) -> np.ndarray:
    """Raw bits, so NaNs compare equal to themselves."""
    return values.view(f"u{values.itemsize}") if values.itemsize in (1, 2, 4, 8) else values


def _mask_view(mask: np.ndarray, t: NkiTensor) -> np.ndarray:
    """The elements of `mask` (one per storage element) that the view `t` covers."""
    isz = t.storage.data.itemsize
    strides = tuple(s // isz * mask.itemsize for s in t.arr.strides)     # as_strided takes byte strides
    return np.lib.stride_tricks.as_strided(mask[t.offset:], t.arr.shape, strides)


class Launch:
    """One kernel launch: its programs' shared state and the trace."""

    def __init__(self, kernel_name: str, lnc: int, dry_run: bool) -> None:
        self.lnc = lnc
        self.dry_run = dry_run
        self.trace = Trace(kernel=kernel_name, lnc=lnc, dry_run=dry_run)
        self.shared: list[Storage] = []
        self.shared_linked: dict[str, list[tuple[Storage, int]]] = {}   # per name: (storage, the program that made it)
        self.next_id = 0
        self.interleaver: Any = None     # LNC>1: the programs' turn-taking (interleave.Interleaver)
        self.exchange: Any = None        # LNC>1: barrier counts and sendrecv messages (collectives)
        self.kernel: Any = None          # the launched kernel.Kernel (a nested jit kernel compares configs with it)
        self.reverse = False             # LNC>1: the last program takes the first turn (kernel.py's second order)
        self.read_races: list[str] = []  # unsynchronised read/write pairs across cores, decided after the launch

    def settle_write_conflicts(self, epoch: int | None = None) -> None:
        """Decide the write-write conflicts of `epoch` (of every epoch if None), once both programs are
        past it: if each core's last write leaves the same values the order does not matter (a warning),
        else the result depends on which core writes last (an error naming the latest such write)."""
        for st in self.shared:
            for e in [e for e in st.write_conflicts if epoch is None or e == epoch]:
                c = st.write_conflicts.pop(e)
                mine, theirs = (st.last_written_bits[p][c.elements] for p in (c.program, c.other))
                differ = int((mine != theirs).sum())
                what = (f"{c.isa}: program {c.program} writes {differ or int(c.elements.sum())} elements of shared HBM "
                        f"tensor {_storage_label(st)} that program {c.other} already wrote")
                if differ:
                    raise NkiValidationError(race_message(what, "the result depends on which writes last", self.lnc,
                                                          c.other, c.where))
                warnings.warn(NkiRaceWarning(f"{what}, with other values, but each core's last write leaves the same "
                                             f"values: the result does not depend on the order ({c.where})"))

    def new_storage(self, buffer: Buffer, data: np.ndarray, program: int | None, name: str, source: str) -> Storage:
        self.next_id += 1
        return Storage(self.next_id, buffer, data, program, name, source)

    def shared_storage(self, prog: Program, shape, dtype, name, source, fill) -> Storage:
        """The programs' k-th shared_hbm tensor of one name is one tensor: "the compiler uses the name to link
        non-IO shared_hbm tensors among PNCs ... even if the tensors appear in different control flow" (the
        nl.ndarray page, SDK 2.28.1; the 2.33 page says nothing else); unnamed ones pair in allocation order."""
        key = name or ""
        i = prog.shared_allocs.get(key, 0)
        prog.shared_allocs[key] = i + 1
        linked = self.shared_linked.setdefault(key, [])
        if i < len(linked):
            st, maker = linked[i]
            if st.data.shape != tuple(shape) or st.data.dtype != dtype:
                label = f"'{name}' " if name else ""
                raise NkiValidationError(
                    f"nl.ndarray: program {prog.id} allocated shared_hbm tensor {label}#{i} as {tuple(shape)} "
                    f"{dtype.name}, program {maker} as {st.data.shape} {st.data.dtype.name}; all programs must allocate "
                    f"the same shared tensors (one name is one tensor on every core, unnamed ones pair in allocation "
                    f"order) ({source})")
            return st
        st = self.new_storage(SHARED_HBM, np.empty(shape, dtype), None, name, source)
        st.pending_fill = fill or dtypes.fill_uninitialised   # also in dry run: outputs read as "never written"
        linked.append((st, prog.id))
        self.shared.append(st)
        return st


_current: Program | None = None
_last_trace: Trace | None = None


def current(api: str, api_name: str = "") -> Program:
    """The running program; `api + api_name` names the caller in the error (joined only on failure)."""
    if _current is None:
        raise NkiValidationError(
            f"{api}{api_name} called outside a running NKI kernel: call it inside an @nki.jit function "
            f"({kernel_location()})")
    return _current


def running_program() -> Program | None:
    """The program whose kernel body is running, or None outside a launch."""
    return _current


def activate(prog: Program | None) -> None:
    """Make `prog` the running program (LNC>1 programs take turns, see interleave.py)."""
    global _current
    _current = prog


@contextlib.contextmanager
def running(prog: Program) -> Iterator[Program]:
    """Make `prog` the running program for the duration of its kernel body."""
    global _current
    _current = prog
    try:
        yield prog
    finally:
        _current = None


def last_trace() -> Trace | None:
    """The trace of the most recent kernel launch (normal call, `run`, or a custom op)."""
    return _last_trace


def set_last_trace(trace: Trace) -> None:
    global _last_trace
    _last_trace = trace
