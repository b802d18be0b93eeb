"""The DMA model: how long a `dma_copy` moves data, on which of the core's DMA engines.

At the level the DMA documentation describes (SDK:nki/get-started/about/nki-dma-overview.rst,
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/about/nki-dma-overview.html,
and the bandwidth guide nki/deep-dives/nki-dma-bandwidth-guide.rst):
- A NeuronCore has 16 DMA engines (rings). Engine k moves the rows of SBUF partitions 8k .. 8k+7
  (the overview's examples: A[128, 128] keeps all 16 engines busy with 8 rows each; A[4, 4096] moves
  on one engine, 32 KiB in a published 1416 ns), so a transfer uses the engines of the partitions its
  on-chip side spans, and a partial tile is slower per byte than a full one. A flat HBM -> HBM copy
  has no partitions: its 4 KiB pieces spread over up to all 16.
- An engine moves data at `DMA_ENGINE_BYTES_PER_S` x efficiency(bytes per packet): each row
  (packet) costs its bytes plus `DMA_PACKET_OVERHEAD_BYTES` (the bandwidth guide's per-packet
  overhead; its size from the matmul walkthrough's published packet times: 512 B rows ~72%, 2 KiB
  ~91% of the rate). A row whose addresses jump on either side (a strided or transposing view) is
  one packet per run of consecutive addresses (`packets`: the guide's "contiguous data per partition").
- A transfer writing HBM moves at `HBM_WRITE_EFFICIENCY` of that rate (an assumption, fitted on
  the development set: the backward GELU kernel, with more reads per write, moved more bytes per
  DMA-active second than the forward one; the overview's example 1 profile, the one published load
  and store of the same bytes, shows the store no slower: its constants row says so).
- A transfer touching HBM is also limited by its core's share of the HBM stack:
  `HBM_EFFICIENCY` (an assumption) x stack bandwidth / cores streaming from that stack.
- Each transfer has a fixed cost on its queue (`DMA_TRANSFER_FIXED_S`: descriptor processing and
  the completion semaphore writes, no data in flight). A queue ID exists on every engine and "DMA
  transfers within a queue on the same DMA engine are executed in order" (the overview's "DMA Queues"),
  so a transfer waits for the earlier ones of its queue (their data and the fixed cost) only on the
  engines it shares with them: same-queue transfers on different engines (different partitions) move
  at once, and another queue's transfer on the same engine overlaps the fixed cost.
- Descriptors generated at run time (software or hardware DGE) are written one engine's rows at a
  time, and each engine runs its queue's transfers in order on its own ("DMA transfers within a queue
  on the same DMA engine are executed in order", the overview), so an engine starts its rows once its
  descriptors are written and it is free: engine j of n gets them (j + 1) / n of the descriptor
  generation after it starts (`engine_step`; prebuilt descriptors, dge_mode.none, are all there at
  the trigger). Which order the generation writes them in is this model's reading, not a page's;
  the published profiles it answers: the walkthrough's tiled kernel, paced by its software DGE, had a
  transfer moving 99.93% of the time while each engine was busy 81% of it (Dma Packet Time 519.58 ms
  / 16 / 39.87 ms), which engines starting and stopping together cannot give; most GELU transfers
  wait for their engines, not for their descriptors, so their queue's gaps stay (published DMA
  active 90.9% and 95.0%).
- The trigger -> first byte latency (`DMA_QUEUE_LATENCY_S`) runs from the transfer's trigger. The
  trigger waits for the producers of the data the transfer moves (the overview's "DMA Triggers": the
  trigger instruction waits on the semaphores of other engines), so the latency hides behind work
  already queued only for a transfer with nothing to wait for; one that waits for a producer pays
  the semaphore, its descriptor generation and the latency after it.
- A spill (trace `Spill`: an SBUF allocation the compiler keeps in HBM, nkisim/README.md "SBUF
  allocation model") is a transfer like any other, on its own queue (the profiler's SpillReload
  rows): a reload HBM -> SBUF before the instruction that reads the allocation, a save SBUF -> HBM
  after the one that writes it, each moving what that instruction accesses (`spill_transfers`).
The scheduler (`scheduler.py`) applies the queue and latency rules; this module gives the engines
and the data time of one transfer.
"""
from __future__ import annotations

import math

from nkisim.costmodel import constants as K
from nkisim.costmodel.dma_transpose import is_transpose, transpose_efficiency
from nkisim.emulator.trace import HBM, SAVE, DmaInfo, Instruction, Spill, Trace
from nkisim.vocabulary import DMA, spec

HBM_ROW_BYTES = 4096   # an HBM->HBM copy has no partition rows: it is cut into 4 KiB elements
SPILL_QUEUE = "spill"  # the queue of the compiler's spill and reload transfers (timeline lane "DMA/spill")


def rows(ins: Instruction) -> int:
    """Descriptor rows of a transfer: the on-chip side's partitions, or 4 KiB pieces of a flat copy."""
    dma = ins.dma
    if dma.direction == "hbm->hbm":
        return max(1, math.ceil(dma.nbytes / HBM_ROW_BYTES))
    return max(1, dma.partitions)


def packets(ins: Instruction) -> int:
    """Packets of a transfer: its rows, or more when either side's addresses jump within a row (a strided or
    transposing view: each run of consecutive addresses is a packet of its own, so a "fragmented" transfer pays
    the per-packet overhead per run; SDK:nki/deep-dives/nki-dma-bandwidth-guide.rst asks for "contiguous data
    per partition" and says "small fragmented transfers underperform badly"). A transpose has its own rate."""
    return rows(ins) if is_transpose(ins) else max(rows(ins), ins.dma.pieces)


def dma_engines(ins: Instruction) -> tuple[int, ...]:
    """The DMA engines a transfer uses: those serving the partitions of its on-chip side, 8 each
    (SDK:nki/get-started/about/nki-dma-overview.rst, "Performance Considerations" and examples 1 and 2),
    or for a flat HBM -> HBM copy its pieces spread over up to all 16; a transpose's blocks take all 16
    (`dma_transpose`)."""
    if is_transpose(ins):
        return tuple(range(K.DMA_ENGINES_PER_CORE))
    if ins.dma.direction == "hbm->hbm":
        return tuple(range(min(K.DMA_ENGINES_PER_CORE, rows(ins))))
    first, end = _on_chip_partitions(ins)
    per_engine = K.PARTITIONS_PER_DMA_ENGINE
    return tuple(range(first // per_engine, (end - 1) // per_engine + 1))


def _on_chip_partitions(ins: Instruction) -> tuple[int, int]:
    """The partitions [first, end) the transfer's on-chip side spans (a spill has no operands: from 0)."""
    for operand in (*ins.writes, *ins.reads):
        if operand.buffer not in HBM:
            region = operand.region
            return region.p_lo, max(region.p_hi, region.p_lo + 1)
    return 0, max(1, ins.dma.partitions)


def touches_hbm(ins: Instruction) -> bool:
    return any(side in HBM for side in ins.dma.direction.split("->"))


def writes_hbm(ins: Instruction) -> bool:
    return ins.dma.direction.split("->")[1] in HBM


def engine_step(dge_seconds: float, engines: int) -> float:
    """How much later each next engine of a transfer gets its descriptors (0 on one engine): the
    generation writes them one engine's rows at a time, an engine starts its rows once they are written."""
    return dge_seconds / engines if engines > 1 else 0.0


def core_dma_bytes_per_s() -> float:
    """A core's DMA ceiling at the size plateau: all 16 engines at the per-engine rate."""
    return K.DMA_ENGINES_PER_CORE * K.DMA_ENGINE_BYTES_PER_S


def hbm_share_bytes_per_s(cores_sharing_stack: int) -> float:
    """What one core's DMAs can draw from its HBM stack while `cores_sharing_stack` cores stream."""
    return K.HBM_EFFICIENCY * K.HBM_STACK_BYTES_PER_S / cores_sharing_stack


def data_seconds(ins: Instruction, cores_sharing_stack: int) -> float:
    """Time the transfer's data moves on its engines (the fixed cost and latency are the scheduler's)."""
    dma = ins.dma
    if dma.nbytes <= 0:
        return 0.0
    packet_bytes = dma.nbytes / packets(ins)
    rate = len(dma_engines(ins)) * K.DMA_ENGINE_BYTES_PER_S * K.dma_efficiency(packet_bytes)
    if writes_hbm(ins):
        rate *= K.HBM_WRITE_EFFICIENCY
    if touches_hbm(ins):
        rate = min(rate, hbm_share_bytes_per_s(cores_sharing_stack))
    return dma.nbytes / (rate * transpose_efficiency(ins))


def spill_transfer(spill: Spill) -> Instruction:
    """A spill as the DMA transfer it is; its descriptors are the compiler's (prebuilt: no DGE time)."""
    save = spill.kind == SAVE
    dma = DmaInfo("sbuf->hbm" if save else "hbm->sbuf", spill.nbytes, spill.partitions, spill.bytes_per_partition,
                  "none", SPILL_QUEUE, cast=False)
    return Instruction(spill.index, spill.program_id, "dma_copy", spec("dma_copy").opcode, DMA,
                       f"spill {spill.kind}", "", spill.bytes_per_partition, spill.partitions, (), (),
                       {"spill": spill.kind, "allocation_id": spill.allocation_id}, dma)


def spill_transfers(trace: Trace, core: int) -> dict[int, tuple[list[Instruction], list[Instruction]]]:
    """Per instruction index of program `core`: the reloads that precede it and the saves that follow it."""
    out: dict[int, tuple[list[Instruction], list[Instruction]]] = {}
    for spill in trace.spills:
        if spill.program_id == core:
            reloads, saves = out.setdefault(spill.index, ([], []))
            (saves if spill.kind == SAVE else reloads).append(spill_transfer(spill))
    return out
