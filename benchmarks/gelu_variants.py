"""GELU forward variants the published author tried on trn2 (no measurable change) or that the
model predicts (LNC=2): used by calibration.py to check the cost model reproduces that in kind.
Real NKI 0.6 code; the shipped kernels are in kernels/gelu_erf.py."""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def gelu_fwd_double_buffered(x):
    """gelu_fwd with two SBUF tiles allocated once and used alternately (explicit double buffering)."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    slots = [nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf) for _ in range(2)]
    for i, r0 in enumerate(nl.static_range(0, rows_total, pmax)):
        rows = min(pmax, rows_total - r0)
        tile = slots[i % 2]
        nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows, :], name="load_x")
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows, :], src=tile[0:rows], name="store")
    return out


@nki.jit
def gelu_fwd_lnc2(x):
    """gelu_fwd with the rows split over the two physical cores of an LNC=2 launch (kernel[2])."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    per_core = rows_total // nl.num_programs(0)
    first = nl.program_id(0) * per_core
    for r0 in nl.static_range(first, first + per_core, pmax):
        rows = min(pmax, first + per_core - r0)
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows, :], name="load_x")
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows, :], src=tile[0:rows], name="store")
    return out
