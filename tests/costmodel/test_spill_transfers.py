"""Spill traffic in the trn2 cost model (estimate): a trace's `spills` become DMA transfers on their own
queue, reloads before the instruction that reads the spilled allocation, saves after the one that
writes it, and their bytes count as HBM traffic (nkisim/README.md, "SBUF allocation model").
Synthetic traces (tracebuild); the emulator's side is tests/nkisim/test_sbuf_allocation.py."""
from dataclasses import replace

import pytest
from tracebuild import TraceBuilder

from nkisim.costmodel.dma import SPILL_QUEUE, spill_transfers
from nkisim.costmodel.scheduler import schedule
from nkisim.emulator.trace import RELOAD, SAVE, Spill
from nkisim.profile.summary import estimate
from nkisim.vocabulary import dma_lane

F = 20_000                      # a [128, F] fp32 tile: 80,000 B per partition
TILE_BYTES = 128 * F * 4


@pytest.fixture(scope="module")
def spilled_trace():
    """load keep; memset mid; copy mid -> tmp; keep += tmp; store keep, with `keep` spilled: saved
    after its load and after the add, reloaded before the add and before the store."""
    b = TraceBuilder("keep_across_two")
    x, out, keep, mid, tmp = (b.alloc() for _ in range(5))
    b.dma(b.sbuf(keep, 128, F, "float32", role="dst"), b.hbm(x, 0, 128 * F, "float32"))
    b.compute("Vector", "memset", b.sbuf(mid, 128, F, "float32", role="dst"))
    b.compute("Vector", "tensor_copy", b.sbuf(tmp, 128, F, "float32", role="dst"), b.sbuf(mid, 128, F, "float32"))
    b.compute("Vector", "tensor_tensor", b.sbuf(keep, 128, F, "float32", role="dst"), b.sbuf(keep, 128, F, "float32"),
              b.sbuf(tmp, 128, F, "float32"), op="add")
    b.dma(b.hbm(out, 0, 128 * F, "float32", role="dst"), b.sbuf(keep, 128, F, "float32", role="src"))
    b.trace.spills = [Spill(0, index, kind, keep, "keep", 128, F * 4)
                      for index, kind in ((0, SAVE), (3, RELOAD), (3, SAVE), (4, RELOAD))]
    return b.trace


def test_spills_are_transfers_on_their_own_queue_ordered_around_the_instructions_they_serve(spilled_trace):
    sched = schedule(spilled_trace)
    lane = dma_lane(SPILL_QUEUE)
    spill_slots = [s for s in sched.slots if s.lane == lane]
    kernel = {s.index: s for s in sched.slots if s.lane != lane and s.opcode != "DGE"}
    assert [(s.index, s.name) for s in spill_slots] == [(0, f"spill {SAVE}"), (3, f"spill {RELOAD}"),
                                                        (3, f"spill {SAVE}"), (4, f"spill {RELOAD}")]
    save_0, reload_3, save_3, reload_4 = spill_slots
    assert save_0.start >= kernel[0].end          # saved after the load wrote it
    assert reload_3.start >= save_0.end           # reloaded after it was saved ...
    assert kernel[3].start >= reload_3.end        # ... and before the add reads it
    assert save_3.start >= kernel[3].end and kernel[4].start >= reload_4.end
    assert all(s.nbytes == TILE_BYTES for s in spill_slots)


def test_spill_bytes_are_hbm_traffic_and_cost_time(spilled_trace):
    with_spills = estimate(spilled_trace, with_range=False)
    without = estimate(replace(spilled_trace, spills=[]), with_range=False)
    assert with_spills.hbm_read_bytes == without.hbm_read_bytes + 2 * TILE_BYTES      # two reloads
    assert with_spills.hbm_write_bytes == without.hbm_write_bytes + 2 * TILE_BYTES    # two saves
    assert with_spills.total_time > without.total_time


def test_spill_transfers_group_by_the_instruction_they_serve(spilled_trace):
    by_index = spill_transfers(spilled_trace, 0)
    assert {i: ([r.dma.direction for r in reloads], [s.dma.direction for s in saves])
            for i, (reloads, saves) in by_index.items()} == {
        0: ([], ["sbuf->hbm"]), 3: (["hbm->sbuf"], ["sbuf->hbm"]), 4: (["hbm->sbuf"], [])}
    assert spill_transfers(spilled_trace, 1) == {}
