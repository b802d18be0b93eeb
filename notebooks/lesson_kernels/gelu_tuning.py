"""Lesson 7: variants of the finished gelu_fwd (kernels/gelu.py), one change each.

Double buffering, static unrolling, a wider free dimension and hwdge were tried on trn2 by the
published kernel's author and made no difference (the kernel sits at one core's DMA ceiling); all
compute exactly what gelu_fwd computes (same instruction per element). `gelu_fwd_two_queues` was
not measured: the cost model predicts its effect (loads and stores on two DMA queues). The change
that does help, LNC=2 row sharding, is in the finished kernel itself: `kernels.gelu_fwd[2]` splits
the rows over both physical cores. `gelu_fwd_split_columns` is the one change that hurts: the same
bytes moved through a strided view, a packet per element.
"""
import nki
import nki.isa as nisa
import nki.language as nl

WIDE_ROWS = 2  # rows per partition in gelu_fwd_wide: a [128, 2*C] tile holds 256 rows


def _gelu_rows(x, out, r0, rows, dge_mode, load_engine=nisa.engine.unknown, store_engine=nisa.engine.unknown):
    """The finished kernel's body for rows [r0, r0 + rows), rows <= 128: load, nl.gelu, store."""
    tile = nl.ndarray((nl.tile_size.pmax, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows], dge_mode=dge_mode, engine=load_engine, name="load_x")
    nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
    nisa.dma_copy(dst=out[r0:r0 + rows], src=tile[0:rows], dge_mode=dge_mode, engine=store_engine, name="store")


@nki.jit
def gelu_fwd_double_buffered(x, slots=2):
    """SBUF slots allocated once and used in turn (slots=2: double buffering), so the load of tile
    i+slots waits only for the store of tile i to free its slot."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    ring = nl.ndarray((pmax, slots, cols), dtype=x.dtype, buffer=nl.sbuf)
    for i in range((rows_total + pmax - 1) // pmax):
        r0 = i * pmax
        rows = min(pmax, rows_total - r0)
        slot = ring[0:rows, i % slots, :]
        nisa.dma_copy(dst=slot, src=x[r0:r0 + rows], name="load_x")
        nisa.activation(dst=slot, op=nl.gelu, data=slot, name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows], src=slot, name="store")
    return out


@nki.jit
def gelu_fwd_stream_buffers(x, slots=2):
    """gelu_fwd_double_buffered written with NKI 0.7's stream buffers (SDK 2.33; not in NKI 0.6): a pool of
    `slots` SBUF tiles over the 128-row tiles of x, tile i in slot i % slots, the last one clamped to its rows."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile_shape = (nl.tile_size.pmax, x.shape[1])
    x_tiles = nl.tiles(x, tile_shape=tile_shape)
    out_tiles = nl.tiles(out, tile_shape=tile_shape)
    pool = nl.alloc_stream_buffers(x_tiles, buffer=nl.sbuf, dim=0, num_slots=slots)
    for i in range(x_tiles.shape[0]):
        slot = pool[i].data
        nisa.dma_copy(dst=slot, src=x_tiles[i, 0].data, name="load_x")
        nisa.activation(dst=slot, op=nl.gelu, data=slot, name="gelu")
        nisa.dma_copy(dst=out_tiles[i, 0].data, src=slot, name="store")
    return out


@nki.jit
def gelu_fwd_wide(x):
    """Wider free dimension: each partition takes WIDE_ROWS consecutive rows, so every DMA and
    activation moves WIDE_ROWS x more bytes and there are WIDE_ROWS x fewer instructions. GELU is
    elementwise, so which partition holds which row does not matter. Rows that do not fill a wide
    block go through ordinary 128-row tiles."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    block = pmax * WIDE_ROWS
    wide_rows = rows_total // block * block
    for r0 in range(0, wide_rows, block):
        tile = nl.ndarray((pmax, WIDE_ROWS * cols), dtype=x.dtype, buffer=nl.sbuf)
        # [block, C] in HBM -> [128, WIDE_ROWS*C] in SBUF: dma_copy needs equal element counts only
        nisa.dma_copy(dst=tile, src=x[r0:r0 + block], name="load_x")
        nisa.activation(dst=tile, op=nl.gelu, data=tile, name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + block], src=tile, name="store")
    for r0 in range(wide_rows, rows_total, pmax):
        _gelu_rows(x, out, r0, min(pmax, rows_total - r0), nisa.dge_mode.unknown)
    return out


@nki.jit
def gelu_fwd_hwdge(x):
    """Every DMA on the hardware descriptor-generation engine (dge_mode.hwdge) instead of letting
    the compiler choose."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in range(0, rows_total, pmax):
        _gelu_rows(x, out, r0, min(pmax, rows_total - r0), nisa.dge_mode.hwdge)
    return out


@nki.jit
def gelu_fwd_unrolled(x):
    """The row loop as `nl.static_range`, the published author's "static unrolling" (on NKI 0.5 it
    unrolled a loop the compiler could keep). NKI 0.7 deprecates it as Python's `range` (its NKI Loops
    page: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-loops.html), the
    loop gelu_fwd already has: the same instructions in the same order."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in nl.static_range(0, rows_total, pmax):
        _gelu_rows(x, out, r0, min(pmax, rows_total - r0), nisa.dge_mode.unknown)
    return out


@nki.jit
def gelu_fwd_two_queues(x):
    """Loads and stores on two DMA queues: hardware DGE lets a dma_copy choose the engine whose
    sequencer triggers it (`engine=nisa.engine.sync` or `nisa.engine.scalar`; nki.isa.dma_copy,
    https://awsdocs-neuron.readthedocs-hosted.com/general/nki/api/generated/nki.isa.dma_copy.html), so the loads go on the
    Sync queue and the stores on the Scalar queue, and one queue's per-transfer fixed cost overlaps
    the other's data movement. A prediction of the cost model: not measured on trn2."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in range(0, rows_total, pmax):
        _gelu_rows(x, out, r0, min(pmax, rows_total - r0), nisa.dge_mode.hwdge,
                   load_engine=nisa.engine.sync, store_engine=nisa.engine.scalar)
    return out


@nki.jit
def gelu_fwd_split_columns(x, interleaved=False):
    """Each tile moved as two halves of its columns, both ways computing gelu_fwd's bits: the first and
    the second half of each row (contiguous, 4 KiB per partition row at 4096 bf16 columns), or the even
    and the odd columns (`x[rows, 0::2]`: every other element, so each run of consecutive HBM
    addresses is one 2-byte element). The tile's halves hold the columns in that order, and the store
    puts each back where it came from."""
    rows_total, cols = x.shape
    half = cols // 2
    halves = (slice(0, cols, 2), slice(1, cols, 2)) if interleaved else (slice(0, half), slice(half, cols))
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in range(0, rows_total, pmax):
        rows = min(pmax, rows_total - r0)
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        for h in range(2):
            nisa.dma_copy(dst=tile[0:rows, h * half:(h + 1) * half], src=x[r0:r0 + rows, halves[h]], name="load_x")
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        for h in range(2):
            nisa.dma_copy(dst=out[r0:r0 + rows, halves[h]], src=tile[0:rows, h * half:(h + 1) * half], name="store")
    return out
