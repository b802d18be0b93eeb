"""Instructions between the two programs of an LNC=2 launch: `core_barrier` and `sendrecv`.

Sources (NKI 0.6 API reference):
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.core_barrier.html
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.sendrecv.html
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_engine.html

Both run here in an LNC=2 launch: the launch runs its programs interleaved (`interleave.py`), and
a program that must wait for its partner yields the turn. NKI 0.7's core_barrier page also allows
the barrier at LNC=1, between two launches on the paired physical cores (row core-barrier-lnc1 of
nki_versions.TABLE); nkisim emulates one launch at a time, so that use is refused as not emulated.

  * `core_barrier(data, cores=(0, 1))`: the k-th barrier of one program waits until the other
    program has reached its k-th barrier.
  * `sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id)`: sends a copy of src (read when
    the call is made) to program send_to_rank, then waits for the message program recv_from_rank
    sends to this program on the same pipe_id and writes it into dst. Messages on one pipe arrive
    in order; different pipe_ids are independent. A message to oneself is allowed.

Both are synchronisations: the shared-HBM race check (cores.Program.note_shared_write/read)
orders every access made before a synchronisation both programs passed before every access made
after it; each program counts the synchronisations it passed (`Program.epoch`).

The trace records what the cost model needs to make one core wait for the other (registered as
`BARRIER` / `EXCHANGE`, see costmodel/scheduler.py): a barrier's ordinal in its program, its
participants and its `data` tensor (as a read: the accesses of `data` it orders, the documented use
"write to data, then core_barrier, then read it"); a sendrecv's ranks and pipe (its messages pair up
in program order, as the queues here deliver them).
"""
from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

import numpy as np

from . import dtypes, nki_versions
from ..costmodel import costs
from ..vocabulary import BARRIER, DMA, EXCHANGE, GPSIMD, SCALAR, SYNC, VECTOR, instruction
from .enums import NkiEnum, engine
from .issue import Issue, NkiInstruction
from .tensor import SBUF, SHARED_HBM, NkiTensor
from .trace import DmaInfo

_Engine = engine
GPSIMD_DMA_MAX_ELEMENTS = 256   # 1024 B of 32-bit, 512 B of 16-bit, 256 B of 8-bit data per partition


class dma_engine(NkiEnum):
    """`nisa.dma_engine`: which DMA mechanism a sendrecv uses."""

    dma = 1
    gpsimd_dma = 2


class _Exchange:
    """One launch's collective state: barrier counts and in-flight sendrecv messages."""

    def __init__(self, programs: int) -> None:
        self.barriers = [0] * programs
        self.messages: dict[tuple[int, int, Any], deque] = defaultdict(deque)   # (from, to, pipe) -> queue


def _exchange(c: Issue) -> _Exchange:
    launch = c.prog.launch
    if launch.lnc < 2 or launch.interleaver is None:
        c.fail(f"{c.isa} synchronises the cores of a Logical NeuronCore; it needs an LNC=2 launch (kernel[2](...)), "
               f"this launch has LNC={launch.lnc}")
    if launch.exchange is None:
        launch.exchange = _Exchange(launch.lnc)
    return launch.exchange


def _wait(c: Issue, ready: Any, what: str) -> None:
    c.prog.launch.interleaver.wait(c.prog, ready, f"{c.label} ({c.where}) {what}")


@instruction("CORE_BARRIER", engines=(GPSIMD, VECTOR, SCALAR, SYNC), cost=costs.per_element_cycles, color="#444444",
             collective=BARRIER)
def core_barrier(data: NkiTensor, cores: Any, engine: Any = engine.gpsimd, name: str | None = None) -> NkiInstruction:
    """Wait until both cores reach this barrier (their k-th barriers pair up)."""
    c = Issue("core_barrier", name)
    data = c.tensor("data", data, on_chip=False)
    if data.buffer is not SHARED_HBM:
        c.fail(f"data is in {data.buffer.name}; core_barrier synchronises on a shared HBM tensor (nl.shared_hbm)")
    if not isinstance(cores, (tuple, list)) or tuple(cores) != (0, 1):
        c.fail(f"cores={cores!r}; only cores=(0, 1) is supported (the two cores of an LNC=2 Logical NeuronCore)")
    lane = c.lane(engine)
    if c.prog.launch.lnc < 2 and nki_versions.applies("core-barrier-lnc1"):
        # valid on trn2 (its partner is whatever kernel the other physical core runs), but a launch here is one
        # Logical NeuronCore: there is no partner to emulate
        c.fail(f"at LNC=1, core_barrier waits for the kernel the other physical core of the HBM stack runs as a "
               f"separate Logical NeuronCore (NKI {nki_versions.release()} allows it at LNC 1 and 2: "
               f"{nki_versions.ROWS['core-barrier-lnc1'].page.split('; ')[0]}); nkisim emulates one launch at a "
               f"time, so that partner is not emulated: launch with LNC=2 (kernel[2](...)) to emulate the barrier")
    ex = _exchange(c)
    ins = c.record(lane, [("data", data)], [], {"cores": (0, 1), "barrier": ex.barriers[c.prog.id]}, epp=1)
    if c.prog.check_only:       # a body run only to check it waits for no one
        return ins
    me = c.prog.id
    ex.barriers[me] += 1
    mine = ex.barriers[me]
    others = [p for p in range(len(ex.barriers)) if p != me]
    _wait(c, lambda: all(ex.barriers[p] >= mine for p in others),
          f"for program {others[0]} to reach its core_barrier #{mine}")
    c.prog.launch.settle_write_conflicts(c.prog.epoch)    # both cores are done with this epoch's writes
    c.prog.epoch += 1
    return ins


@instruction("SENDRECV", engines=(DMA,), cost=None, color="#134f5c", collective=EXCHANGE)
def sendrecv(src: NkiTensor, dst: NkiTensor, send_to_rank: int, recv_from_rank: int, pipe_id: Any,
             dma_engine: Any = dma_engine.dma, name: str | None = None) -> NkiInstruction:
    """Send src to program send_to_rank's dst and receive program recv_from_rank's src into dst."""
    c = Issue("sendrecv", name)
    src, dst = c.tensor("src", src, on_chip=False), c.tensor("dst", dst, on_chip=False)
    for role, t in (("src", src), ("dst", dst)):
        if t.buffer is not SBUF:        # "Both src and dst tiles must be in SBUF" (the sendrecv page)
            c.fail(f"{role} is in {t.buffer.name}; both src and dst of sendrecv must be in SBUF")
    if src.dtype != dst.dtype:
        c.fail(f"src dtype {src.dtype.name} != dst dtype {dst.dtype.name}; they must be the same")
    if src.shape != dst.shape:
        c.fail(f"src shape {src.shape} != dst shape {dst.shape}; they must have the same shape and layout")
    for role, rank in (("send_to_rank", send_to_rank), ("recv_from_rank", recv_from_rank)):
        if isinstance(rank, bool) or rank not in (0, 1):
            c.fail(f"{role}={rank!r}; ranks of the cores sharing an HBM stack are 0 or 1")
    c.enum("dma_engine", dma_engine, _DmaEngine)
    if dma_engine is _DmaEngine.gpsimd_dma and src.elements_per_partition > GPSIMD_DMA_MAX_ELEMENTS:
        c.fail(f"dma_engine=gpsimd_dma moves at most {GPSIMD_DMA_MAX_ELEMENTS * src.dtype.itemsize} bytes per "
               f"partition of {src.dtype.name} data, got {src.elements_per_partition * src.dtype.itemsize}")
    try:
        hash(pipe_id)
    except TypeError:
        c.fail(f"pipe_id must be a compile-time id (an int), got {type(pipe_id).__name__}")
    ex = _exchange(c)
    me = c.prog.id
    nbytes = dst.arr.nbytes
    queue = "GpSimd" if dma_engine is _DmaEngine.gpsimd_dma else "none"
    info = DmaInfo("sbuf->sbuf", nbytes, dst.partitions, nbytes // dst.partitions, "none", queue, False)
    ins = c.record(DMA, [("src", src)], [("dst", dst)],
                   {"send_to_rank": send_to_rank, "recv_from_rank": recv_from_rank, "pipe_id": pipe_id,
                    "dma_engine": dma_engine.name, "dtype": dst.dtype.name}, dma=info)
    if c.prog.check_only:       # a body run only to check it sends and receives nothing
        return ins
    payload = src.arr.copy() if c.prog.compute else None
    ex.messages[(me, send_to_rank, pipe_id)].append((payload, src.shape, src.dtype, c.where))
    inbox = ex.messages[(recv_from_rank, me, pipe_id)]
    _wait(c, lambda: bool(inbox), f"for program {recv_from_rank}'s sendrecv to it on pipe_id={pipe_id!r}")
    data, shape, dtype, sent_at = inbox.popleft()
    if shape != dst.shape or dtype != dst.dtype:
        c.fail(f"program {recv_from_rank} sent a {shape} {np.dtype(dtype).name} tile ({sent_at}) but this dst is "
               f"{dst.shape} {dst.dtype.name}; both sides must exchange tiles of one shape and dtype")
    if data is not None:
        dtypes.copy_bits(dst.arr, data)
    if recv_from_rank != me:
        c.prog.launch.settle_write_conflicts(c.prog.epoch)
        c.prog.epoch += 1
    return ins


_DmaEngine = dma_engine   # the sendrecv parameter shadows the enum class
