"""Place a trace's instructions in time on a trn2 core: the cost model's timeline.

Model (an estimate; constants and sources in `constants`):
- Lanes per physical core: the five engine queues (Tensor, Vector, Scalar, GpSimd, Sync), the two
  hardware DGE instances ("DGE/Scalar", "DGE/Sync") and one DMA queue per issuing queue ("DMA/GpSimd"
  for software DGE, "DMA/Sync" or "DMA/Scalar" for hardware DGE, "DMA/static" for dge_mode.none).
  A lane runs one instruction at a time.
- Dependencies come from the regions each instruction reads and writes (read-after-write,
  write-after-read, write-after-write within one program), never from a blanket barrier. A consumer
  on another lane starts a semaphore latency after its producer ends.
- Issue order is list scheduling, as the compiler's scheduler does: each instruction is placed as
  early as its producers and its lane allow, ties going to program order (event by event, in
  O(log n) per instruction: `_place`); on a DMA queue whose descriptors are generated on the device,
  to the transfer whose descriptors were written first (a queue runs its descriptors in the order
  they reach it); between two DMA queues ready for the same engines at once, to the queue served less
  recently ("scheduled in a round robin fashion", the DMA overview's "DMA Queues"). So dependent
  instructions keep program order, and a load
  that does not depend on an earlier store may go ahead of it (this is how the published naive
  GELU loop overlapped its tiles' DMAs and compute).
  The kernel's own scheduling constraints are dependencies too (`Trace.order_edges`): an
  `nl.no_reorder()` block keeps its instructions in program order, a `with_schedule` edge puts
  one named instruction after another (SDK:nki/guides/how-to-scheduling-apis.rst), and so does
  `depends_on` with a runtime dependency (a semaphore wait). A schedule-only one
  (`depends_on(..., kind=nisa.dependency.schedule)`, `Trace.issue_edges`) constrains issue order with
  no synchronisation: its consumer starts no earlier than its producer starts. So is the
  compiler's reuse of released SBUF addresses and PSUM banks (`memory_reuse.py`): a tile is one
  contiguous range, placed as a ring, and each write into released bytes starts after the last access
  of the allocation that held them.
- A dma_copy is triggered by an engine's instruction, which waits for the producers of the data it
  moves ("The sequencer instruction to trigger the transfer may wait on any semaphore condition
  which is signaled by other compute engines": SDK:nki/get-started/about/nki-dma-overview.rst, "DMA
  Triggers"); earlier transfers on the same DMA queue need no wait, the queue runs them first, and
  an earlier access of its destination orders only its data (`_add_transfer` says why). The
  trigger costs its descriptor generation (software DGE: ~0.6 us of GpSimd's own time; hardware DGE:
  ~0.6 us on the DGE instance the Sync or Scalar sequencer commands, which "could be hidden behind earlier
  compute instructions ... since DGE and the compute pipeline of ScalarE are independent hardware
  resources": SDK:nki/guides/architecture/trainium2_arch.rst, "Descriptor Generation Engine (DGE)";
  none: nothing). Its data then
  moves by the DMA model of `dma.py`: a fixed cost on its DMA queue (after the queue's previous
  transfer starts, and on each engine they share after its data there: a queue runs in order on each
  engine, so same-queue transfers on other engines move meanwhile, and other queues' data overlaps
  it), on the DMA engines of the partitions it spans, and a trigger ->
  first-byte latency counted from the trigger (its DGE end; for prebuilt descriptors, when its
  producers are seen done). So a transfer with no producers hides the latency behind earlier work,
  and one that waits for a producer pays semaphore, descriptor generation and latency after it.
  A generated transfer's engines get their descriptors one after another (`dma.engine_step`), so
  each starts when its own are written and it is free: the transfer's slot runs from its first
  engine's start to its last engine's end (`Slot.engine_intervals`), and its queue's next fixed
  cost follows its start.
- A Vector or Scalar instruction holds its lane for its cost (`costs.compute_seconds`), less its
  SBUF access overhead when it follows another compute instruction there back to back: engines hide
  that overhead "through instruction level parallelism" (SDK:nki/guides/architecture/
  trainium_inferentia2_arch.rst), so an instruction that starts on an idle engine pays it. So does one
  that reads what a short instruction before it wrote: it "cannot start data read until the previous
  instruction has all of its output committed to the local SRAM" (SDK:nki/deep-dives/nki_perf_guide.rst,
  Opt #5a, whose dependent back-to-back one-element ACTIVATEs issue every ~264 cycles). Behind a long
  one, a dependent instruction pays the static overhead only, the 100 cycles the architecture guide's
  cost model adds to dependent back-to-back Vector instructions (`costs.hides_next_access`).
- Vector and Scalar "can access PSUM at full bandwidth in parallel, as long as their accesses do not
  collide on the same PSUM bank" (SDK:nki/guides/architecture/trainium2_arch.rst, memory hierarchy; on
  NeuronCore-v2 they could not share PSUM at all and were serialised): a Vector or Scalar instruction
  starts after the other engine's earlier instruction on any PSUM bank it touches has ended, in program
  order (which engine the hardware lets go first when both are ready is not documented), with no semaphore.
  A tile placed by hand occupies its `address=` banks (`Trace.psum_banks`); here every other tile has banks
  of its own (the emulator's capacity check packs tiles under 2 KiB into shared banks, `emulator/psum.py`,
  but where the compiler puts them is not documented, so no collision between two tiles is charged). Which
  tile waits for which when the 8 banks run out is `memory_reuse.py`'s: a ring over the banks.
- Vector and GpSimd "can access SBUF in parallel" on NeuronCore-v3, but "VectorE's performance mode leverages
  a shared memory bus between the VectorE and GpsimdE engines ... including arbitrating between GpsimdE and
  relevant VectorE instructions" (SDK:nki/guides/architecture/trainium2_arch.rst, "Data Movement Updates"):
  a Vector instruction with a performance-mode lift (`costs.perf_mode_lift`) and a GpSimd instruction with an
  SBUF operand take turns in program order, as the two PSUM engines do on a bank; any other Vector
  instruction runs beside GpSimd. Software descriptor generation on GpSimd is not such an instruction (the
  scheduler's DGE tasks: a few descriptor bytes per row, no tensor streamed).
- A Tensor-engine instruction holds its lane for its initiation interval (longer while the engine
  is throttled: `tensor_throttle.py`); its result is ready a pipeline latency later
  (`tensor_engine.result_latency_seconds`), which consumers on other lanes wait for. Row and column
  tiling of the PE array "allow multiple nc_matmul instructions with a stationary tile size smaller
  than [128, 128] to run in parallel" (SDK:nki/api/nki/isa/__init__.py, nc_matmul, "Tiling mode"): a
  matmul given a PE tile runs on that tile's own lane, taking turns with the Tensor work on the cells
  it shares (`_pe_tile_lane`); the throttle is the engine's, over all its lanes.
- The two physical cores of an LNC=2 launch (program_id 0 and 1) share nothing but the HBM stack
  (`dma.py`) and the instructions registered as synchronisations between them
  (`vocabulary.BARRIER`, `vocabulary.EXCHANGE`); without those, each core's timeline is what it
  would be alone, and the total time is the later core's end.
- A barrier (`core_barrier`; the trace records its ordinal k in its program and its `cores`) is
  split in two, so that two cores waiting for each other make no dependency cycle: its arrival, as
  early as its dependencies and its engine allow (it reads its `data` tensor, so it follows this
  core's earlier accesses of it), and its completion, the instruction itself, which starts when
  every participant's k-th barrier has arrived (a semaphore latency after a partner's arrival, like
  any cross-lane edge) and then orders this core's later accesses of `data`. Its engine is blocked
  in between ("The barrier will block execution on this engine, other engines will not be
  blocked": https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.core_barrier.html):
  on that engine, work before the barrier in program order precedes its arrival, work after it
  follows its completion. The timeline shows the wait as BARRIER_WAIT.
- An exchange (`sendrecv`) is split into its send, a DMA transfer of src on this core's queue
  (costed like any DMA, after src's producers), and its receive, a moment with no duration on the
  receiving core after which dst holds the data: a semaphore latency after the matching send (the
  n-th message from that core to this one on the same pipe, as the emulator pairs them), and after
  this core's earlier accesses of dst. Consumers of dst start at the receive (its semaphore is
  already counted).
- A compiled loop (`nl.fori_loop`, `nl.while_loop`, NKI 0.6's `nl.dynamic_range`) is "a hardware loop
  instruction on the device. The loop body is not unrolled; instead, a single copy of the body is
  generated and the hardware iterates over it at runtime"
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dynamic-loops.html), and
  "nl.fori_loop inserts scheduling barriers at iteration boundaries", with "no cross-iteration
  prefetching by the compiler" (nki-library's dynamic flash-attention design spec,
  `src/nkilib_src/nkilib/core/attention/dynamic_fa_design_spec.md`, 092a49d, "Constraints"). So the
  emulator's unrolled iterations do not overlap here: the trace marks each iteration's start and end
  (`Trace.loop_fences`), and everything before a fence ends before anything after it starts, a semaphore
  later on another lane (`_fence_loop_iterations`). The model reads the loop's entry and exit as such
  boundaries too: work before the loop ends before its first iteration starts, work after it waits for
  the last. A Python loop, unrolled at trace time, keeps list scheduling's overlap.
- The critical path follows whatever decided each start, across cores too: a core that waited at a
  barrier or for a message leads to its partner's arrival or send.
"""
from __future__ import annotations

import bisect
import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable, NamedTuple

from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds, hides_next_access, perf_mode_lift, streamed_saving
from nkisim.costmodel.dma import data_seconds, dma_engines, engine_step, spill_transfers
from nkisim.costmodel.memory_reuse import reuse_edges
from nkisim.costmodel.tensor_engine import result_latency_seconds, utilization
from nkisim.costmodel.tensor_throttle import Throttle
from nkisim.emulator.trace import Instruction, Operand, Region, Trace
from nkisim.gc_paused import gc_paused
from nkisim.limits import PE_TILE_SIZES, PSUM_BANK_BYTES, WHOLE_PE_ARRAY
from nkisim.vocabulary import (BARRIER, BARRIER_WAIT, DGE, DGE_MODES, DMA, DMA_QUEUE_LANES, ENGINES, EXCHANGE, GPSIMD,
                               HARDWARE_DGE_LANES, RECEIVE, SCALAR, TENSOR, VECTOR, dge_lane, dma_lane, spec)

ARRIVE, DEPART = "arrive", "depart"     # the two halves of a barrier (a receive is its own kind: RECEIVE)


@dataclass(frozen=True)
class Slot:
    """One placed piece of work: an instruction, a DMA transfer, or a DMA's descriptor generation."""

    core: int
    lane: str           # "Scalar", "DMA/GpSimd", ...
    engine: str         # the engine lane, or "DMA"
    opcode: str         # profiler opcode; "DGE" for descriptor generation
    name: str | None    # the kernel's name= label
    index: int          # instruction index in its program
    start: float        # seconds from kernel start
    end: float          # a Tensor-engine instruction's result is ready here, its lane free earlier
    nbytes: int = 0
    engines: int = 0    # a transfer: the DMA engines its data moves on
    engine_starts: tuple[float, ...] = ()   # a transfer whose engines start apart: each one's start

    def engine_intervals(self) -> list[tuple[float, float]]:
        """When each of a transfer's engines moves its rows: all from start to end, or from their own
        starts for the same time (descriptors generated one engine at a time, `dma.engine_step`)."""
        if not self.engine_starts:
            return [(self.start, self.end)] * self.engines
        busy = self.end - max(self.engine_starts)
        return [(s, s + busy) for s in self.engine_starts]

    @property
    def duration(self) -> float:
        return self.end - self.start


@dataclass
class Schedule:
    lnc: int
    slots: list[Slot]
    critical_path: list[Slot] = field(default_factory=list)

    @property
    def total_time(self) -> float:
        return max((s.end for s in self.slots), default=0.0)

    def lanes(self) -> list[tuple[int, str]]:
        """(core, lane) pairs in use, engines first in their usual order, then hardware DGE blocks, then DMA queues."""
        used = {(s.core, s.lane) for s in self.slots}
        order = {lane: i for i, lane in enumerate((*ENGINES, *HARDWARE_DGE_LANES.values(), *DMA_QUEUE_LANES.values()))}
        # a PE tile's lane ("Tensor[0:32,0:128]") right after the Tensor lane
        return sorted(used, key=lambda cl: (cl[0], order.get(cl[1], order.get(cl[1].split("[")[0], 98) + 0.5), cl[1]))


@dataclass
class _Task:
    core: int
    lane: str
    engine: str
    opcode: str
    ins: Instruction
    deps: list[int]
    dma_engines: tuple[int, ...] = ()
    is_transfer: bool = False
    queued_by: int | None = None   # the DGE task after which the transfer is queued (None: at start)
    trigger_waits: tuple[int, ...] = ()   # prebuilt descriptors: the producers its trigger waits for
    reads_from: tuple[int, ...] = ()      # a compute instruction: the tasks that wrote what it reads
    turn_after: tuple[int, ...] = ()      # another engine's earlier tasks on a resource they take turns on
    kind: str = ""              # "" an instruction's work; DGE (descriptor generation); ARRIVE / DEPART of a barrier; RECEIVE
    issue_after: list[int] = field(default_factory=list)   # tasks it starts no earlier than (issue order only)
    arrive: int | None = None   # a DEPART's own ARRIVE (drawn as the wait until the DEPART starts)


class _Hazards:
    """Producer/consumer tracking by storage region, within one program."""

    def __init__(self) -> None:
        self.writers: dict[int, _Boxes] = defaultdict(_Boxes)
        self.readers: dict[int, _Boxes] = defaultdict(_Boxes)

    def producers(self, reads: Iterable[Operand]) -> list[int]:
        """The earlier tasks that wrote what `reads` covers (read-after-write), without recording."""
        return sorted({t for op in reads for t in self.writers[op.region.storage_id].overlapping(op.region)})

    def deps_and_record(self, reads: Iterable[Operand], writes: Iterable[Operand], task: int,
                        producers: list[int] | None = None) -> list[int]:
        """The earlier tasks `task` depends on for these accesses (sorted); then record them.
        `producers`: `self.producers(reads)`, when the caller has it already."""
        read_regions = [op.region for op in reads]
        write_regions = [op.region for op in writes]
        writers, readers = self.writers, self.readers
        deps = set(self.producers(reads) if producers is None else producers)
        for region in write_regions:
            sid = region.storage_id
            deps.update(writers[sid].overlapping(region))
            deps.update(readers[sid].overlapping(region))
        for region in read_regions:
            readers[region.storage_id].add(region, task)
        for region in write_regions:
            # Accesses inside this write are now ordered through it: forget them.
            sid = region.storage_id
            writers[sid].drop_inside(region)
            readers[sid].drop_inside(region)
            writers[sid].add(region, task)
        deps.discard(task)
        return sorted(deps)


class _Boxes:
    """The recorded accesses (region, task) of one storage, ordered by where their free range
    starts: no box is longer than `longest` elements, so the boxes a region can overlap start in
    (its start - longest, its end), found by bisection instead of a scan of every access (a kernel
    storing 10,000 tiles into one output). New boxes wait unsorted in `recent` until a query
    needs them in order (an input read 30,000 times and never written is never sorted)."""

    MERGE_AT = 32   # recent boxes a query scans before they are sorted in

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.accesses: list[tuple[Region, int]] = []
        self.recent: list[tuple[Region, int]] = []
        self.longest = 0

    def add(self, region: Region, task: int) -> None:
        self.recent.append((region, task))
        self.longest = max(self.longest, region.f_hi - region.f_lo)

    def _sorted_in(self) -> None:
        if len(self.recent) > self.MERGE_AT:
            for access in self.recent:
                at = bisect.bisect_right(self.starts, access[0].f_lo)
                self.starts.insert(at, access[0].f_lo)
                self.accesses.insert(at, access)
            self.recent = []

    def overlapping(self, region: Region) -> list[int]:
        if not self.accesses and not self.recent:
            return []
        self._sorted_in()
        lo = bisect.bisect_right(self.starts, region.f_lo - self.longest)
        hi = bisect.bisect_left(self.starts, region.f_hi)
        return [t for r, t in (*self.accesses[lo:hi], *self.recent) if r.overlaps(region)]

    def drop_inside(self, region: Region) -> None:
        if not self.accesses and not self.recent:
            return
        self._sorted_in()
        self.recent = [(r, t) for r, t in self.recent if not _inside(r, region)]
        lo = bisect.bisect_left(self.starts, region.f_lo)
        hi = bisect.bisect_right(self.starts, region.f_hi)   # an empty box at the end is inside too
        kept = [(r, t) for r, t in self.accesses[lo:hi] if not _inside(r, region)]
        if len(kept) < hi - lo:
            self.accesses[lo:hi] = kept
            self.starts[lo:hi] = [r.f_lo for r, _ in kept]


def _inside(inner: Region, outer: Region) -> bool:
    return (inner.storage_id == outer.storage_id and outer.p_lo <= inner.p_lo and inner.p_hi <= outer.p_hi
            and outer.f_lo <= inner.f_lo and inner.f_hi <= outer.f_hi)


def _cores_sharing_stack(trace: Trace) -> int:
    return min(K.CORES_PER_HBM_STACK, max(1, trace.lnc, len({i.program_id for i in trace.instructions})))


def _build_tasks(trace: Trace) -> list[_Task]:
    """The trace's tasks and their dependencies (durations are `_durations`', at the constants of the day)."""
    cores = sorted({i.program_id for i in trace.instructions})
    reuse = reuse_edges(trace)
    placed_banks = dict(trace.psum_banks)
    tasks: list[_Task] = []
    sync = _Synchronisations()
    for core in cores:
        hazards = _Hazards()
        bank_users: dict[tuple, dict[str, int]] = defaultdict(dict)   # PSUM bank -> engine -> its latest task
        bus_users: dict[str, int] = {}   # Vector / GpSimd -> its latest task on their shared bus
        pe_users: dict[tuple[int, int], int] = {}   # a 32 x 32 cell of the PE array -> its latest Tensor task
        first = len(tasks)
        work: dict[int, tuple[int, int]] = {}   # instruction index -> (task that starts it, task that ends it)
        spills, last_spill = spill_transfers(trace, core), {}
        firsts: dict[int, int] = {}             # instruction index -> its first task (a spill reload's, if any)
        for ins in trace.program(core):
            firsts[ins.index] = len(tasks)
            reloads, saves = spills.get(ins.index, ((), ()))
            before = _add_spills(tasks, core, reloads, [], last_spill)
            collective = spec(ins.isa).collective
            if collective == BARRIER:
                arrive, depart = _add_barrier(tasks, core, ins, hazards)
                sync.barrier(ins, arrive, depart)
                work[ins.index] = (arrive, depart)
            elif collective == EXCHANGE:
                send, receive = _add_exchange(tasks, core, ins, hazards)
                sync.exchange(ins, send, receive)
                work[ins.index] = (send, receive)
            elif ins.engine == DMA:
                sources = hazards.producers(ins.reads)
                deps = hazards.deps_and_record(ins.reads, ins.writes, _next_transfer(tasks, ins), sources)
                transfer = _add_transfer(tasks, core, ins, deps, sources)
                work[ins.index] = (transfer, transfer)
            else:
                sources = hazards.producers(ins.reads)
                deps = hazards.deps_and_record(ins.reads, ins.writes, len(tasks), sources)
                lane, pe_waits = _pe_tile_lane(ins, len(tasks), deps, pe_users, tasks)
                turns = {*_psum_bank_waits(ins, len(tasks), deps, bank_users, placed_banks),
                         *_shared_bus_waits(ins, len(tasks), deps, bus_users), *pe_waits}
                tasks.append(_Task(core, lane, ins.engine, ins.opcode, ins, deps, reads_from=tuple(sources),
                                   turn_after=tuple(sorted(turns))))
                work[ins.index] = (len(tasks) - 1, len(tasks) - 1)
            tasks[work[ins.index][0]].deps.extend(before)
            _add_spills(tasks, core, saves, [work[ins.index][1]], last_spill)
        for program, later, earlier in (*trace.order_edges, *reuse):
            if program == core:
                tasks[work[later][0]].deps.append(work[earlier][1])
        for program, later, earlier in trace.issue_edges:
            if program == core:
                tasks[work[later][0]].issue_after.append(work[earlier][0])
        if any(t.kind == ARRIVE for t in tasks[first:]):
            _block_engines_at_barriers(tasks, first)
        fences = sorted({firsts.get(index, len(tasks)) for program, index in trace.loop_fences if program == core})
        _fence_loop_iterations(tasks, [first, *fences, len(tasks)])
    sync.link(tasks)
    return tasks


def _fence_loop_iterations(tasks: list[_Task], bounds: list[int]) -> None:
    """A compiled loop's iterations do not overlap: every task in tasks[bounds[j]:bounds[j + 1]] ends
    before any of the next non-empty segment starts. The segment's last tasks (no later task of it
    waits for their end) become producers of the next one's first tasks (none of it precedes them), so
    a semaphore separates two lanes, as a barrier's does."""
    segments = [range(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    for before, after in zip(segments, segments[1:]):
        waited_for = {d for tid in before for d in (*tasks[tid].deps, *tasks[tid].turn_after)}
        last = [tid for tid in before if tid not in waited_for]
        for tid in after:
            t = tasks[tid]
            if not any(d in after for d in (*t.deps, *t.turn_after)):
                t.deps = sorted({*t.deps, *last})


PSUM_SHARING_ENGINES = (VECTOR, SCALAR)


def _psum_bank_waits(ins: Instruction, task: int, deps: list[int], users: dict[tuple, dict[str, int]],
                     placed: dict[int, int]) -> tuple[int, ...]:
    """A Vector or Scalar instruction's waits for the other of the two engines on the PSUM banks it touches
    (the latest earlier task there, unless a data dependency orders them already); then record it."""
    if ins.engine not in PSUM_SHARING_ENGINES:
        return ()
    other = SCALAR if ins.engine == VECTOR else VECTOR
    waits = set()
    for bank in {b for op in (*ins.reads, *ins.writes) if op.buffer == "psum" for b in _psum_banks(op, placed)}:
        earlier = users[bank].get(other)
        if earlier is not None:
            waits.add(earlier)
        users[bank][ins.engine] = task
    return tuple(sorted(waits.difference(deps)))


def _shared_bus_waits(ins: Instruction, task: int, deps: list[int], users: dict[str, int]) -> tuple[int, ...]:
    """A Vector instruction in performance mode and a GpSimd instruction streaming SBUF share a memory bus the
    hardware arbitrates: the one waits for the other engine's latest earlier task there (unless a data
    dependency orders them already); then record it."""
    if ins.engine == VECTOR and perf_mode_lift(ins) > 1:
        other = GPSIMD
    elif ins.engine == GPSIMD and any(o.buffer == "sbuf" for o in (*ins.reads, *ins.writes)):
        other = VECTOR
    else:
        return ()
    earlier = users.get(other)
    users[ins.engine] = task
    return (earlier,) if earlier is not None and earlier not in deps else ()


PE_CELL = min(PE_TILE_SIZES)    # the finest PE tile (NeuronCore-v3's 4 x 32 row or column tiling)


def _pe_tile_lane(ins: Instruction, task: int, deps: list[int], users: dict[tuple[int, int], int],
                  tasks: list[_Task]) -> tuple[str, tuple[int, ...]]:
    """A Tensor-engine instruction's lane, and the earlier Tensor tasks it waits for on the PE array.

    Row and column tiling "allow multiple nc_matmul instructions with a stationary tile size smaller than
    [128, 128] to run in parallel" (the nc_matmul page, "Tiling mode"): a matmul given a PE tile
    (`tile_position` / `tile_size`, the trace's `pe_tile`) runs on a lane of that tile's own, after the
    latest earlier Tensor task on any 32 x 32 cell it shares with it (turns, no semaphore: one engine);
    every other Tensor instruction holds the whole array, on the Tensor lane. Other engines: their own lane."""
    if ins.engine != TENSOR:
        return ins.engine, ()
    row0, col0, rows, cols = ins.attrs.get("pe_tile", WHOLE_PE_ARRAY)
    whole = (row0, col0, rows, cols) == WHOLE_PE_ARRAY
    lane = TENSOR if whole else f"{TENSOR}[{row0}:{row0 + rows},{col0}:{col0 + cols}]"
    waits = set()
    for cell in ((r, c) for r in range(row0 // PE_CELL, (row0 + rows) // PE_CELL)
                 for c in range(col0 // PE_CELL, (col0 + cols) // PE_CELL)):
        earlier = users.get(cell)
        if earlier is not None and tasks[earlier].lane != lane:
            waits.add(earlier)
        users[cell] = task
    return lane, tuple(sorted(waits.difference(deps)))


def _psum_banks(op: Operand, placed: dict[int, int]) -> list[tuple]:
    """The banks a PSUM operand touches: its tile's from the first one, bank-sized steps of each partition's
    bytes (a tile starts at a bank, SDK:nki/migration/index.rst "Improved allocation API"); a hand-placed tile's
    are numbered, another tile's are its own."""
    region = op.region   # in the tile's elements: a view of another dtype covers the same bytes
    first = region.f_lo * region.itemsize // PSUM_BANK_BYTES
    last = (region.f_hi * region.itemsize - 1) // PSUM_BANK_BYTES
    base = placed.get(region.storage_id)
    return [("bank", base + b) if base is not None else ("tile", region.storage_id, b) for b in range(first, last + 1)]


def _add_spills(tasks: list[_Task], core: int, transfers: Iterable[Instruction], deps: list[int],
                last: dict[int, int]) -> list[int]:
    """Spill transfers (`dma.spill_transfers`) after `deps`, each after its allocation's previous one."""
    ids = []
    for ins in transfers:
        previous = last.get(ins.attrs["allocation_id"])
        after = [*deps, *([] if previous is None else [previous])]
        ids.append(_add_transfer(tasks, core, ins, after, after))
        last[ins.attrs["allocation_id"]] = ids[-1]
    return ids


def _block_engines_at_barriers(tasks: list[_Task], first: int) -> None:
    """An engine runs its instruction stream in order and "the barrier will block execution on this
    engine" (core_barrier's API page): on a barrier's engine, everything before it in program order
    precedes its arrival, everything after it follows its completion. (Elsewhere, list scheduling
    may reorder independent work on a lane; not across a barrier.) `tasks[first:]` are one core's."""
    since: dict[str, list[int]] = defaultdict(list)   # engine -> its tasks since its last barrier
    barrier: dict[str, int] = {}                        # engine -> completion of its last barrier
    for tid in range(first, len(tasks)):
        t = tasks[tid]
        # a hardware DGE is commanded by its engine's sequencer; a PE tile's lane is the Tensor engine's
        engine = t.engine if t.kind == DGE or t.engine == TENSOR else t.lane
        before = [barrier[engine]] if engine in barrier and t.kind != DEPART else []
        if t.kind == ARRIVE:
            before += since.pop(engine, [])
        elif t.kind == DEPART:
            barrier[engine] = tid
        else:
            since[engine].append(tid)
        t.deps = sorted({*t.deps, *before})


def _next_transfer(tasks: list[_Task], ins: Instruction) -> int:
    """The id the transfer of DMA `ins` will get: after its descriptor generation, if it has one."""
    return len(tasks) + (1 if _dge_seconds(ins) > 0 else 0)


def _dge_seconds(ins: Instruction) -> float:
    if ins.dma is None:
        raise ValueError(f"DMA instruction {ins.index} ({ins.source}) has no DmaInfo")
    return K.dge_seconds(ins.dma.dge_mode)


def _add_transfer(tasks: list[_Task], core: int, ins: Instruction, deps: list[int], sources: list[int]) -> int:
    """A DMA's descriptor generation (if its dge mode has one) and its transfer; returns the transfer.

    The trigger (the descriptor generation, or the trigger of prebuilt descriptors) waits for
    `sources`, the producers of the data the transfer moves ("DMA Triggers" in the DMA overview),
    except earlier transfers on its own queue, which the queue runs first. The other dependencies
    (an earlier access of its destination, the reuse of an address) order its data only. By default
    neuronx-cc, not the kernel, decides where each tensor goes (SDK:nki/deep-dives/nki-compile-config.rst,
    "Overview"), so a buffer's next use need not share the address its previous readers hold; nkisim
    keeps one address per buffer, so it keeps that order for the data but not for the trigger (nki-autotune's
    single-buffer matmuls ran as if there were no such wait: nkisim/README.md)."""
    lane = dma_lane(ins.dma.queue_engine)
    waits = tuple(d for d in sources if not (tasks[d].is_transfer and tasks[d].lane == lane))
    queued_by = None
    if _dge_seconds(ins) > 0:
        queue = ins.dma.queue_engine
        if queue not in ENGINES:
            raise ValueError(f"DMA {ins.index}: dge_mode {ins.dma.dge_mode!r} needs an issuing "
                             f"engine, got queue_engine {queue!r}")
        tasks.append(_Task(core, dge_lane(ins.dma.dge_mode, queue), queue, DGE, ins, list(waits), kind=DGE))
        queued_by = len(tasks) - 1
        deps = [*deps, queued_by]
        waits = ()   # the descriptor generation carries them
    tasks.append(_Task(core, lane, DMA, ins.opcode, ins, deps, dma_engines(ins), is_transfer=True,
                       queued_by=queued_by, trigger_waits=waits))
    return len(tasks) - 1


def _add_barrier(tasks: list[_Task], core: int, ins: Instruction, hazards: _Hazards) -> tuple[int, int]:
    """A barrier's arrival (after this core's accesses of its data) and completion (before later ones)."""
    arrive = len(tasks)
    tasks.append(_Task(core, ins.engine, ins.engine, BARRIER_WAIT, ins, hazards.deps_and_record(ins.reads, (), arrive),
                       kind=ARRIVE))
    depart = len(tasks)
    deps = sorted({arrive, *hazards.deps_and_record((), ins.reads, depart)})
    tasks.append(_Task(core, ins.engine, ins.engine, ins.opcode, ins, deps, kind=DEPART, arrive=arrive))
    return arrive, depart


def _add_exchange(tasks: list[_Task], core: int, ins: Instruction, hazards: _Hazards) -> tuple[int, int]:
    """An exchange's send (a transfer reading src) and its receive (the moment dst is written)."""
    sources = hazards.deps_and_record(ins.reads, (), _next_transfer(tasks, ins))
    send = _add_transfer(tasks, core, ins, sources, sources)
    receive = len(tasks)
    tasks.append(_Task(core, tasks[send].lane, DMA, RECEIVE, ins, hazards.deps_and_record((), ins.writes, receive),
                       kind=RECEIVE))
    return send, receive


class _Synchronisations:
    """Barriers and messages of every core, paired up across cores once all cores are built."""

    def __init__(self) -> None:
        self.barriers: dict[tuple[int, int], tuple[Instruction, int, int]] = {}   # (core, k) -> (ins, arrive, depart)
        self.sends: dict[tuple[int, int, object], list[int]] = defaultdict(list)  # (from, to, pipe) -> sends
        self.receives: dict[tuple[int, int, object], list[tuple[Instruction, int]]] = defaultdict(list)

    def barrier(self, ins: Instruction, arrive: int, depart: int) -> None:
        key = (ins.program_id, ins.attrs["barrier"])
        if key in self.barriers:
            raise ValueError(f"program {key[0]} has two core_barriers numbered {key[1]} "
                             f"({self.barriers[key][0].source}, {ins.source}); the trace must number each "
                             f"program's barriers 0, 1, ...")
        self.barriers[key] = (ins, arrive, depart)

    def exchange(self, ins: Instruction, send: int, receive: int) -> None:
        a, me = ins.attrs, ins.program_id
        self.sends[(me, a["send_to_rank"], a["pipe_id"])].append(send)
        self.receives[(a["recv_from_rank"], me, a["pipe_id"])].append((ins, receive))

    def link(self, tasks: list[_Task]) -> None:
        """A barrier completes after every participant's arrival; a receive follows its message's send."""
        for (core, k), (ins, _, depart) in self.barriers.items():
            for partner in ins.attrs["cores"]:
                if partner == core:
                    continue
                if (partner, k) not in self.barriers:
                    raise ValueError(f"program {core}'s core_barrier #{k} ({ins.source}) waits for program {partner}, "
                                     f"whose trace has no core_barrier #{k}")
                tasks[depart].deps.append(self.barriers[(partner, k)][1])
        for key, receives in self.receives.items():
            sends = self.sends.get(key, [])
            for n, (ins, receive) in enumerate(receives):
                if n >= len(sends):
                    raise ValueError(f"program {key[1]}'s sendrecv ({ins.source}) receives message #{n} from program "
                                     f"{key[0]} on pipe_id={key[2]!r}, which sends only {len(sends)} there")
                tasks[receive].deps.append(sends[n])


def schedule(trace: Trace) -> Schedule:
    """Model the execution of `trace` on trn2: every instruction placed on its lane in time."""
    return TaskGraph(trace).schedule()


class TaskGraph:
    """A trace's tasks and dependencies, built once and scheduled under the constants in force at
    each call (`estimate` schedules one graph at the nominal constants and at both ends of their
    ranges). The graph depends on the constants only through which dge modes cost time (a DMA whose
    mode costs nothing has no descriptor-generation task): it is rebuilt when that changes."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self._build()

    def _build(self) -> None:
        self._dge_modes = _modes_with_dge()
        with gc_paused():
            self.tasks = _build_tasks(self.trace)
            self._network = _Network(self.tasks)

    def _current(self) -> None:
        if _modes_with_dge() != self._dge_modes:
            self._build()

    def schedule(self) -> Schedule:
        self._current()
        with gc_paused():
            durations = _durations(self.trace, self.tasks)
            return _schedule_tasks(self.trace, self.tasks, durations, self._network,
                                   tensor_terms(self.tasks, durations), stream_savings(self.tasks))

    def total_time(self) -> float:
        """`schedule().total_time` without building the slots."""
        self._current()
        with gc_paused():
            durations = _durations(self.trace, self.tasks)
            return max(_placed(self.trace, self.tasks, durations, self._network,
                               tensor_terms(self.tasks, durations), stream_savings(self.tasks)).end, default=0.0)


def _modes_with_dge() -> frozenset[str]:
    return frozenset(mode for mode in DGE_MODES if K.dge_seconds(mode) > 0)


def _durations(trace: Trace, tasks: list[_Task]) -> list[float]:
    """Each task's time on its lane at the current constants."""
    sharing = _cores_sharing_stack(trace)
    out = []
    for t in tasks:
        if t.kind in (ARRIVE, RECEIVE):     # a wait until the partner arrives; a moment
            out.append(0.0)
        elif t.kind == DGE:
            out.append(_dge_seconds(t.ins))
        elif t.is_transfer:
            out.append(data_seconds(t.ins, sharing))
        else:
            out.append(compute_seconds(t.ins))
    return out


class TensorTerms(NamedTuple):
    """Per task: how long after its lane is free its result is ready (a Tensor-engine instruction's
    pipeline latency beyond its interval), and its share of the Tensor engine's peak (0: never throttled)."""
    latency: list[float]
    utilization: list[float]


def tensor_terms(tasks: list[_Task], durations: list[float]) -> TensorTerms:
    """The Tensor-engine instructions' result latency and utilization (`tensor_engine`); 0 elsewhere."""
    tail = result_latency_seconds()
    tensor = [t.engine == TENSOR and not t.kind for t in tasks]
    return TensorTerms([tail if on else 0.0 for on in tensor],
                       [utilization(t.ins, d) if on else 0.0 for t, d, on in zip(tasks, durations, tensor)])


def stream_savings(tasks: list[_Task]) -> list[float]:
    """Per task: how much shorter it holds its lane when it follows another compute instruction there back
    to back (`costs.streamed_saving`: a Vector or Scalar instruction's access overhead; 0 elsewhere)."""
    return [streamed_saving(t.ins) if not t.kind and not t.is_transfer else 0.0 for t in tasks]


def _schedule_tasks(trace: Trace, tasks: list[_Task], durations: list[float], network: "_Network | None" = None,
                    tensor: TensorTerms | None = None, stream: list[float] | None = None) -> Schedule:
    """Place `trace`'s tasks (from `_build_tasks`) in time, each taking its duration on its lane (a
    Tensor-engine one longer while throttled, a streamed Vector or Scalar one shorter) and its `tensor`
    latency more until its result is ready (default: no latency, no throttling, no savings)."""
    placed = _placed(trace, tasks, durations, network or _Network(tasks), tensor, stream)
    slots = _slots(tasks, placed)
    return Schedule(lnc=trace.lnc, slots=slots, critical_path=_critical_path(placed, slots))


def _placed(trace: Trace, tasks: list[_Task], durations: list[float], network: "_Network",
            tensor: TensorTerms | None = None, stream: list[float] | None = None) -> "_Placed":
    none = [0.0] * len(tasks)
    placed = _place(tasks, network, durations, tensor or TensorTerms(none, none), stream or none)
    if placed.count != len(tasks):
        hint = (" (the kernel's scheduling edges, with_schedule, nl.no_reorder or depends_on, contradict each other or "
                "its data dependencies)" if trace.order_edges or trace.issue_edges else "")
        raise RuntimeError(f"dependency cycle in trace {trace.kernel!r}: placed {placed.count} of {len(tasks)}{hint}")
    return placed


class _Network:
    """What placement needs of the tasks, as flat lists of small ints: lanes, DMA engines and ready
    groups by number.

    A ready group holds the ready tasks that wait for the same resources: one lane, and for a
    transfer also the same DMA engines (a receive waits for none). A task's earliest start is
    max(its own part, the group's part). Its own part (its producers' ends plus the semaphore; for a
    transfer, plus the queue's fixed cost, and its trigger time plus the latency) is fixed once it
    is ready. The group's part (when the lane is free, for a transfer plus the fixed cost, and when
    its engines are free) only grows. So the tasks whose own part it has reached all start at the
    group's part, the lowest id first (program order), or for transfers with generated descriptors
    in the order those were written (a queue runs descriptors as they reach it); the others wait,
    earliest own part first."""

    def __init__(self, tasks: list[_Task]) -> None:
        lanes: dict[tuple[int, str], int] = {}
        engines: dict[tuple[int, int], int] = {}
        groups: dict[tuple, int] = {}
        self.lane = [lanes.setdefault((t.core, t.lane), len(lanes)) for t in tasks]
        self.receive = [t.kind == RECEIVE for t in tasks]
        engine_sets: dict[tuple[int, tuple[int, ...]], tuple[int, ...]] = {}
        self.engines = []
        for t in tasks:
            ids = engine_sets.get((t.core, t.dma_engines))
            if ids is None:
                ids = engine_sets[(t.core, t.dma_engines)] = tuple(engines.setdefault((t.core, e), len(engines))
                                                                   for e in t.dma_engines)
            self.engines.append(ids)
        self.group = []
        for tid, t in enumerate(tasks):
            # a transfer with descriptor generation staggers its engines: its own group
            key = (None if self.receive[tid] else self.lane[tid], self.engines[tid], t.is_transfer,
                   t.queued_by is not None)
            self.group.append(groups.setdefault(key, len(groups)))
        self.lanes, self.dma_engines = len(lanes), len(engines)
        self.group_lane = [lane for lane, _, _, _ in groups]            # None: a receive's group
        self.group_engines = [group_engines for _, group_engines, _, _ in groups]
        self.group_transfer = [transfer for _, _, transfer, _ in groups]
        # the groups whose part moves when a task of group g is placed (g itself included)
        sharing: dict[tuple, set[int]] = defaultdict(set)
        for g, (lane, group_engines, _, _) in enumerate(groups):
            for resource in ((("lane", lane),) if lane is not None else ()) + tuple(("dma", e) for e in group_engines):
                sharing[resource].add(g)
        self.affected = []
        for g, (lane, group_engines, _, _) in enumerate(groups):
            moved = {g}
            if lane is not None:
                moved |= sharing[("lane", lane)]
            for e in group_engines:
                moved |= sharing[("dma", e)]
            self.affected.append(sorted(moved))
        # producers (not the queued-by DGE, whose end counts as queueing) and whether they share the lane
        # ... and the tasks it takes turns with (arbitration, no semaphore)
        self.producers = [[(d, self.lane[d] == self.lane[tid] or self.receive[d]) for d in t.deps if d != t.queued_by]
                          + [(d, True) for d in t.turn_after] for tid, t in enumerate(tasks)]
        self.issue_after = [tuple(t.issue_after) for t in tasks]
        self.users: list[list[int]] = [[] for _ in tasks]
        for tid, t in enumerate(tasks):
            for d in (*t.deps, *t.issue_after, *t.turn_after):
                self.users[d].append(tid)


@dataclass
class _Placed:
    start: list[float]
    end: list[float]           # when the result is ready (the lane is free a Tensor latency earlier)
    binder: list[int | None]   # the task whose end decided each start (critical path)
    count: int                 # tasks placed (fewer than all: a dependency cycle)
    engine_starts: list[tuple[float, ...]]   # a staggered transfer's start on each engine (else empty)


def _place(tasks: list[_Task], net: _Network, durations: list[float], tensor: TensorTerms,
           stream: list[float]) -> _Placed:
    """List scheduling, event-driven: at each step the ready task with the smallest (earliest
    possible start, turn, task id) is placed, as a scan of every ready task would, in O(log n) per step.
    A transfer's turn is when its DMA queue last started one: of two queues' transfers ready for the same
    engines at the same moment, the queue served less recently goes first ("DMA transfers from different
    DMA queues are scheduled in a round robin fashion (for NeuronCore-v2 and v3)",
    SDK:nki/get-started/about/nki-dma-overview.rst, "DMA Queues"); other tasks keep program order.
    A heap holds each ready group's next task (stale entries are dropped when popped); placing a
    task moves only its lane's and its DMA engines' free times, so only the groups waiting for
    those are looked at again.

    A task holds its lane for its duration (a Tensor-engine one longer while its lane is throttled,
    `tensor_throttle`); its result is ready its `tensor.latency` later (the Tensor pipeline):
    consumers on other lanes wait for the result, the next task on the same lane only for the lane
    (the pipeline accepts it; accumulating matmuls follow each other so). A Vector or Scalar instruction
    whose start its lane decided (it follows the previous compute instruction there back to back) holds
    the lane its `stream` saving shorter (the access overhead, hidden behind that instruction), unless
    it reads the output of a short one (`costs.hides_next_access`: its reads wait for the output to be
    committed, with nothing to set up behind)."""
    semaphore, fixed, latency = K.SEMAPHORE_LATENCY_S, K.DMA_TRANSFER_FIXED_S, K.DMA_QUEUE_LATENCY_S
    # a streamed Vector or Scalar instruction long enough to hide the next one's access set-up, even a dependent one's
    hides = [bool(s) and hides_next_access(t.ins) for s, t in zip(stream, tasks)]
    n = len(tasks)
    start, end, binder = [0.0] * n, [0.0] * n, [None] * n
    lane_done = [0.0] * n
    throttles: dict[tuple[int, str], Throttle] = {}    # per Tensor engine (core, engine)
    lane_free: list[tuple[float, int | None]] = [(0.0, None)] * net.lanes
    dma_free: list[tuple[float, int | None]] = [(0.0, None)] * net.dma_engines
    queue_free: dict[tuple[int, int], tuple[float, int | None]] = {}   # (DMA queue, engine): its last data there
    groups = len(net.group_lane)
    part = [0.0] * groups                                    # each group's part of the start
    waiting: list[list[tuple[float, int]]] = [[] for _ in range(groups)]   # heaps of (own part, task)
    reached: list[list[tuple[float, int]]] = [[] for _ in range(groups)]   # heaps of (queue order, task)
    # A generated transfer's place in its queue: when its descriptors were written ("DMA transfers within a
    # queue on the same DMA engine are executed in order", SDK:nki/get-started/about/nki-dma-overview.rst;
    # that the order is the order descriptors reach the queue is this model's reading).
    order = [0.0] * n
    heap: list[tuple[float, int, int]] = []                                # (start, task, group)
    queued_by = [t.queued_by for t in tasks]
    trigger_waits = [t.trigger_waits for t in tasks]
    transfer = [t.is_transfer for t in tasks]
    # Engine j of a transfer with descriptor generation gets its descriptors `step` x (n - 1 - j)
    # before the generation ends (`dma.engine_step`), so its engines may start apart.
    step = [engine_step(durations[q], len(t.dma_engines)) if q is not None else 0.0
            for t, q in zip(tasks, queued_by)]
    spread = [s * max(0, len(t.dma_engines) - 1) for s, t in zip(step, tasks)]
    staggered = [False] * groups
    for tid, s in enumerate(step):
        staggered[net.group[tid]] |= s > 0
    engine_starts: list[tuple[float, ...]] = [()] * n

    def after_producers(tid: int) -> tuple[float, int | None]:
        best, by = 0.0, None
        for d, same_lane in net.producers[tid]:
            # A receive already counts the semaphore that tells its core the data landed.
            ready = lane_done[d] if same_lane else end[d] + semaphore
            if ready > best:
                best, by = ready, d
        for d in net.issue_after[tid]:     # issue order: no earlier than it starts, no semaphore
            if start[d] > best:
                best, by = start[d], d
        return best, by

    def queued_at(tid: int) -> tuple[float, int | None]:
        """When a transfer's data can first move, and what decided it: the latency after its trigger,
        which is its descriptor generation's end, or (prebuilt descriptors) when the last producer
        it waits for is seen done."""
        q = queued_by[tid]
        if q is not None:
            return end[q] + latency, q
        trigger, by = 0.0, None
        for d in trigger_waits[tid]:
            seen = end[d] if net.receive[d] else end[d] + semaphore   # a receive counts its semaphore
            if seen > trigger:
                trigger, by = seen, d
        return trigger + latency, by

    served = [float("-inf")] * net.lanes   # when each DMA queue last started a transfer (the round robin)

    def turn(tid: int) -> float:
        """A tie-break before the task id: a transfer's queue's last start, -inf for other tasks."""
        return served[net.lane[tid]] if transfer[tid] else float("-inf")

    def engine_free(lane: int, e: int) -> tuple[float, int | None]:
        """When DMA engine e can take the next transfer of queue `lane`, and what decided it: after the engine's
        last transfer of any queue, and after its last one of this queue plus the queue's fixed cost."""
        free_at = dma_free[e]
        mine = queue_free.get((lane, e))
        if mine is not None and mine[0] + fixed > free_at[0]:
            return mine[0] + fixed, mine[1]
        return free_at

    def refresh(g: int) -> None:
        """The group's part from its resources now; the tasks whose own part it reached move over."""
        lane = net.group_lane[g]
        free = 0.0
        if lane is not None:
            free = lane_free[lane][0]
            if net.group_transfer[g]:   # max(producers, lane) + fixed == max(producers + fixed, lane + fixed)
                free += fixed
                # all engines free; a staggered transfer's first engine may start once one is
                engines_free = (min if staggered[g] else max)(engine_free(lane, e)[0] for e in net.group_engines[g])
                if engines_free > free:
                    free = engines_free
        part[g] = free
        w, r = waiting[g], reached[g]
        while w and w[0][0] <= free:
            tid = heapq.heappop(w)[1]
            heapq.heappush(r, (order[tid], tid))
        if r:
            heapq.heappush(heap, (free, turn(r[0][1]), r[0][1], g))
        elif w:
            heapq.heappush(heap, (w[0][0], turn(w[0][1]), w[0][1], g))

    def ready(tid: int) -> None:
        g = net.group[tid]
        own = after_producers(tid)[0]
        if transfer[tid]:
            queued = queued_at(tid)[0]
            own = max(own + fixed, queued - spread[tid])
            if queued_by[tid] is not None:
                order[tid] = queued
        if own <= part[g]:
            heapq.heappush(reached[g], (order[tid], tid))
            if reached[g][0][1] == tid:
                heapq.heappush(heap, (part[g], turn(tid), tid, g))
        else:
            heapq.heappush(waiting[g], (own, tid))
            if not reached[g] and waiting[g][0][1] == tid:
                heapq.heappush(heap, (own, turn(tid), tid, g))

    def earliest(tid: int) -> tuple[float, int | None]:
        """The task's start and what decided it (ties go to the first candidate)."""
        best, by = after_producers(tid)
        if not net.receive[tid]:   # a receive is a moment on its core, no work on a lane
            free_at, who = lane_free[net.lane[tid]]
            if free_at > best:
                best, by = free_at, who
        if not transfer[tid]:
            return best, by
        # DMA: the queue's fixed cost, then data once queued + latency and its engines are free.
        best += fixed
        at, who = queued_at(tid)
        if not step[tid]:
            if at > best:
                best, by = at, who
            for e in net.engines[tid]:
                at, who = engine_free(net.lane[tid], e)
                if at > best:
                    best, by = at, who
            return best, by
        # Staggered: engine j starts once the queue's fixed cost is paid, its descriptors are written
        # and it is free, so engines that got theirs first run ahead. The transfer starts with its
        # first engine; what decided its last engine's start decided its end (the critical path).
        starts, last_start, last_by = [], float("-inf"), None
        last = len(net.engines[tid]) - 1
        for j, e in enumerate(net.engines[tid]):
            s, s_by = best, by
            if at - (last - j) * step[tid] > s:
                s, s_by = at - (last - j) * step[tid], who
            free_at = engine_free(net.lane[tid], e)
            if free_at[0] > s:
                s, s_by = free_at
            starts.append(s)
            if s >= last_start:
                last_start, last_by = s, s_by
        first = min(starts)
        engine_starts[tid] = tuple(starts) if last_start > first else ()
        return first, last_by

    remaining = [len(t.deps) + len(t.issue_after) + len(t.turn_after) for t in tasks]
    for tid in range(n):
        if remaining[tid] == 0:
            ready(tid)
    count = 0
    while heap:
        at, _, tid, g = heapq.heappop(heap)
        r = reached[g]
        if r:
            if r[0][1] != tid or part[g] != at:
                continue   # stale: the group's part or its next task changed since
            heapq.heappop(r)
        elif waiting[g] and waiting[g][0] == (at, tid):
            heapq.heappop(waiting[g])
        else:
            continue
        previous = None if net.receive[tid] else lane_free[net.lane[tid]][1]
        start[tid], binder[tid] = earliest(tid)
        held = durations[tid]
        if (stream[tid] and previous is not None and binder[tid] == previous and stream[previous]
                and (previous not in tasks[tid].reads_from or hides[previous])):
            held -= stream[tid]
        if tensor.utilization[tid] > 0:      # one throttle per Tensor engine, its PE tiles' lanes included
            engine = (tasks[tid].core, tasks[tid].engine)
            if engine not in throttles:
                throttles[engine] = Throttle()
            held = throttles[engine].interval(start[tid], held, tensor.utilization[tid])
        lane_done[tid] = start[tid] + held
        end[tid] = lane_done[tid] + tensor.latency[tid]
        if engine_starts[tid]:
            end[tid] = max(engine_starts[tid]) + held
        count += 1
        # A lane is in order: the next task on it starts no earlier than this one leaves it. A DMA queue
        # runs its transfers in order on each DMA engine ("DMA transfers within a queue on the same DMA
        # engine are executed in order", SDK:nki/get-started/about/nki-dma-overview.rst, "DMA Queues":
        # a queue ID exists on every engine): its next transfer pays its fixed cost after this one starts,
        # and on each engine they share, after this one's data there (`engine_free`).
        if transfer[tid]:
            lane_free[net.lane[tid]] = (start[tid], tid)
            served[net.lane[tid]] = start[tid]
        elif not net.receive[tid]:
            lane_free[net.lane[tid]] = (lane_done[tid], tid)
        for j, e in enumerate(net.engines[tid]):
            dma_free[e] = ((engine_starts[tid][j] if engine_starts[tid] else start[tid]) + held, tid)
            queue_free[(net.lane[tid], e)] = dma_free[e]
        for affected in net.affected[g]:
            refresh(affected)
        for u in net.users[tid]:
            remaining[u] -= 1
            if remaining[u] == 0:
                ready(u)
    return _Placed(start, end, binder, count, engine_starts)


def _slots(tasks: list[_Task], placed: _Placed) -> list[Slot]:
    """One slot per task; a barrier's arrival is drawn as the wait until its barrier starts."""
    start, end = placed.start, placed.end
    wait_ends = {t.arrive: start[tid] for tid, t in enumerate(tasks) if t.kind == DEPART}
    return [Slot(t.core, t.lane, t.engine, t.opcode, t.ins.name, t.ins.index, start[tid], wait_ends.get(tid, end[tid]),
                 t.ins.dma.nbytes if t.is_transfer else 0, len(t.dma_engines) if t.is_transfer else 0,
                 placed.engine_starts[tid])
            for tid, t in enumerate(tasks)]


def _critical_path(placed: _Placed, slots: list[Slot]) -> list[Slot]:
    """Walk back from the last task to finish through whatever decided each start."""
    if not slots:
        return []
    tid: int | None = max(range(len(slots)), key=placed.end.__getitem__)
    path = []
    while tid is not None:
        path.append(slots[tid])
        tid = placed.binder[tid]
    return path[::-1]
