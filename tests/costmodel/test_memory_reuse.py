"""SBUF address and PSUM bank reuse: a tile is one contiguous byte range, placed in the first free window
after the previous tile (wrapping to the lowest address); every write into released bytes starts after the
last access of the allocation that held those bytes, and the scheduler honours it. PSUM tiles take its 8
banks the same way, around the banks of hand-placed tiles."""
import nki
import nki.isa as nisa
import nki.language as nl
import torch

import nkisim
from nkisim import limits
from nkisim.costmodel.memory_reuse import Reused, reuse_edges, reused_bytes
from nkisim.emulator.trace import Allocation, Spill, Trace
from nkisim.profile.summary import estimate

KIB = 1024


def _trace(*allocations, spills=()):
    return Trace("t", 1, sbuf_allocations=[Allocation(0, i, first, last, size, placed)
                                           for i, (first, last, size, placed) in enumerate(allocations)],
                 spills=list(spills))


def _waits(trace, capacity):
    """(first access, last access it waits for) per allocation that lands on released bytes."""
    first = {a.storage_id: a.first for a in trace.sbuf_allocations}
    return sorted({(first[sid], r.last) for (_, sid), taken in reused_bytes(trace, capacity).items() for r in taken})


def test_fresh_bytes_first_then_the_bytes_after_the_wrap():
    t = _trace((0, 1, 100 * KIB, False), (2, 3, 100 * KIB, False), (4, 5, 100 * KIB, False), (6, 7, 100 * KIB, False))
    # 200 KiB fresh: the first two fit; the third takes the first's bytes, the fourth the second's
    assert _waits(t, 200 * KIB) == [(4, 1), (6, 3)]
    assert _waits(t, 400 * KIB) == []


def test_a_large_allocation_waits_for_every_allocation_whose_bytes_it_takes():
    t = _trace((0, 1, 60 * KIB, False), (2, 3, 60 * KIB, False), (5, 6, 120 * KIB, False))
    assert _waits(t, 130 * KIB) == [(5, 1), (5, 3)]
    # which of its bytes held which: its first 60 KiB were the first allocation's, the rest the second's
    assert reused_bytes(t, 130 * KIB)[0, 2] == [Reused(0, 60 * KIB, 1), Reused(60 * KIB, 120 * KIB, 3)]


def test_a_tile_is_never_split_over_two_holes():
    # A [0,20) freed at 1, L [20,60) live, R [60,80) freed at 8, never-used [80,100): 40 KiB do not fit
    # after R nor in A's hole, so D takes R's bytes and the fresh ones after them, and waits for R
    t = _trace((0, 1, 20 * KIB, False), (2, 30, 40 * KIB, False), (3, 8, 20 * KIB, False), (9, 10, 40 * KIB, False))
    assert _waits(t, 100 * KIB) == [(9, 8)]


def test_fragmented_free_bytes_are_taken_oldest_first():
    # A [0,30) freed at 1, L [30,70) live, C [70,100) freed at 4: no window holds 50 KiB
    t = _trace((0, 1, 30 * KIB, False), (2, 30, 40 * KIB, False), (3, 4, 30 * KIB, False), (5, 6, 50 * KIB, False))
    assert _waits(t, 100 * KIB) == [(5, 1), (5, 4)]


def test_live_allocations_are_never_reused_and_placed_or_spilled_ones_are_left_out():
    # the second is still live when the third is made: only the first's bytes are free
    t = _trace((0, 1, 100 * KIB, False), (2, 9, 100 * KIB, False), (4, 5, 100 * KIB, False))
    assert _waits(t, 200 * KIB) == [(4, 1)]
    placed = _trace((0, 1, 100 * KIB, True), (2, 3, 100 * KIB, False), (4, 5, 100 * KIB, False))
    assert _waits(placed, 200 * KIB) == []
    spill = Spill(0, 0, "save", 0, "a", 128, 100 * KIB)
    assert _waits(_trace((0, 1, 100 * KIB, False), (2, 3, 100 * KIB, False), spills=[spill]),
                  100 * KIB) == []


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


@nki.jit
def _normalize_like(x):
    """Per tile: load x (64 KiB fp32), a scratch activation of it (64 KiB, never read), a bf16 result
    from x (32 KiB: x's last read), store it. Two tiles' 160 KiB do not fit twice in the usable SBUF."""
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for i in range(2):
        t = nl.ndarray((128, x.shape[2]), dtype=x.dtype, buffer=nl.sbuf)
        scratch = nl.ndarray((128, x.shape[2]), dtype=x.dtype, buffer=nl.sbuf)
        q = nl.ndarray((128, x.shape[2]), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[i], name="load")
        nisa.activation(dst=scratch, op=nl.exp, data=t, name="scratch")
        nisa.tensor_scalar(dst=q, data=t, op0=nl.multiply, operand0=2.0, name="scale")
        nisa.dma_copy(dst=out[i], src=q, name="store")
    return out


def test_the_next_tile_takes_its_predecessors_slot_when_the_fresh_bytes_are_too_few():
    # Tile 0 holds [0, 160 KiB); the 47.7 KiB left cannot hold tile 1's 64 KiB load, so it wraps onto
    # tile 0's x and waits for x's last read (the scale), not for the scratch freed early (a byte pool's answer)
    trace = nkisim.run(_normalize_like, torch.empty((2, 128, 16 * KIB)), dry_run=True).trace
    names = {i.index: i.name for i in trace.instructions}
    edges = {(names[later], names[earlier]) for _, later, earlier in reuse_edges(trace)}
    assert ("load", "scale") in edges and ("load", "scratch") not in edges
    slots = {s.index: s for s in estimate(trace, with_range=False).timeline.slots}
    load1 = max(i.index for i in trace.instructions if i.name == "load")
    scale0 = min(i.index for i in trace.instructions if i.name == "scale")
    assert slots[load1].start >= slots[scale0].end


@nki.jit
def _tiles_loaded_in_halves(x):
    """Three 96 KiB tiles, each loaded by two DMAs (one per half) and stored by one."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    half = x.shape[2] // 2
    for i in range(3):
        t = nl.ndarray((128, x.shape[2]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t[:, 0:half], src=x[i, :, 0:half], name="load_lo")
        nisa.dma_copy(dst=t[:, half:], src=x[i, :, half:], name="load_hi")
        nisa.dma_copy(dst=out[i], src=t, name="store")
    return out


def test_every_write_into_reused_bytes_waits_not_only_the_first():
    # The third tile lands on the first's bytes: both of its loads wait for the first tile's store
    # (AllocationMode page: "a DMA into it waits for the compute that reads the earlier tile"). Before,
    # only the tile's first access waited, and its second half loaded over bytes still being stored.
    columns = 96 * KIB // 4
    trace = nkisim.run(_tiles_loaded_in_halves, torch.empty((3, 128, columns)), dry_run=True).trace
    names = {i.index: i.name for i in trace.instructions}
    assert [(names[later], later, earlier) for _, later, earlier in reuse_edges(trace)] == \
        [("load_lo", 6, 2), ("load_hi", 7, 2)]
    slots = {s.index: s for s in estimate(trace, with_range=False).timeline.slots if s.engine == "DMA"}
    assert slots[6].start >= slots[2].end and slots[7].start >= slots[2].end


@nki.jit
def _a_wide_tile_over_two_released_ones(x):
    """Two rounds of two 64 KiB tiles, then one 128 KiB tile loaded in halves."""
    out = nl.ndarray((128, 2 * x.shape[2]), dtype=x.dtype, buffer=nl.shared_hbm)
    columns = x.shape[2]
    for i in range(2):
        a = nl.ndarray((128, columns), dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, columns), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x[2 * i], name=f"load_a{i}")
        nisa.dma_copy(dst=b, src=x[2 * i + 1], name=f"load_b{i}")
        nisa.dma_copy(dst=out[:, 0:columns], src=a, name=f"store_a{i}")
        nisa.dma_copy(dst=out[:, columns:], src=b, name=f"store_b{i}")
    wide = nl.ndarray((128, 2 * columns), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=wide[:, 0:columns], src=x[0], name="wide_lo")
    nisa.dma_copy(dst=wide[:, columns:], src=x[1], name="wide_hi")
    nisa.dma_copy(dst=out, src=wide, name="wide_store")
    return out


def test_a_write_waits_only_for_the_tile_that_held_the_bytes_it_writes():
    # Ring: a0 [0, 64 KiB), b0 [64, 128), a1 [128, 192); b1 does not fit in the 15.7 KiB left and wraps
    # onto a0's bytes; the wide tile takes [64, 192): b0's bytes, then a1's. Each half waits for its own.
    trace = nkisim.run(_a_wide_tile_over_two_released_ones, torch.empty((4, 128, 16 * KIB)), dry_run=True).trace
    names = {i.index: i.name for i in trace.instructions}
    edges = {(names[later], names[earlier]) for _, later, earlier in reuse_edges(trace)}
    assert edges == {("load_b1", "store_a0"), ("wide_lo", "store_b0"), ("wide_hi", "store_a1")}


PSUM_BANK = 2048


def _matmuls_evicted_by_scalar(columns: int, placed_banks: int = 0):
    """Twelve matmuls, each into a PSUM tile of its own (`columns` fp32 per partition), each evicted by a
    Scalar exp (the tile's last access); `placed_banks` hand-placed one-bank tiles are live throughout."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray((12, 128, columns), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        held = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, b * PSUM_BANK))
                for b in range(placed_banks)]
        for h in held:
            nisa.nc_matmul(dst=h, stationary=a[:, 0:128], moving=a[:, 0:512])
        for i in range(12):
            p = nl.ndarray((128, columns), dtype=nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=p, stationary=a[:, 0:128], moving=a[:, 0:columns], name="matmul")
            e = nl.ndarray((128, columns), dtype=nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=e, op=nl.exp, data=p, name="evict")
            nisa.dma_copy(dst=out[i], src=e)
        for h in held:
            total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=total, op=nl.add, data=h, axis=1)
        return out
    trace = nkisim.run(kernel, torch.empty((128, 512), dtype=torch.bfloat16), dry_run=True).trace
    matmuls = [i.index for i in trace.instructions if i.name == "matmul"]
    evictions = [i.index for i in trace.instructions if i.name == "evict"]
    return trace, matmuls, evictions


def test_a_psum_tile_waits_for_the_eviction_of_the_tile_that_held_its_bank():
    # PSUM has 8 banks (trn2 architecture guide); one-bank tiles take them in turn, so the ninth matmul lands
    # on the first tile's bank and starts after that tile's eviction, not before (the emulator checks that at
    # most 8 banks are live in program order; the schedule now keeps to it in time)
    trace, matmuls, evictions = _matmuls_evicted_by_scalar(512)
    edges = {(later, earlier) for _, later, earlier in reuse_edges(trace)}
    assert edges == {(matmuls[i + 8], evictions[i]) for i in range(4)}
    slots = {s.index: s for s in estimate(trace, with_range=False).timeline.slots}
    assert all(slots[matmuls[i + 8]].start >= slots[evictions[i]].end for i in range(4))


def test_a_psum_tile_under_a_bank_stays_inside_one():
    # 1.5 KiB tiles: two do not fit in one bank, so each takes a bank of its own and the ninth reuses the first's
    # (packed across bank boundaries, ten would fit before the ring wraps)
    trace, matmuls, evictions = _matmuls_evicted_by_scalar(384)
    assert min(later for _, later, _ in reuse_edges(trace)) == matmuls[8]


def test_banks_of_hand_placed_psum_tiles_are_not_the_rings():
    # two hand-placed tiles hold banks 0 and 1 all along: the ring has 6 banks, and the seventh tile waits
    trace, matmuls, evictions = _matmuls_evicted_by_scalar(512, placed_banks=2)
    edges = {(later, earlier) for _, later, earlier in reuse_edges(trace)}
    assert edges == {(matmuls[i + 6], evictions[i]) for i in range(6)}
