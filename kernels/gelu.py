"""Exact-erf GELU forward and backward: NKI 0.7 kernels for trn2 (in the subset NKI 0.6 also accepts).

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

FREE_CHUNK = 16384  # columns per instruction: backward keeps 2 fp32 tiles = 128 KiB per partition


# Kernel code stays in the NKI 0.6 front-end subset: assert for validation (as the NKI Language
# Guide does: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/nki-language-guide.html),
# plain loops, no generators or comprehensions (generators arrive with NKI 0.7's tracing front end:
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/release-notes/components/nki.html).
def _assert_gelu_operand(kernel, name, t):
    """A 2-D [R, C] operand, R >= 1, C >= 1, float32 or bfloat16."""
    assert len(t.shape) == 2, (
        f"{kernel}: {name} must be 2-D [R, C], got shape {t.shape}; gelu_erf / GELUErf flatten leading dims for you"
    )
    assert t.shape[0] >= 1 and t.shape[1] >= 1, f"{kernel}: {name} has shape {t.shape}; need R >= 1 and C >= 1"
    assert t.dtype == nl.float32 or t.dtype == nl.bfloat16, (
        f"{kernel}: {name} has dtype {t.dtype}; supported: float32, bfloat16"
    )


def _program_rows(rows_total):
    """(first_row, last_row) of this program: its consecutive share of ceil(R / programs) rows."""
    programs = nl.num_programs(axes=0)
    per_program = (rows_total + programs - 1) // programs
    first_row = nl.program_id(0) * per_program
    return first_row, min(first_row + per_program, rows_total)


@nki.jit
def gelu_fwd(x):
    """y = gelu(x) = x * Phi(x), exact erf form, [R, C] -> [R, C], same dtype."""
    _assert_gelu_operand("gelu_fwd", "x", x)
    rows_total, cols_total = x.shape
    out = nl.ndarray((rows_total, cols_total), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    first_row, last_row = _program_rows(rows_total)
    # 128-row tiles (the last may be partial), each cut into FREE_CHUNK-wide column pieces.
    for r0 in range(first_row, last_row, pmax):
        rows = min(pmax, last_row - r0)
        for c0 in range(0, cols_total, FREE_CHUNK):
            cols = min(FREE_CHUNK, cols_total - c0)
            tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows, c0:c0 + cols], name="load_x")
            # In place: the activation reads and writes the same SBUF tile, one table pass.
            nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
            nisa.dma_copy(dst=out[r0:r0 + rows, c0:c0 + cols], src=tile[0:rows], name="store")
    return out


@nki.jit
def gelu_bwd(x, grad_out):
    """dx = gelu'(x) * grad_out, where x is the saved pre-activation; [R, C], same dtype."""
    _assert_gelu_operand("gelu_bwd", "x", x)
    assert x.shape == grad_out.shape, f"gelu_bwd: grad_out shape {grad_out.shape} does not match x shape {x.shape}"
    assert x.dtype == grad_out.dtype, f"gelu_bwd: grad_out dtype {grad_out.dtype} does not match x dtype {x.dtype}"
    rows_total, cols_total = x.shape
    out = nl.ndarray((rows_total, cols_total), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    first_row, last_row = _program_rows(rows_total)
    for r0 in range(first_row, last_row, pmax):
        rows = min(pmax, last_row - r0)
        for c0 in range(0, cols_total, FREE_CHUNK):
            cols = min(FREE_CHUNK, cols_total - c0)
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
