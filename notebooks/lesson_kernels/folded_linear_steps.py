"""Lesson 16: the fold's consumer y = z @ weight.T + bias on the Tensor engine, step by step (NKI 0.6).

All kernels take z [R, H] bf16, weight [N, H] bf16 (nn.Linear layout, gamma folded in) and bias
[N, 1] fp32 (W @ beta + c) and return y [R, N] bf16. nc_matmul(dst[M, F], stationary[K, M],
moving[K, F]) computes stationary.T @ moving with the contraction K on the partitions (NKI 0.6
nki.isa.nc_matmul, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_matmul.html),
so every step holds weight.T tiles [K, N] (stationary) and z.T tiles [K, rows] (moving), computes
y.T tiles [N, rows] in PSUM and transposes them back for the store.
- `linear_naive`: per (128-row tile, N tile, K tile): load both operands, one matmul into its own
  PSUM tile, then the Vector engine adds it into an fp32 SBUF sum; the bias is a last instruction.
- `linear_psum_accumulate`: the K tiles accumulate in one PSUM tile (accumulate=True after the
  first), and the bias rides the PSUM -> SBUF evacuation (Scalar-engine activation with a bias).
- `linear_weights_stationary`: weight.T loaded once and kept in SBUF; z moves in blocks of 512 rows
  (the largest moving free size), each block loaded once. The loads go in the order the matmuls need
  them (z's first block, then the weights one N tile at a time), so the first matmuls can start while
  later weight tiles are still loading. `kernels.folded_linear_kernel` is this schedule plus LNC=2,
  one store per 128 output rows and N tiles grouped under an SBUF budget.
"""
import nki
import nki.isa as nisa
import nki.language as nl

P = 128            # partitions: the contraction tile and the stationary free size
BLOCK = 512        # moving free size (one fp32 PSUM bank per partition)
DMA_NONE = nisa.dge_mode.none          # dma_copy: descriptors prebuilt before the kernel runs
# A direct dma_transpose takes only unknown or hwdge (nki.isa.dma_transpose, "DMA Direct Transpose Constraints":
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_transpose.html; the
# DGE page also lists none, but the instruction's reference wins). hwdge needs 16-row sources: the compiler chooses.
DMA_TRANSPOSE = nisa.dge_mode.unknown


def _count(total, size):
    """How many size-wide tiles cover range(total) (the last one may be partial)."""
    return (total + size - 1) // size


def _load_z_t(z, z_t, r0, rr):
    """z rows [r0, r0+rr) into z_t [P, K tiles, rr] as z.T, one 128x128 DMA transpose per piece."""
    hidden = z.shape[1]
    for c0 in range(0, rr, P):
        rc = min(P, rr - c0)
        for kt in range(_count(hidden, P)):
            k0 = kt * P
            kk = min(P, hidden - k0)
            nisa.dma_transpose(dst=z_t[0:kk, kt, c0:c0 + rc], src=z[r0 + c0:r0 + c0 + rc, k0:k0 + kk],
                               dge_mode=DMA_TRANSPOSE, name="load_z")


def _load_w_t(weight, w_t, j, n0, nn):
    """weight rows [n0, n0+nn) into w_t[:, j] as weight.T [P, K tiles, nn]."""
    hidden = weight.shape[1]
    for kt in range(_count(hidden, P)):
        k0 = kt * P
        kk = min(P, hidden - k0)
        nisa.dma_transpose(dst=w_t[0:kk, j, kt, 0:nn], src=weight[n0:n0 + nn, k0:k0 + kk],
                           dge_mode=DMA_TRANSPOSE, name="load_w")


def _store_y_t(y, y_t, r0, rr, n0, nn):
    """A y.T tile [nn, rr] in SBUF back to rows of y, via 128-row DMA transposes."""
    for c0 in range(0, rr, P):
        rc = min(P, rr - c0)
        out = nl.ndarray((P, P), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_transpose(dst=out[0:rc, 0:nn], src=y_t[0:nn, c0:c0 + rc], dge_mode=DMA_TRANSPOSE, name="transpose_y")
        nisa.dma_copy(dst=y[r0 + c0:r0 + c0 + rc, n0:n0 + nn], src=out[0:rc, 0:nn], dge_mode=DMA_NONE,
                      name="store_y")


def _matmul_block(acc, w_t, j, z_t, hidden, nn, rr):
    """acc [nn, rr] = sum over K tiles of w_t[:, j, kt].T @ z_t[:, kt]: PSUM accumulates."""
    for kt in range(_count(hidden, P)):
        kk = min(P, hidden - kt * P)
        nisa.nc_matmul(dst=acc[0:nn, 0:rr], stationary=w_t[0:kk, j, kt, 0:nn], moving=z_t[0:kk, kt, 0:rr],
                       accumulate=kt > 0, name="matmul")


def _evacuate_with_bias(acc, b_col, j, nn, rr):
    """PSUM fp32 -> SBUF bf16 with the bias added on the way (one value per partition)."""
    y_t = nl.ndarray((P, BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.activation(dst=y_t[0:nn, 0:rr], op=nl.copy, data=acc[0:nn, 0:rr], bias=b_col[0:nn, j:j + 1],
                    name="evacuate_bias")
    return y_t


@nki.jit
def linear_naive(z, weight, bias):
    rows, hidden = z.shape
    n_out = weight.shape[0]
    k_tiles = _count(hidden, P)
    y = nl.ndarray((rows, n_out), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for r0 in range(0, rows, P):
        rr = min(P, rows - r0)
        for n0 in range(0, n_out, P):
            nn = min(P, n_out - n0)
            b_col = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=b_col[0:nn, :], src=bias[n0:n0 + nn, :], dge_mode=DMA_NONE, name="load_bias")
            total = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.sbuf)
            for kt in range(k_tiles):
                k0 = kt * P
                kk = min(P, hidden - k0)
                # Both operands reloaded for every tile: the weights once per row tile.
                w_t = nl.ndarray((P, 1, k_tiles, P), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.dma_transpose(dst=w_t[0:kk, 0, kt, 0:nn], src=weight[n0:n0 + nn, k0:k0 + kk],
                                   dge_mode=DMA_TRANSPOSE, name="load_w")
                z_t = nl.ndarray((P, P), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.dma_transpose(dst=z_t[0:kk, 0:rr], src=z[r0:r0 + rr, k0:k0 + kk], dge_mode=DMA_TRANSPOSE,
                                   name="load_z")
                part = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(dst=part[0:nn, 0:rr], stationary=w_t[0:kk, 0, kt, 0:nn], moving=z_t[0:kk, 0:rr],
                               name="matmul")
                if kt == 0:
                    nisa.tensor_copy(dst=total[0:nn, 0:rr], src=part[0:nn, 0:rr], name="sum_k")
                else:
                    nisa.tensor_tensor(dst=total[0:nn, 0:rr], data1=total[0:nn, 0:rr], data2=part[0:nn, 0:rr],
                                       op=nl.add, name="sum_k")
            y_t = nl.ndarray((P, BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=y_t[0:nn, 0:rr], data=total[0:nn, 0:rr], op0=nl.add, operand0=b_col[0:nn, :],
                               name="add_bias")
            _store_y_t(y, y_t, r0, rr, n0, nn)
    return y


@nki.jit
def linear_psum_accumulate(z, weight, bias):
    rows, hidden = z.shape
    n_out = weight.shape[0]
    k_tiles = _count(hidden, P)
    y = nl.ndarray((rows, n_out), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for r0 in range(0, rows, P):
        rr = min(P, rows - r0)
        z_t = nl.ndarray((P, k_tiles, P), dtype=nl.bfloat16, buffer=nl.sbuf)
        _load_z_t(z, z_t, r0, rr)
        for n0 in range(0, n_out, P):
            nn = min(P, n_out - n0)
            b_col = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=b_col[0:nn, :], src=bias[n0:n0 + nn, :], dge_mode=DMA_NONE, name="load_bias")
            w_t = nl.ndarray((P, 1, k_tiles, P), dtype=nl.bfloat16, buffer=nl.sbuf)
            _load_w_t(weight, w_t, 0, n0, nn)            # still reloaded for every row tile
            acc = nl.ndarray((P, P), dtype=nl.float32, buffer=nl.psum)
            _matmul_block(acc, w_t, 0, z_t, hidden, nn, rr)
            _store_y_t(y, _evacuate_with_bias(acc, b_col, 0, nn, rr), r0, rr, n0, nn)
    return y


@nki.jit
def linear_weights_stationary(z, weight, bias):
    rows, hidden = z.shape
    n_out = weight.shape[0]
    n_tiles, k_tiles = _count(n_out, P), _count(hidden, P)
    y = nl.ndarray((rows, n_out), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    w_t = nl.ndarray((P, n_tiles, k_tiles, P), dtype=nl.bfloat16, buffer=nl.sbuf)
    b_col = nl.ndarray((P, n_tiles), dtype=nl.float32, buffer=nl.sbuf)
    first_z = nl.ndarray((P, k_tiles, BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
    _load_z_t(z, first_z, 0, min(BLOCK, rows))   # what the first matmuls need, first
    for j in range(n_tiles):              # then the weights, one N tile at a time
        n0 = j * P
        nn = min(P, n_out - n0)
        nisa.dma_copy(dst=b_col[0:nn, j:j + 1], src=bias[n0:n0 + nn, :], dge_mode=DMA_NONE, name="load_bias")
        _load_w_t(weight, w_t, j, n0, nn)
    for r0 in range(0, rows, BLOCK):
        rr = min(BLOCK, rows - r0)
        z_t = first_z
        if r0 > 0:
            z_t = nl.ndarray((P, k_tiles, BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
            _load_z_t(z, z_t, r0, rr)
        for j in range(n_tiles):
            n0 = j * P
            nn = min(P, n_out - n0)
            acc = nl.ndarray((P, BLOCK), dtype=nl.float32, buffer=nl.psum)
            _matmul_block(acc, w_t, j, z_t, hidden, nn, rr)
            _store_y_t(y, _evacuate_with_bias(acc, b_col, j, nn, rr), r0, rr, n0, nn)
    return y
