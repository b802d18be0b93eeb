"""Fused residual add + affine-free LayerNorm ("fold" kernel): NKI 0.7 for trn2, and its torch op.

    x_new = a + b[0] + ... + b[B-1]            (fp32: the residual stream, carried losslessly)
    z     = (x_new - mean(x_new)) * rstd        (bf16; rstd = 1 / sqrt(var(x_new) + eps))

a is [R, H] fp32, b is [B, R, H] bf16 with 1 <= B <= 4. No gamma/beta: they are folded into the
consumers' weights (kernels/fold.py). The schedule is the published design (kernel-designs §2):
- LNC=2: program p owns rows [p*R/2, (p+1)*R/2); R % (LNC*128) == 0.
- Tiles are processed in groups of G; every tile of a group has its own SBUF slot in
  [128, G, H]-shaped buffers (a, each branch, the fp32 sum), and all loads of a group are issued
  before any compute, one DMA per tile and operand. G comes from the per-partition budget and the
  footprint H*(8+2B) per tile (`fold_group_size`).
- dge_mode.none on every DMA: descriptors are prebuilt by the runtime, no engine generates them.
- The per-tile instructions are the same, in the same order, for every G, so grouped and
  ungrouped runs give bit-identical results.
"""
from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import torch
from torch import nn

from ._backend import OP_NAMESPACE, check_device, check_tensors, launch, logical_nc_config, nki_op
from .limits import (FOLD_MAX_BRANCHES, FOLD_MAX_H, assert_size, check_eps, check_fold_inputs, check_positive_ints,
                     check_size, fold_max_group, fold_sbuf_bytes_per_tile)

FOLD_SBUF_BUDGET = 204_800  # bytes per partition for the group slots (largest footprint that compiled)


def fold_group_size(n_tiles: int, hidden: int, branches: int, budget: int = FOLD_SBUF_BUDGET) -> int:
    """Tiles per group G = max(1, min(n_tiles, budget // (H*(8+2B)), G_fit)); n_tiles is per program.

    budget // (H*(8+2B)) is the published rule for the slots; G_fit (`fold_max_group`), the most
    tiles whose whole footprint (slots, statistic columns and the z tile: `fold_sbuf_footprint`) fits the usable SBUF,
    only binds where the published rule leaves no room for them (H above ~3,900, or tiny H with
    hundreds of tiles). Sizes outside the kernel's limits (1 <= H <= 16384, 1 <= B <= 4) are an
    AssertionError naming the value (this runs inside the kernel too, which validates with assert)."""
    check_positive_ints("fold_group_size", n_tiles=n_tiles, budget=budget)
    assert_size("fold_group_size", "hidden", hidden, 1, FOLD_MAX_H)
    assert_size("fold_group_size", "branches", branches, 1, FOLD_MAX_BRANCHES)
    return max(1, min(n_tiles, budget // fold_sbuf_bytes_per_tile(hidden, branches), fold_max_group(hidden, branches)))


def _assert_fold_operands(a, b):
    """The raw kernel's own check (the torch op checks first, with KernelInputError): a [R, H] fp32,
    b [B, R, H] bf16, R a multiple of programs * 128 (else the last rows would stay unwritten)."""
    kernel = "res_layernorm_fold_kernel"
    assert len(a.shape) == 2 and len(b.shape) == 3, (
        f"{kernel}: a must be 2-D [R, H] and b 3-D [B, R, H], got shapes {a.shape} and {b.shape}"
    )
    assert b.shape[1] == a.shape[0] and b.shape[2] == a.shape[1], (
        f"{kernel}: b has rows x width {b.shape[1:]}, a has {a.shape}; they must match"
    )
    assert a.dtype == nl.float32 and b.dtype == nl.bfloat16, (
        f"{kernel}: a must be float32 and b bfloat16, got {a.dtype} and {b.dtype}"
    )
    step = nl.num_programs(axes=0) * nl.tile_size.pmax
    assert a.shape[0] % step == 0, f"{kernel}: R={a.shape[0]} is not divisible by LNC*128 = {step}"


@nki.jit
def res_layernorm_fold_kernel(a, b, eps, sbuf_budget):
    """(x_new fp32 [R, H], z bf16 [R, H]) from a fp32 [R, H] and b bf16 [B, R, H]; launch as [LNC]."""
    _assert_fold_operands(a, b)
    rows_total, hidden = a.shape
    branches = b.shape[0]
    pmax = nl.tile_size.pmax
    x_new = nl.ndarray((rows_total, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    z_out = nl.ndarray((rows_total, hidden), dtype=nl.bfloat16, buffer=nl.shared_hbm)

    rows_per_program = rows_total // nl.num_programs(axes=0)
    first_row = nl.program_id(0) * rows_per_program
    n_tiles = rows_per_program // pmax
    group = fold_group_size(n_tiles, hidden, branches, sbuf_budget)
    dma_none = nisa.dge_mode.none

    for g0 in range(0, n_tiles, group):
        tiles = min(group, n_tiles - g0)
        # One slot per tile of the group; statistics get one column per tile so tile t+1's
        # chain never waits on tile t's.
        a_slots = nl.ndarray((pmax, tiles, hidden), dtype=nl.float32, buffer=nl.sbuf)
        b_slots = []
        for _ in range(branches):
            b_slots.append(nl.ndarray((pmax, tiles, hidden), dtype=nl.bfloat16, buffer=nl.sbuf))
        s_slots = nl.ndarray((pmax, tiles, hidden), dtype=nl.float32, buffer=nl.sbuf)
        neg_shift = nl.ndarray((pmax, tiles), dtype=nl.float32, buffer=nl.sbuf)
        acc = nl.ndarray((pmax, tiles), dtype=nl.float32, buffer=nl.sbuf)
        neg_mu = nl.ndarray((pmax, tiles), dtype=nl.float32, buffer=nl.sbuf)
        acc2 = nl.ndarray((pmax, tiles), dtype=nl.float32, buffer=nl.sbuf)
        var = nl.ndarray((pmax, tiles), dtype=nl.float32, buffer=nl.sbuf)
        rstd = nl.ndarray((pmax, tiles), dtype=nl.float32, buffer=nl.sbuf)

        # All loads of the group first, so no load waits behind an earlier tile's stores.
        for j in range(tiles):
            r0 = first_row + (g0 + j) * pmax
            nisa.dma_copy(dst=a_slots[:, j, :], src=a[r0:r0 + pmax, :], dge_mode=dma_none, name="load_a")
            for k in range(branches):
                nisa.dma_copy(
                    dst=b_slots[k][:, j, :], src=b[k, r0:r0 + pmax, :], dge_mode=dma_none, name=f"load_b{k}"
                )

        for j in range(tiles):
            r0 = first_row + (g0 + j) * pmax
            s = s_slots[:, j, :]
            nisa.tensor_tensor(dst=s, data1=a_slots[:, j, :], data2=b_slots[0][:, j, :], op=nl.add, name="add_b0")
            for k in range(1, branches):
                nisa.tensor_tensor(dst=s, data1=s, data2=b_slots[k][:, j, :], op=nl.add, name=f"add_b{k}")
            nisa.dma_copy(dst=x_new[r0:r0 + pmax, :], src=s, dge_mode=dma_none, name="store_x")

            # Shift by the row's first element so the sums below stay well conditioned.
            nisa.tensor_scalar(
                dst=neg_shift[:, j:j + 1], data=s[:, 0:1], op0=nl.multiply, operand0=-1.0, name="neg_shift"
            )
            # z's bf16 tile doubles as the discarded elementwise output of the two reductions.
            z = nl.ndarray((pmax, hidden), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.activation_reduce(
                dst=z, op=nl.copy, data=s, reduce_op=nl.add, reduce_res=acc[:, j:j + 1],
                bias=neg_shift[:, j:j + 1], name="sum_shifted",
            )
            nisa.tensor_scalar(
                dst=neg_mu[:, j:j + 1], data=acc[:, j:j + 1], op0=nl.multiply, operand0=-1.0 / hidden,
                op1=nl.add, operand1=neg_shift[:, j:j + 1], name="neg_mean",
            )
            nisa.activation_reduce(
                dst=z, op=nl.square, data=s, reduce_op=nl.add, reduce_res=acc2[:, j:j + 1],
                bias=neg_mu[:, j:j + 1], name="sum_squares",
            )
            nisa.tensor_scalar(
                dst=var[:, j:j + 1], data=acc2[:, j:j + 1], op0=nl.multiply, operand0=1.0 / hidden,
                op1=nl.add, operand1=eps, name="var_eps",
            )
            nisa.activation(dst=rstd[:, j:j + 1], op=nl.rsqrt, data=var[:, j:j + 1], name="rstd")
            # One two-op instruction normalizes; the bf16 cast rides the write.
            nisa.tensor_scalar(
                dst=z, data=s, op0=nl.add, operand0=neg_mu[:, j:j + 1], op1=nl.multiply,
                operand1=rstd[:, j:j + 1], name="normalize",
            )
            nisa.dma_copy(dst=z_out[r0:r0 + pmax, :], src=z, dge_mode=dma_none, name="store_z")
    return x_new, z_out


@nki_op(f"{OP_NAMESPACE}::res_layernorm_fold", mutates_args={})
def res_layernorm_fold_op(
    a: torch.Tensor, b: torch.Tensor, eps: float, sbuf_budget: int = FOLD_SBUF_BUDGET
) -> tuple[torch.Tensor, torch.Tensor]:
    """Custom op: validate, then launch the kernel on LNC cores."""
    lnc = logical_nc_config()
    check_fold_inputs(a.shape, a.dtype, b.shape, b.dtype, lnc)
    check_eps("res_layernorm_fold", eps)
    check_device("res_layernorm_fold", a=a, b=b)
    return launch(res_layernorm_fold_kernel, lnc, a, b, eps, sbuf_budget)


def res_layernorm_fold(
    a: torch.Tensor, b: torch.Tensor, eps: float, sbuf_budget: int = FOLD_SBUF_BUDGET
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_new fp32 [R, H], z bf16 [R, H]) = residual add of b's B branches into a, then LayerNorm
    without affine. Inference only. `sbuf_budget` (bytes per partition) sizes the tile groups.

    a and b are torch tensors (a NumPy array or a list is a KernelTypeError saying how to convert it:
    b must be bfloat16, which NumPy has not); eps any real number in nl.rsqrt's valid range, NumPy
    scalars included; sbuf_budget an int >= 1. Every other limit is in kernels/README.md."""
    check_tensors("res_layernorm_fold", a=a, b=b)
    check_size("res_layernorm_fold", "sbuf_budget", sbuf_budget)
    if torch.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        raise RuntimeError(
            "res_layernorm_fold is inference only (no backward): call it under torch.no_grad() "
            "or torch.inference_mode(), or pass tensors that do not require grad"
        )
    check_eps("res_layernorm_fold", eps)  # before the op's float schema turns True into 1.0
    return res_layernorm_fold_op(a, b, float(eps), sbuf_budget)


residual_layernorm_fold = res_layernorm_fold  # alias export name


class ResLayerNormFold(nn.Module):
    """Stateless layer form: forward(a, b) -> (x_new, z) with the host module's `eps` (hub layer API).

    z is affine-free: feed it only to consumers folded with `fold_affine_into_linear`."""

    eps: float = 1e-6

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return res_layernorm_fold(a, b, self.eps)
