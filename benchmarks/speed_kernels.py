"""A tiled matmul in the workshop's NKI 0.6 style, for measuring how trace and schedule times grow.

`tiled_matmul(lhs_t, rhs)` computes lhs_t.T @ rhs ([K, M] x [K, N] -> [M, N]) with nc_matmul's
contraction on the partitions (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_matmul.html):
per 128-row block of the result, its K stationary tiles are loaded once; per 512-column tile, the K
moving tiles are loaded and accumulated in one PSUM tile, which is copied to SBUF and stored. The
instruction count grows linearly in M: (K/128) * (1 + 2 * N/512) + 2 * N/512 per 128 rows.
"""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tiled_matmul(lhs_t, rhs):
    k_total, m_total = lhs_t.shape
    n_total = rhs.shape[1]
    pmax, fmax = nl.tile_size.pmax, nl.tile_size.gemm_moving_fmax
    assert k_total == rhs.shape[0], f"tiled_matmul: contraction sizes differ ({k_total} vs {rhs.shape[0]})"
    assert k_total % pmax == 0 and m_total % pmax == 0 and n_total % fmax == 0, (
        f"tiled_matmul: K and M must be multiples of {pmax} and N of {fmax}; got K={k_total}, M={m_total}, N={n_total}"
    )
    out = nl.ndarray((m_total, n_total), dtype=lhs_t.dtype, buffer=nl.shared_hbm)
    k_tiles = k_total // pmax
    for m0 in range(0, m_total, pmax):
        stationary = nl.ndarray((pmax, k_tiles, pmax), dtype=lhs_t.dtype, buffer=nl.sbuf)
        for kt in range(k_tiles):
            nisa.dma_copy(dst=stationary[:, kt, :], src=lhs_t[kt * pmax:(kt + 1) * pmax, m0:m0 + pmax],
                          name="load_stationary")
        for n0 in range(0, n_total, fmax):
            acc = nl.ndarray((pmax, fmax), dtype=nl.float32, buffer=nl.psum)
            for kt in range(k_tiles):
                moving = nl.ndarray((pmax, fmax), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=moving, src=rhs[kt * pmax:(kt + 1) * pmax, n0:n0 + fmax], name="load_moving")
                nisa.nc_matmul(dst=acc, stationary=stationary[:, kt, :], moving=moving, accumulate=kt > 0,
                               name="matmul")
            result = nl.ndarray((pmax, fmax), dtype=lhs_t.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result, src=acc, name="evacuate")
            nisa.dma_copy(dst=out[m0:m0 + pmax, n0:n0 + fmax], src=result, name="store")
    return out
