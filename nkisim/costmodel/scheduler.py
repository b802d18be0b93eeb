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
- A dma_copy first costs its descriptor generation on the issuing engine (software DGE: GpSimd,
  ~0.75 us; hardware DGE: Sync or Scalar, ~0.6 us; none: nothing), in that engine's queue. Its data
  then moves by the DMA model of `dma.py`: a fixed cost on its DMA queue (serial within the queue,
  overlapping other queues' data), its rows spread over up to 16 DMA engines, and a trigger ->
  first-byte latency counted from when it was queued (its DGE end, or kernel start for prebuilt
  descriptors), so only the semaphore wait of a dependency lands on the critical path.
- Each physical core (program_id) is scheduled independently; LNC=2 total time is the later core.
"""
from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field

from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds
from nkisim.costmodel.dma import data_seconds, dma_engines
from nkisim.emulator.trace import Instruction, Region, Trace
from nkisim.vocabulary import DMA, DMA_QUEUE_LANES, ENGINES, dma_lane


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


class _Hazards:
    """Producer/consumer tracking by storage region, within one program."""

    def __init__(self) -> None:
        self.writers: dict[int, list[tuple[Region, int]]] = defaultdict(list)
        self.readers: dict[int, list[tuple[Region, int]]] = defaultdict(list)

    def deps_and_record(self, ins: Instruction, task: int) -> set[int]:
        deps: set[int] = set()
        for op in ins.reads:
            deps.update(t for r, t in self.writers[op.region.storage_id] if r.overlaps(op.region))
        for op in ins.writes:
            sid = op.region.storage_id
            deps.update(t for r, t in (*self.writers[sid], *self.readers[sid]) if r.overlaps(op.region))
        for op in ins.reads:
            self.readers[op.region.storage_id].append((op.region, task))
        for op in ins.writes:
            # Accesses inside this write are now ordered through it: forget them.
            sid = op.region.storage_id
            self.writers[sid] = [(r, t) for r, t in self.writers[sid] if not _inside(r, op.region)]
            self.readers[sid] = [(r, t) for r, t in self.readers[sid] if not _inside(r, op.region)]
            self.writers[sid].append((op.region, task))
        deps.discard(task)
        return deps


def _inside(inner: Region, outer: Region) -> bool:
    return (inner.storage_id == outer.storage_id and outer.p_lo <= inner.p_lo and inner.p_hi <= outer.p_hi
            and outer.f_lo <= inner.f_lo and inner.f_hi <= outer.f_hi)


def _build_tasks(trace: Trace) -> list[_Task]:
    cores = sorted({i.program_id for i in trace.instructions})
    sharing = min(K.CORES_PER_HBM_STACK, max(1, trace.lnc, len(cores)))
    tasks: list[_Task] = []
    for core in cores:
        hazards = _Hazards()
        for ins in trace.program(core):
            if ins.engine == DMA:
                if ins.dma is None:
                    raise ValueError(f"DMA instruction {ins.index} ({ins.source}) has no DmaInfo")
                dge = K.dge_seconds(ins.dma.dge_mode)
                queued_by = None
                if dge > 0:
                    queue = ins.dma.queue_engine
                    if queue not in ENGINES:
                        raise ValueError(f"DMA {ins.index}: dge_mode {ins.dma.dge_mode!r} needs an issuing "
                                         f"engine, got queue_engine {queue!r}")
                    tasks.append(_Task(core, queue, queue, "DGE", ins, dge, []))
                    queued_by = len(tasks) - 1
                lane = dma_lane(ins.dma.queue_engine)
                tid = len(tasks)
                deps = sorted(hazards.deps_and_record(ins, tid))
                if queued_by is not None:
                    deps.append(queued_by)
                tasks.append(_Task(core, lane, DMA, ins.opcode, ins, data_seconds(ins, sharing), deps,
                                   dma_engines(ins), is_transfer=True, queued_by=queued_by))
            else:
                tid = len(tasks)
                deps = sorted(hazards.deps_and_record(ins, tid))
                tasks.append(_Task(core, ins.engine, ins.engine, ins.opcode, ins, compute_seconds(ins), deps))
    return tasks


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
            ready = dep.end + (0.0 if (dep.core, dep.lane) == (t.core, t.lane) else K.SEMAPHORE_LATENCY_S)
            if ready > best:
                best, binder = ready, d
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
        lane_free[(t.core, t.lane)] = (t.end, tid)
        for e in t.dma_engines:
            dma_free[(t.core, e)] = (t.end, tid)
        for u in users[tid]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(heap, (earliest(u)[0], u))
    if placed != len(tasks):
        raise RuntimeError(f"dependency cycle in trace {trace.kernel!r}: placed {placed} of {len(tasks)}")
    slots = [_slot(t) for t in tasks]
    return Schedule(lnc=trace.lnc, slots=slots, critical_path=_critical_path(tasks, slots))


def _slot(t: _Task) -> Slot:
    nbytes = t.ins.dma.nbytes if t.is_transfer else 0
    return Slot(t.core, t.lane, t.engine, t.opcode, t.ins.name, t.ins.index, t.start, t.end, nbytes)


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
