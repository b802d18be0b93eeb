"""The fold's consumer on the Tensor engine: y = z @ weight.T + bias, NKI 0.7 for trn2, and its torch op.

z is the fold kernel's affine-free output [R, H] bf16; weight [N, H] bf16 (nn.Linear layout) and
bias [N] fp32 already carry the LayerNorm's gamma and beta (`fold_affine_into_linear`). Tensor-engine
semantics (nki.isa.nc_matmul, the same in NKI 0.6 and 0.7,
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.nc_matmul.html):
`nc_matmul(dst[M, N], stationary[K, M], moving[K, N])` computes stationary.T @ moving with the
contraction K on the partitions (K <= 128), M <= 128, N <= 512, fp32 accumulation in PSUM; the first
matmul into a PSUM location overwrites it and later ones add (accumulate=None).

Schedule:
- The weight is the stationary operand: a [128 (K), <=128 (N)] tile of weight.T per (K tile,
  N tile), loaded once per program with dma_transpose and kept in SBUF for every row block
  (groups of N tiles when all of weight.T does not fit `weight_budget` bytes per partition).
- z moves: a row block of up to 512 rows is loaded transposed, [128 (K), K tiles, 512 (rows)].
  The first block's loads are issued before the weights', so compute starts while weights load.
- Per (row block, N tile) the K tiles accumulate into one fp32 PSUM bank [N tile, rows]; the bias,
  one fp32 value per partition there, is added by the Scalar-engine activation that evacuates PSUM
  to SBUF as bf16. dma_transpose turns [N, rows] back into [rows, N] for the store.
- LNC=2: program p owns rows [p*ceil(R/2), min(R, (p+1)*ceil(R/2))).
Partial tiles (R, N or H not multiples of 128 / 512) take the remainder sizes.
"""
from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import torch

from ._backend import OP_NAMESPACE, check_device, check_tensors, launch, logical_nc_config, nki_op
from .limits import (
    FOLDED_LINEAR_WEIGHT_BUDGET,
    KernelTypeError,
    check_folded_linear_inputs,
    check_size,
    folded_linear_weight_group,
)

ROW_BLOCK = 512   # moving free size: rows per matmul (gemm_moving_fmax, one fp32 PSUM bank)


def _load_z_block(z, z_t, r0, rr, dge):
    """z rows [r0, r0+rr) into z_t [128, K tiles, rr] as z.T, one DMA transpose per 128x128 piece."""
    pmax = nl.tile_size.pmax
    hidden = z.shape[1]
    for c0 in range(0, rr, pmax):
        rc = min(pmax, rr - c0)
        for kt in range((hidden + pmax - 1) // pmax):
            k0 = kt * pmax
            kk = min(pmax, hidden - k0)
            nisa.dma_transpose(dst=z_t[0:kk, kt, c0:c0 + rc], src=z[r0 + c0:r0 + c0 + rc, k0:k0 + kk],
                               dge_mode=dge, name="load_z")


@nki.jit
def folded_linear_kernel(z, weight, bias, weight_budget):
    """y bf16 [R, N] = z [R, H] @ weight[N, H].T + bias [N, 1] (fp32); launch as kernel[LNC]."""
    rows_total, hidden = z.shape
    n_out = weight.shape[0]
    pmax = nl.tile_size.pmax
    y = nl.ndarray((rows_total, n_out), dtype=nl.bfloat16, buffer=nl.shared_hbm)

    share = (rows_total + nl.num_programs(axes=0) - 1) // nl.num_programs(axes=0)
    first_row = nl.program_id(0) * share
    last_row = min(rows_total, first_row + share)
    k_tiles = (hidden + pmax - 1) // pmax
    n_tiles = (n_out + pmax - 1) // pmax
    group = folded_linear_weight_group(hidden, n_tiles, weight_budget)
    dma_none = nisa.dge_mode.none   # dma_copy: descriptors prebuilt by the runtime, as in the fold kernel
    # A direct dma_transpose takes only unknown or hwdge (nki.isa.dma_transpose, "DMA Direct Transpose
    # Constraints": https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_transpose.html;
    # the DGE page also lists none, but the instruction's reference wins). hwdge needs 16-row sources, so the
    # 128x128 pieces here let the compiler choose.
    dma_transpose_mode = nisa.dge_mode.unknown

    for g0 in range(0, n_tiles, group):
        g_tiles = min(group, n_tiles - g0)
        # z's first block is loaded first, then the weights one N tile at a time: the first matmuls
        # need only these, so they start while the group's other weight tiles are still loading.
        z_first = nl.ndarray((pmax, k_tiles, ROW_BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
        _load_z_block(z, z_first, first_row, min(ROW_BLOCK, last_row - first_row), dma_transpose_mode)
        # weight.T tiles of this group, stationary for every row block below.
        w_t = nl.ndarray((pmax, g_tiles, k_tiles, pmax), dtype=nl.bfloat16, buffer=nl.sbuf)
        b_col = nl.ndarray((pmax, g_tiles), dtype=nl.float32, buffer=nl.sbuf)
        for j in range(g_tiles):
            n0 = (g0 + j) * pmax
            nn = min(pmax, n_out - n0)
            nisa.dma_copy(dst=b_col[0:nn, j:j + 1], src=bias[n0:n0 + nn, :], dge_mode=dma_none, name="load_bias")
            for kt in range(k_tiles):
                k0 = kt * pmax
                kk = min(pmax, hidden - k0)
                nisa.dma_transpose(dst=w_t[0:kk, j, kt, 0:nn], src=weight[n0:n0 + nn, k0:k0 + kk],
                                   dge_mode=dma_transpose_mode, name="load_w")

        for r0 in range(first_row, last_row, ROW_BLOCK):
            rr = min(ROW_BLOCK, last_row - r0)
            z_t = z_first
            if r0 > first_row:
                z_t = nl.ndarray((pmax, k_tiles, ROW_BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
                _load_z_block(z, z_t, r0, rr, dma_transpose_mode)
            # Output rows of this block, [rows, N] per 128-row chunk, stored once the group's N tiles are in.
            y_rows = nl.ndarray((pmax, ROW_BLOCK // pmax, n_out), dtype=nl.bfloat16, buffer=nl.sbuf)
            for j in range(g_tiles):
                n0 = (g0 + j) * pmax
                nn = min(pmax, n_out - n0)
                acc = nl.ndarray((pmax, ROW_BLOCK), dtype=nl.float32, buffer=nl.psum)
                for kt in range(k_tiles):
                    kk = min(pmax, hidden - kt * pmax)
                    nisa.nc_matmul(dst=acc[0:nn, 0:rr], stationary=w_t[0:kk, j, kt, 0:nn],
                                   moving=z_t[0:kk, kt, 0:rr], accumulate=kt > 0, name="matmul")
                # Evacuate PSUM with the bias added (one fp32 value per partition = per output column).
                y_t = nl.ndarray((pmax, ROW_BLOCK), dtype=nl.bfloat16, buffer=nl.sbuf)
                nisa.activation(dst=y_t[0:nn, 0:rr], op=nl.copy, data=acc[0:nn, 0:rr], bias=b_col[0:nn, j:j + 1],
                                name="evacuate_bias")
                for c0 in range(0, rr, pmax):
                    rc = min(pmax, rr - c0)
                    nisa.dma_transpose(dst=y_rows[0:rc, c0 // pmax, n0:n0 + nn], src=y_t[0:nn, c0:c0 + rc],
                                       dge_mode=dma_transpose_mode, name="transpose_y")
            lo = g0 * pmax
            hi = min(n_out, (g0 + g_tiles) * pmax)
            for c0 in range(0, rr, pmax):
                rc = min(pmax, rr - c0)
                nisa.dma_copy(dst=y[r0 + c0:r0 + c0 + rc, lo:hi], src=y_rows[0:rc, c0 // pmax, lo:hi],
                              dge_mode=dma_none, name="store_y")
    return y


@nki_op(f"{OP_NAMESPACE}::folded_linear", mutates_args={})
def folded_linear_op(
    z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, weight_budget: int = FOLDED_LINEAR_WEIGHT_BUDGET
) -> torch.Tensor:
    """Custom op: validate, then launch the kernel on LNC cores (bias as an [N, 1] column)."""
    lnc = logical_nc_config()
    check_folded_linear_inputs(z.shape, z.dtype, weight.shape, weight.dtype, bias.shape, bias.dtype, lnc)
    check_device("folded_linear", z=z, weight=weight, bias=bias)
    return launch(folded_linear_kernel, lnc, z, weight, bias.reshape(-1, 1), weight_budget)


def folded_linear(
    z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, weight_budget: int = FOLDED_LINEAR_WEIGHT_BUDGET
) -> torch.Tensor:
    """y bf16 [R, N] = z @ weight.T + bias with fp32 accumulation: the fold's z [R, H] bf16 through a
    consumer folded by `fold_affine_into_linear` (weight [N, H] bf16, bias [N] fp32). Inference only.
    `weight_budget` (bytes per partition, an int >= 1) bounds the weight.T tiles kept in SBUF.
    z, weight and bias are torch tensors; bias None is refused (a folded consumer always has a bias)."""
    if bias is None:
        raise KernelTypeError(
            "folded_linear: bias must be a torch.Tensor [N] float32, got None; a consumer folded by "
            "fold_affine_into_linear always has one (W @ beta + c): pass folded.bias.float(), or torch.zeros(N) "
            "for a Linear without bias and a LayerNorm without beta")
    check_tensors("folded_linear", z=z, weight=weight, bias=bias)
    check_size("folded_linear", "weight_budget", weight_budget)
    if torch.is_grad_enabled() and any(t.requires_grad for t in (z, weight, bias)):
        raise RuntimeError(
            "folded_linear is inference only (no backward): call it under torch.no_grad() "
            "or torch.inference_mode(), or pass tensors that do not require grad"
        )
    return folded_linear_op(z, weight, bias, weight_budget)
