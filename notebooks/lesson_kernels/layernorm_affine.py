"""Lesson 15: what folding gamma/beta into the consumers saves, as a kernel (NKI 0.6 subset, trn2).

`res_layernorm_affine` is lesson 14's kernel (groups of tiles, loads first, the shifted chain,
rows split over the LNC programs) with LayerNorm's own affine applied inside it, as a kernel
without the fold would have to: z = normalized * gamma + beta, two more elementwise passes per
tile on the Vector engine and two [128, H] fp32 tiles of gamma and beta (each loaded once, every
partition a copy of the vector). Not part of the finished kernel: it is the "before" of lesson 15.
"""
import nki
import nki.isa as nisa
import nki.language as nl
from kernels import fold_group_size

from lesson_kernels.layernorm_loads_first import DMA_NONE, group_of_tiles
from lesson_kernels.layernorm_naive import P, check_rows, new_outputs


def broadcast_rows(vector, name):
    """A [1, H] fp32 HBM vector as a [128, H] SBUF tile, one copy per partition (a stride-0 DMA source)."""
    tile = nl.ndarray((P, vector.shape[1]), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=vector.broadcast(0, P), dge_mode=DMA_NONE, name=name)
    return tile


@nki.jit
def res_layernorm_affine(a, b, gamma, beta, eps, sbuf_budget):
    """(x_new, z = LayerNorm(x_new) * gamma + beta) with gamma, beta [1, H] fp32; launch as [LNC]."""
    rows, hidden = a.shape
    check_rows(rows, nl.num_programs(axes=0) * P)
    x_new, z_out = new_outputs(a)
    n_tiles = rows // nl.num_programs(axes=0) // P
    first_tile = nl.program_id(0) * n_tiles
    affine = (broadcast_rows(gamma, "load_gamma"), broadcast_rows(beta, "load_beta"))
    group = fold_group_size(n_tiles, hidden, b.shape[0], sbuf_budget)
    for g0 in range(0, n_tiles, group):
        group_of_tiles(a, b, x_new, z_out, first_tile + g0, min(group, n_tiles - g0), eps, affine=affine)
    return x_new, z_out
