"""Lesson 12: from tiles allocated in the loop to one SBUF slot per tile, all loads first (NKI 0.6 subset).

Every kernel here uses lesson 11's dge_mode.none and lesson 10's shifted statistics chain, with the
same instructions per tile in the same order as layernorm_dge.res_layernorm_dge_none, so all give
bit-identical results. What changes is *when* each load can be issued:
- `res_layernorm_ring`: a depth-4 ring of SBUF slots (the published kernel's earlier design); tile
  t's loads go into the slot tile t-4 must be done with.
- `res_layernorm_loads_first`: every tile gets its own slot and every load is issued before any
  compute (one DMA per tile and operand), so no load waits behind an earlier tile's stores.
`group_of_tiles` is the loads-first schedule for any run of tiles; lesson 13 (layernorm_grouped.py)
calls it once per group.
"""
import nki
import nki.isa as nisa
import nki.language as nl

from lesson_kernels.layernorm_naive import P, check_rows, compute_and_store, new_outputs
from lesson_kernels.layernorm_stats import N_STATS

RING_DEPTH = 4
DMA_NONE = nisa.dge_mode.none


def ring_loop(a, b, eps):
    """Tile by tile through a ring of RING_DEPTH slots: loads, compute, stores."""
    rows, hidden = a.shape
    branches = b.shape[0]
    check_rows(rows)
    x_new, z_out = new_outputs(a)
    a_ring = nl.ndarray((P, RING_DEPTH, hidden), dtype=nl.float32, buffer=nl.sbuf)
    b_ring = []
    for _ in range(branches):
        b_ring.append(nl.ndarray((P, RING_DEPTH, hidden), dtype=nl.bfloat16, buffer=nl.sbuf))
    s_ring = nl.ndarray((P, RING_DEPTH, hidden), dtype=nl.float32, buffer=nl.sbuf)
    stats = nl.ndarray((P, N_STATS, RING_DEPTH), dtype=nl.float32, buffer=nl.sbuf)
    for t in range(rows // P):
        r0, slot = t * P, t % RING_DEPTH
        nisa.dma_copy(dst=a_ring[:, slot, :], src=a[r0:r0 + P, :], dge_mode=DMA_NONE,
                      name="load_a")
        for k in range(branches):
            nisa.dma_copy(dst=b_ring[k][:, slot, :], src=b[k, r0:r0 + P, :], dge_mode=DMA_NONE,
                          name=f"load_b{k}")
        b_tiles = []
        for k in range(branches):
            b_tiles.append(b_ring[k][:, slot, :])
        compute_and_store(a_ring[:, slot, :], b_tiles, s_ring[:, slot, :], x_new, z_out, r0,
                          "shifted", stats, slot, eps, DMA_NONE)
    return x_new, z_out


@nki.jit
def res_layernorm_ring(a, b, eps):
    """Lesson 12, the published kernel's earlier design: a depth-4 ring buffer, loads issued tile by tile."""
    return ring_loop(a, b, eps)


def group_of_tiles(a, b, x_new, z_out, first_tile, n_tiles, eps, stats_kind="shifted", dge=DMA_NONE, affine=()):
    """Tiles [first_tile, first_tile + n_tiles): one slot each, all loads, then compute + stores."""
    hidden = a.shape[1]
    branches = b.shape[0]
    a_slots = nl.ndarray((P, n_tiles, hidden), dtype=nl.float32, buffer=nl.sbuf)
    b_slots = []
    for _ in range(branches):
        b_slots.append(nl.ndarray((P, n_tiles, hidden), dtype=nl.bfloat16, buffer=nl.sbuf))
    s_slots = nl.ndarray((P, n_tiles, hidden), dtype=nl.float32, buffer=nl.sbuf)
    stats = nl.ndarray((P, N_STATS, n_tiles), dtype=nl.float32, buffer=nl.sbuf)
    for j in range(n_tiles):
        r0 = (first_tile + j) * P
        nisa.dma_copy(dst=a_slots[:, j, :], src=a[r0:r0 + P, :], dge_mode=dge, name="load_a")
        for k in range(branches):
            nisa.dma_copy(dst=b_slots[k][:, j, :], src=b[k, r0:r0 + P, :], dge_mode=dge,
                          name=f"load_b{k}")
    for j in range(n_tiles):
        b_tiles = []
        for k in range(branches):
            b_tiles.append(b_slots[k][:, j, :])
        compute_and_store(a_slots[:, j, :], b_tiles, s_slots[:, j, :], x_new, z_out,
                          (first_tile + j) * P, stats_kind, stats, j, eps, dge, affine)


@nki.jit
def res_layernorm_loads_first(a, b, eps):
    """Lesson 12: every tile in its own SBUF slot, all loads issued before any compute."""
    rows = a.shape[0]
    check_rows(rows)
    x_new, z_out = new_outputs(a)
    group_of_tiles(a, b, x_new, z_out, 0, rows // P, eps)
    return x_new, z_out
