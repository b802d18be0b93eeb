"""SBUF address reuse: an allocation made when the usable SBUF is full starts after the last access of the
allocation whose released bytes it takes (oldest released first), and the scheduler honours it."""
import nki
import nki.isa as nisa
import nki.language as nl
import torch

import nkisim
from nkisim import limits
from nkisim.costmodel.memory_reuse import reuse_edges
from nkisim.emulator.trace import Allocation, Spill, Trace
from nkisim.profile.summary import estimate

KIB = 1024


def _trace(*allocations, spills=()):
    return Trace("t", 1, sbuf_allocations=[Allocation(0, i, first, last, size, placed)
                                           for i, (first, last, size, placed) in enumerate(allocations)],
                 spills=list(spills))


def test_fresh_bytes_first_then_the_oldest_released():
    t = _trace((0, 1, 100 * KIB, False), (2, 3, 100 * KIB, False), (4, 5, 100 * KIB, False), (6, 7, 100 * KIB, False))
    # 200 KiB fresh: the first two fit; the third takes the first's bytes, the fourth the second's
    assert reuse_edges(t, capacity=200 * KIB) == [(0, 4, 1), (0, 6, 3)]
    assert reuse_edges(t, capacity=400 * KIB) == []


def test_a_large_allocation_waits_for_every_allocation_whose_bytes_it_takes():
    t = _trace((0, 1, 60 * KIB, False), (2, 3, 60 * KIB, False), (5, 6, 120 * KIB, False))
    assert reuse_edges(t, capacity=130 * KIB) == [(0, 5, 1), (0, 5, 3)]


def test_live_allocations_are_never_reused_and_placed_or_spilled_ones_are_left_out():
    # the second is still live when the third is made: only the first's bytes are free
    t = _trace((0, 1, 100 * KIB, False), (2, 9, 100 * KIB, False), (4, 5, 100 * KIB, False))
    assert reuse_edges(t, capacity=200 * KIB) == [(0, 4, 1)]
    placed = _trace((0, 1, 100 * KIB, True), (2, 3, 100 * KIB, False), (4, 5, 100 * KIB, False))
    assert reuse_edges(placed, capacity=200 * KIB) == []
    spill = Spill(0, 0, "save", 0, "a", 128, 100 * KIB)
    assert reuse_edges(_trace((0, 1, 100 * KIB, False), (2, 3, 100 * KIB, False), spills=[spill]),
                       capacity=100 * KIB) == []


@nki.jit
def _three_big_tiles(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(3):
        t = nl.ndarray((128, x.shape[2]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i])
        nisa.dma_copy(dst=out[i], src=t)
    return out


def test_the_schedule_waits_for_the_reused_bytes():
    # three tiles of 96 KiB per partition: two fit in the usable SBUF, the third reuses the first's bytes,
    # so its load starts after the first tile's store ends (program order: load0 store0 load1 store1 load2 ...)
    columns = 96 * KIB // 4
    assert 2 * 96 * KIB <= limits.SBUF_USABLE_BYTES_PER_PARTITION < 3 * 96 * KIB
    trace = nkisim.run(_three_big_tiles, torch.empty((3, 128, columns)), dry_run=True).trace
    assert [(e[1], e[2]) for e in reuse_edges(trace)] == [(4, 1)]
    slots = {s.index: s for s in estimate(trace, with_range=False).timeline.slots if s.engine == "DMA"}
    assert slots[4].start >= slots[1].end
