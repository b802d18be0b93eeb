"""Place a trace's instructions in time on a trn2 core: the cost model's timeline.

Model (an estimate; constants and sources in `constants`):
- Lanes per physical core: the five engine queues (Tensor, Vector, Scalar, GpSimd, Sync) and one
  DMA queue per issuing queue ("DMA/GpSimd" for software DGE, "DMA/Sync" or "DMA/Scalar" for
  hardware DGE, "DMA/static" for dge_mode.none). A lane runs one instruction at a time.
- Dependencies come from the regions each instruction reads and writes (read-after-write,
  write-after-read, write-after-write within one program), never from a blanket barrier. A consumer
  on another lane starts a semaphore latency after its producer ends.
- Issue order is list scheduling, as the compiler's scheduler does: each instruction is placed as
  early as its producers and its lane allow, ties going to program order. So dependent
  instructions keep program order, and a load that does not depend on an earlier store may go
  ahead of it (this is how the published naive GELU loop overlapped its tiles' DMAs and compute).
  The kernel's own scheduling constraints are dependencies too (`Trace.order_edges`): an
  `nl.no_reorder()` block keeps its instructions in program order, a `with_schedule` edge puts
  one named instruction after another (SDK:nki/guides/how-to-scheduling-apis.rst).
- A dma_copy first costs its descriptor generation on the issuing engine (software DGE: GpSimd,
  ~0.75 us; hardware DGE: Sync or Scalar, ~0.6 us; none: nothing), in that engine's queue. Its data
  then moves by the DMA model of `dma.py`: a fixed cost on its DMA queue (serial within the queue,
  overlapping other queues' data), its rows spread over up to 16 DMA engines, and a trigger ->
  first-byte latency counted from when it was queued (its DGE end, or kernel start for prebuilt
  descriptors), so only the semaphore wait of a dependency lands on the critical path.
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
- The critical path follows whatever decided each start, across cores too: a core that waited at a
  barrier or for a message leads to its partner's arrival or send.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Iterable

from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds
from nkisim.costmodel.dma import data_seconds, dma_engines, spill_transfers
from nkisim.emulator.trace import Instruction, Operand, Region, Trace
from nkisim.vocabulary import (BARRIER, BARRIER_WAIT, DGE, DMA, DMA_QUEUE_LANES, ENGINES, EXCHANGE, RECEIVE, dma_lane,
                               spec)

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
    end: float
    nbytes: int = 0

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
        """(core, lane) pairs in use, engines first in their usual order, then DMA queues."""
        used = {(s.core, s.lane) for s in self.slots}
        order = {lane: i for i, lane in enumerate((*ENGINES, *DMA_QUEUE_LANES.values()))}
        return sorted(used, key=lambda cl: (cl[0], order.get(cl[1], 99), cl[1]))


@dataclass
class _Task:
    core: int
    lane: str
    engine: str
    opcode: str
    ins: Instruction
    duration: float
    deps: list[int]
    dma_engines: tuple[int, ...] = ()
    is_transfer: bool = False
    queued_by: int | None = None   # the DGE task after which the transfer is queued (None: at start)
    start: float = 0.0
    end: float = 0.0
    binder: int | None = None   # the task whose end decided this task's start (critical path)
    kind: str = ""              # "" an instruction's work (or DGE); ARRIVE / DEPART of a barrier; RECEIVE
    arrive: int | None = None   # a DEPART's own ARRIVE (drawn as the wait until the DEPART starts)


class _Hazards:
    """Producer/consumer tracking by storage region, within one program."""

    def __init__(self) -> None:
        self.writers: dict[int, list[tuple[Region, int]]] = defaultdict(list)
        self.readers: dict[int, list[tuple[Region, int]]] = defaultdict(list)

    def deps_and_record(self, reads: Iterable[Operand], writes: Iterable[Operand], task: int) -> list[int]:
        """The earlier tasks `task` depends on for these accesses (sorted); then record them."""
        reads, writes = tuple(reads), tuple(writes)
        deps: set[int] = set()
        for op in reads:
            deps.update(t for r, t in self.writers[op.region.storage_id] if r.overlaps(op.region))
        for op in writes:
            sid = op.region.storage_id
            deps.update(t for r, t in (*self.writers[sid], *self.readers[sid]) if r.overlaps(op.region))
        for op in reads:
            self.readers[op.region.storage_id].append((op.region, task))
        for op in writes:
            # Accesses inside this write are now ordered through it: forget them.
            sid = op.region.storage_id
            self.writers[sid] = [(r, t) for r, t in self.writers[sid] if not _inside(r, op.region)]
            self.readers[sid] = [(r, t) for r, t in self.readers[sid] if not _inside(r, op.region)]
            self.writers[sid].append((op.region, task))
        deps.discard(task)
        return sorted(deps)


def _inside(inner: Region, outer: Region) -> bool:
    return (inner.storage_id == outer.storage_id and outer.p_lo <= inner.p_lo and inner.p_hi <= outer.p_hi
            and outer.f_lo <= inner.f_lo and inner.f_hi <= outer.f_hi)


def _build_tasks(trace: Trace) -> list[_Task]:
    cores = sorted({i.program_id for i in trace.instructions})
    sharing = min(K.CORES_PER_HBM_STACK, max(1, trace.lnc, len(cores)))
    tasks: list[_Task] = []
    sync = _Synchronisations()
    for core in cores:
        hazards = _Hazards()
        first = len(tasks)
        work: dict[int, tuple[int, int]] = {}   # instruction index -> (task that starts it, task that ends it)
        spills, last_spill = spill_transfers(trace, core), {}
        for ins in trace.program(core):
            reloads, saves = spills.get(ins.index, ((), ()))
            before = _add_spills(tasks, core, reloads, [], last_spill, sharing)
            collective = spec(ins.isa).collective
            if collective == BARRIER:
                arrive, depart = _add_barrier(tasks, core, ins, hazards)
                sync.barrier(ins, arrive, depart)
                work[ins.index] = (arrive, depart)
            elif collective == EXCHANGE:
                send, receive = _add_exchange(tasks, core, ins, hazards, sharing)
                sync.exchange(ins, send, receive)
                work[ins.index] = (send, receive)
            elif ins.engine == DMA:
                deps = hazards.deps_and_record(ins.reads, ins.writes, _next_transfer(tasks, ins))
                transfer = _add_transfer(tasks, core, ins, deps, sharing)
                work[ins.index] = (transfer, transfer)
            else:
                deps = hazards.deps_and_record(ins.reads, ins.writes, len(tasks))
                tasks.append(_Task(core, ins.engine, ins.engine, ins.opcode, ins, compute_seconds(ins), deps))
                work[ins.index] = (len(tasks) - 1, len(tasks) - 1)
            tasks[work[ins.index][0]].deps.extend(before)
            _add_spills(tasks, core, saves, [work[ins.index][1]], last_spill, sharing)
        for program, later, earlier in trace.order_edges:
            if program == core:
                tasks[work[later][0]].deps.append(work[earlier][1])
        if any(t.kind == ARRIVE for t in tasks[first:]):
            _block_engines_at_barriers(tasks, first)
    sync.link(tasks)
    return tasks


def _add_spills(tasks: list[_Task], core: int, transfers: Iterable[Instruction], deps: list[int],
                last: dict[int, int], sharing: int) -> list[int]:
    """Spill transfers (`dma.spill_transfers`) after `deps`, each after its allocation's previous one."""
    ids = []
    for ins in transfers:
        previous = last.get(ins.attrs["allocation_id"])
        ids.append(_add_transfer(tasks, core, ins, [*deps, *([] if previous is None else [previous])], sharing))
        last[ins.attrs["allocation_id"]] = ids[-1]
    return ids


def _block_engines_at_barriers(tasks: list[_Task], first: int) -> None:
    """An engine runs its instruction stream in order and "the barrier will block execution on this
    engine" (core_barrier's API page): on a barrier's engine, everything before it in program order
    precedes its arrival, everything after it follows its completion. (Elsewhere, list scheduling
    may reorder independent work on a lane; not across a barrier.) `tasks[first:]` are one core's."""
    since: dict[str, list[int]] = defaultdict(list)   # lane -> its tasks since its last barrier
    barrier: dict[str, int] = {}                        # lane -> completion of its last barrier
    for tid in range(first, len(tasks)):
        t = tasks[tid]
        before = [barrier[t.lane]] if t.lane in barrier and t.kind != DEPART else []
        if t.kind == ARRIVE:
            before += since.pop(t.lane, [])
        elif t.kind == DEPART:
            barrier[t.lane] = tid
        else:
            since[t.lane].append(tid)
        t.deps = sorted({*t.deps, *before})


def _next_transfer(tasks: list[_Task], ins: Instruction) -> int:
    """The id the transfer of DMA `ins` will get: after its descriptor generation, if it has one."""
    return len(tasks) + (1 if _dge_seconds(ins) > 0 else 0)


def _dge_seconds(ins: Instruction) -> float:
    if ins.dma is None:
        raise ValueError(f"DMA instruction {ins.index} ({ins.source}) has no DmaInfo")
    return K.dge_seconds(ins.dma.dge_mode)


def _add_transfer(tasks: list[_Task], core: int, ins: Instruction, deps: list[int], sharing: int) -> int:
    """A DMA's descriptor generation (if its dge mode has one) and its transfer; returns the transfer."""
    dge = _dge_seconds(ins)
    queued_by = None
    if dge > 0:
        queue = ins.dma.queue_engine
        if queue not in ENGINES:
            raise ValueError(f"DMA {ins.index}: dge_mode {ins.dma.dge_mode!r} needs an issuing "
                             f"engine, got queue_engine {queue!r}")
        tasks.append(_Task(core, queue, queue, DGE, ins, dge, []))
        queued_by = len(tasks) - 1
        deps = [*deps, queued_by]
    tasks.append(_Task(core, dma_lane(ins.dma.queue_engine), DMA, ins.opcode, ins, data_seconds(ins, sharing), deps,
                       dma_engines(ins), is_transfer=True, queued_by=queued_by))
    return len(tasks) - 1


def _add_barrier(tasks: list[_Task], core: int, ins: Instruction, hazards: _Hazards) -> tuple[int, int]:
    """A barrier's arrival (after this core's accesses of its data) and completion (before later ones)."""
    arrive = len(tasks)
    tasks.append(_Task(core, ins.engine, ins.engine, BARRIER_WAIT, ins, 0.0,
                       hazards.deps_and_record(ins.reads, (), arrive), kind=ARRIVE))
    depart = len(tasks)
    deps = sorted({arrive, *hazards.deps_and_record((), ins.reads, depart)})
    tasks.append(_Task(core, ins.engine, ins.engine, ins.opcode, ins, compute_seconds(ins), deps, kind=DEPART,
                       arrive=arrive))
    return arrive, depart


def _add_exchange(tasks: list[_Task], core: int, ins: Instruction, hazards: _Hazards,
                  sharing: int) -> tuple[int, int]:
    """An exchange's send (a transfer reading src) and its receive (the moment dst is written)."""
    send = _add_transfer(tasks, core, ins, hazards.deps_and_record(ins.reads, (), _next_transfer(tasks, ins)),
                         sharing)
    receive = len(tasks)
    tasks.append(_Task(core, tasks[send].lane, DMA, RECEIVE, ins, 0.0,
                       hazards.deps_and_record((), ins.writes, receive), kind=RECEIVE))
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
    tasks = _build_tasks(trace)
    waiting = [len(t.deps) for t in tasks]
    users: list[list[int]] = [[] for _ in tasks]
    for tid, t in enumerate(tasks):
        for d in t.deps:
            users[d].append(tid)
    lane_free: dict[tuple[int, str], tuple[float, int | None]] = defaultdict(lambda: (0.0, None))
    dma_free: dict[tuple[int, int], tuple[float, int | None]] = defaultdict(lambda: (0.0, None))

    def earliest(tid: int) -> tuple[float, int | None]:
        t = tasks[tid]
        best, binder = 0.0, None
        for d in t.deps:
            if d == t.queued_by:
                continue
            dep = tasks[d]
            # A receive already counts the semaphore that tells its core the data landed.
            same_lane = (dep.core, dep.lane) == (t.core, t.lane) or dep.kind == RECEIVE
            ready = dep.end + (0.0 if same_lane else K.SEMAPHORE_LATENCY_S)
            if ready > best:
                best, binder = ready, d
        if t.kind != RECEIVE:   # a receive is a moment on its core, no work on a lane
            free_at, who = lane_free[(t.core, t.lane)]
            if free_at > best:
                best, binder = free_at, who
        if not t.is_transfer:
            return best, binder
        # DMA: the queue's fixed cost, then data once queued + latency and its engines are free.
        best += K.DMA_TRANSFER_FIXED_S
        queued = tasks[t.queued_by].end if t.queued_by is not None else 0.0
        candidates = [(queued + K.DMA_QUEUE_LATENCY_S, t.queued_by)]
        candidates += [dma_free[(t.core, e)] for e in t.dma_engines]
        for at, who in candidates:
            if at > best:
                best, binder = at, who
        return best, binder

    heap = [(0.0, tid) for tid, n in enumerate(waiting) if n == 0]
    heapq.heapify(heap)
    placed = 0
    while heap:
        est, tid = heapq.heappop(heap)
        start, binder = earliest(tid)
        if start > est:  # its lane or DMA engines filled up since it was queued
            heapq.heappush(heap, (start, tid))
            continue
        t = tasks[tid]
        t.start, t.end, t.binder = start, start + t.duration, binder
        placed += 1
        # A lane is in order: the next task on it starts no earlier than this one ends (a DMA
        # queue's next fixed cost follows this transfer's data).
        if t.kind != RECEIVE:
            lane_free[(t.core, t.lane)] = (t.end, tid)
        for e in t.dma_engines:
            dma_free[(t.core, e)] = (t.end, tid)
        for u in users[tid]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (earliest(u)[0], u))
    if placed != len(tasks):
        hint = (" (the kernel's scheduling edges, with_schedule or nl.no_reorder, contradict each other or its data dependencies)"
                if trace.order_edges else "")
        raise RuntimeError(f"dependency cycle in trace {trace.kernel!r}: placed {placed} of {len(tasks)}{hint}")
    slots = _slots(tasks)
    return Schedule(lnc=trace.lnc, slots=slots, critical_path=_critical_path(tasks, slots))


def _slots(tasks: list[_Task]) -> list[Slot]:
    """One slot per task; a barrier's arrival is drawn as the wait until its barrier starts."""
    wait_ends = {t.arrive: t.start for t in tasks if t.kind == DEPART}
    return [Slot(t.core, t.lane, t.engine, t.opcode, t.ins.name, t.ins.index, t.start, wait_ends.get(tid, t.end),
                 t.ins.dma.nbytes if t.is_transfer else 0)
            for tid, t in enumerate(tasks)]


def _critical_path(tasks: list[_Task], slots: list[Slot]) -> list[Slot]:
    """Walk back from the last task to finish through whatever decided each start."""
    if not tasks:
        return []
    tid: int | None = max(range(len(tasks)), key=lambda i: tasks[i].end)
    path = []
    while tid is not None:
        path.append(slots[tid])
        tid = tasks[tid].binder
    return path[::-1]
