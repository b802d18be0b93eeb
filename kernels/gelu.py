"""Exact-erf GELU forward and backward: NKI 0.6 kernels for trn2.

Layout: x is [R, C] in HBM; rows go to the 128 SBUF partitions, one 128-row tile at a time (the
last tile may be partial: 3216 rows = 25 full tiles + 16 rows); C is the free axis. Launched as
`kernel[2]`, program p takes the p-th half of the rows; at LNC=1 (a plain call) it takes them all.

Forward, per tile:  DMA in -> ONE Scalar-engine activation (nl.gelu, the hardware table) -> DMA out.
Backward, per tile: DMA x and grad_out in -> nl.gelu_dx activation on x (Scalar) -> Vector
multiply by grad_out -> DMA out.

Columns wider than FREE_CHUNK are processed in FREE_CHUNK-wide pieces, so the SBUF tiles stay far
below the per-partition capacity and one instruction's free-axis limit (64K elements); for
C <= FREE_CHUNK that is exactly one activation per tile. Same dtype in and out (fp32 or bf16); the
engines compute in fp32 and round on the write.
"""
import nki
import nki.isa as nisa
import nki.language as nl

from .limits import check_gelu_input, check_same

FREE_CHUNK = 16384  # columns per instruction: backward keeps 2 fp32 tiles = 128 KiB per partition


def _tiles(rows_total, cols_total, program, programs, pmax):
    """(r0, rows, c0, cols) of this program's tiles: its consecutive share of ceil(R / programs)
    rows, in 128-row tiles (the last may be partial), each cut into FREE_CHUNK-wide column pieces."""
    per_program = -(-rows_total // programs)
    first_row = program * per_program
    last_row = min(first_row + per_program, rows_total)
    return [
        (r0, min(pmax, last_row - r0), c0, min(FREE_CHUNK, cols_total - c0))
        for r0 in range(first_row, last_row, pmax)
        for c0 in range(0, cols_total, FREE_CHUNK)
    ]


@nki.jit
def gelu_fwd(x):
    """y = gelu(x) = x * Phi(x), exact erf form, [R, C] -> [R, C], same dtype."""
    check_gelu_input("gelu_fwd", "x", x.shape, x.dtype)
    rows_total, cols_total = x.shape
    out = nl.ndarray((rows_total, cols_total), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0, rows, c0, cols in _tiles(rows_total, cols_total, nl.program_id(0), nl.num_programs(axes=0), pmax):
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows, c0:c0 + cols], name="load_x")
        # In place: the activation reads and writes the same SBUF tile, one table pass.
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows, c0:c0 + cols], src=tile[0:rows], name="store")
    return out


@nki.jit
def gelu_bwd(x, grad_out):
    """dx = gelu'(x) * grad_out, where x is the saved pre-activation; [R, C], same dtype."""
    check_gelu_input("gelu_bwd", "x", x.shape, x.dtype)
    check_same("gelu_bwd", ("x", "grad_out"), (x.shape, grad_out.shape), (x.dtype, grad_out.dtype))
    rows_total, cols_total = x.shape
    out = nl.ndarray((rows_total, cols_total), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0, rows, c0, cols in _tiles(rows_total, cols_total, nl.program_id(0), nl.num_programs(axes=0), pmax):
        x_tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        g_tile = nl.ndarray((pmax, cols), dtype=grad_out.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[0:rows], src=x[r0:r0 + rows, c0:c0 + cols], name="load_x")
        nisa.dma_copy(dst=g_tile[0:rows], src=grad_out[r0:r0 + rows, c0:c0 + cols], name="load_grad")
        # gelu'(x) on the Scalar engine overwrites x's tile; the Vector multiply then overwrites
        # it again with the product, so two tiles per chunk suffice.
        nisa.activation(dst=x_tile[0:rows], op=nl.gelu_dx, data=x_tile[0:rows], name="gelu_dx")
        nisa.tensor_tensor(
            dst=x_tile[0:rows], data1=x_tile[0:rows], data2=g_tile[0:rows], op=nl.multiply, name="mul_grad"
        )
        nisa.dma_copy(dst=out[r0:r0 + rows, c0:c0 + cols], src=x_tile[0:rows], name="store")
    return out
