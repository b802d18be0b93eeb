"""Track 2, steps 5-6: SBUF grouping, then the thinned statistics chain (NKI 0.6, trn2, LNC=1).

Staging every tile at once needs H*(8+2B) bytes per tile and partition (fp32 a, B bf16 branches,
fp32 sum); past ~200 KiB it no longer fits SBUF. So tiles go in groups of G
(`kernels.fold_group_size`), each group with the loads-first schedule of step 4. Per-tile
instructions are the same for every G, so any G gives bit-identical results.
"""
import nki
import nki.isa as nisa
import nki.language as nl
from kernels import fold_group_size

from lesson_kernels.layernorm_loads_first import DMA_NONE, group_of_tiles, ring_loop
from lesson_kernels.layernorm_naive import P, check_rows, new_outputs


def grouped_loop(a, b, eps, sbuf_budget, stats_kind, dge=DMA_NONE):
    """All tiles in groups of G = fold_group_size(...), each group loads-first."""
    rows, hidden = a.shape
    check_rows(rows)
    x_new, z_out = new_outputs(a)
    n_tiles = rows // P
    group = fold_group_size(n_tiles, hidden, b.shape[0], sbuf_budget)
    for g0 in nl.static_range(0, n_tiles, group):
        group_of_tiles(a, b, x_new, z_out, g0, min(group, n_tiles - g0), eps, stats_kind, dge)
    return x_new, z_out


@nki.jit
def res_layernorm_grouped(a, b, eps, sbuf_budget):
    """Step 5: loads first within groups of G tiles; naive statistics."""
    return grouped_loop(a, b, eps, sbuf_budget, "naive")


@nki.jit
def res_layernorm_onepass(a, b, eps, sbuf_budget):
    """Step 6, the tempting thinning: unshifted one-pass variance (ill-conditioned)."""
    return grouped_loop(a, b, eps, sbuf_budget, "onepass")


@nki.jit
def res_layernorm_thinned(a, b, eps, sbuf_budget):
    """Step 6: the thinned, shifted statistics chain; LNC=1."""
    return grouped_loop(a, b, eps, sbuf_budget, "shifted")


# Step 6, looking back: the thinned kernel with one earlier step undone (same outputs, bit for bit).
@nki.jit
def res_layernorm_thinned_swdge(a, b, eps, sbuf_budget):
    """Thinned chain, but every DMA with the default descriptor mode (undoes step 3)."""
    return grouped_loop(a, b, eps, sbuf_budget, "shifted", nisa.dge_mode.unknown)


@nki.jit
def res_layernorm_thinned_ring(a, b, eps):
    """Thinned chain, but through the depth-4 ring (undoes steps 4-5)."""
    return ring_loop(a, b, eps, "shifted")
