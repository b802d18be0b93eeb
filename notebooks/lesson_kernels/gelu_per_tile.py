"""Lessons 4 and 5: exact GELU forward and backward over any number of rows, one activation-table
instruction per 128-row tile (real NKI 0.6 code for trn2).

These are the finished kernels of kernels/gelu_erf.py before lesson 7: single core, one tile per
128 rows, all columns in one instruction. Called plainly (LNC=1) on C <= kernels.gelu_erf.FREE_CHUNK
columns, `kernels.gelu_fwd` and `kernels.gelu_bwd` issue exactly these instructions.
"""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gelu_per_tile(x):
    """y = gelu(x), exact erf form, [R, C] -> [R, C], same dtype; one nl.gelu per 128-row tile."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in range(0, rows_total, pmax):
        rows = min(pmax, rows_total - r0)  # the last tile may be partial
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows], name="load_x")
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows], src=tile[0:rows], name="store")
    return out


@nki.jit
def gelu_tile_grid(x):
    """gelu_per_tile written with NKI 0.7's tile grids (SDK 2.33; not in NKI 0.6): nl.tiles cuts x and out
    into 128-row tiles and clamps the last one, so the kernel writes no row arithmetic."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile_shape = (nl.tile_size.pmax, x.shape[1])
    x_tiles = nl.tiles(x, tile_shape=tile_shape)
    out_tiles = nl.tiles(out, tile_shape=tile_shape)
    for i in range(x_tiles.shape[0]):
        tile = nl.empty_like(x_tiles[i, 0], buffer=nl.sbuf)  # shaped like this tile, the last one partial
        nisa.dma_copy(dst=tile.data, src=x_tiles[i, 0].data, name="load_x")
        nisa.activation(dst=tile.data, op=nl.gelu, data=tile.data, name="gelu")
        nisa.dma_copy(dst=out_tiles[i, 0].data, src=tile.data, name="store")
    return out


@nki.jit
def gelu_bwd_per_tile(x, grad_out):
    """dx = gelu'(x) * grad_out, [R, C], same dtype; per tile one nl.gelu_dx and one multiply."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in range(0, rows_total, pmax):
        rows = min(pmax, rows_total - r0)  # the last tile may be partial
        x_tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        g_tile = nl.ndarray((pmax, cols), dtype=grad_out.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[0:rows], src=x[r0:r0 + rows], name="load_x")
        nisa.dma_copy(dst=g_tile[0:rows], src=grad_out[r0:r0 + rows], name="load_grad")
        nisa.activation(dst=x_tile[0:rows], op=nl.gelu_dx, data=x_tile[0:rows], name="gelu_dx")
        nisa.tensor_tensor(dst=x_tile[0:rows], data1=x_tile[0:rows], data2=g_tile[0:rows], op=nl.multiply,
                           name="mul_grad")
        nisa.dma_copy(dst=out[r0:r0 + rows], src=x_tile[0:rows], name="store")
    return out
