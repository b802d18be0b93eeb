"""Lesson 2: the smallest useful NKI kernel. One tile in, one instruction, one tile out.

Real NKI 0.6 code for trn2; on a machine without Trainium it runs on the `nkisim` emulator.
"""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gelu_one_tile(x):
    """Exact GELU of one SBUF tile: x is [P, C] in HBM with P <= 128 rows (one row per partition)."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)   # kernel output lives in HBM
    tile = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)       # on-chip working copy
    nisa.dma_copy(dst=tile, src=x, name="load_x")                         # HBM -> SBUF
    nisa.activation(dst=tile, op=nl.gelu, data=tile, name="gelu")         # Scalar engine, in place
    nisa.dma_copy(dst=out, src=tile, name="store")                        # SBUF -> HBM
    return out
