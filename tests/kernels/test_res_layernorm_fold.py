"""Residual add + affine-free LayerNorm fold kernel: numerics, schedule, sharding, SBUF, limits."""
from __future__ import annotations

import pytest
import torch

import kernels
import nkisim
from kernels import (
    fold_group_size,
    fold_sbuf_bytes_per_tile,
    reference,
    res_layernorm_fold,
    res_layernorm_fold_kernel,
)
from kernels.limits import SBUF_USABLE_BYTES, fold_sbuf_footprint

from kernels.reference import bf16_ulp

EPS = 1e-6


def _inputs(rows: int, hidden: int, branches: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    a = 4 * torch.randn(rows, hidden, generator=gen) + 3  # a mean offset exercises the shift
    b = torch.randn(branches, rows, hidden, generator=gen).bfloat16()
    return a, b


@pytest.mark.parametrize("hidden", [384, 768, 1024, 1280])
@pytest.mark.parametrize("branches", [1, 2, 3, 4])
def test_matches_fp32_reference_for_vit_widths_and_branch_counts(lnc2: int, hidden: int, branches: int) -> None:
    a, b = _inputs(256, hidden, branches, seed=hidden + branches)
    with torch.no_grad():
        x_new, z = res_layernorm_fold(a, b, EPS)
    x_ref, z_ref = reference.res_layernorm_fold_reference(a, b, EPS)
    assert x_new.dtype == torch.float32 and z.dtype == torch.bfloat16
    assert torch.equal(x_new, x_ref)  # the fp32 sum, exactly
    # z within one bf16 rounding (plus fp32-statistics noise) of the unrounded reference.
    excess = (z.float() - z_ref).abs() - bf16_ulp(z_ref)
    assert excess.max().item() <= 1e-6


def _run(a: torch.Tensor, b: torch.Tensor, budget: int, lnc: int = 2, dry_run: bool = False) -> nkisim.Run:
    return nkisim.run(res_layernorm_fold_kernel, a, b, EPS, budget, lnc=lnc, dry_run=dry_run)


def test_grouped_and_ungrouped_runs_are_bit_identical() -> None:
    a, b = _inputs(1792, 384, 2)  # 7 tiles per program
    per_tile = fold_sbuf_bytes_per_tile(384, 2)
    assert fold_group_size(7, 384, 2, 3 * per_tile) == 3  # groups of 3, 3, 1
    ungrouped = _run(a, b, budget=10**9)
    grouped = _run(a, b, budget=3 * per_tile)
    for one, other in zip(ungrouped.outputs, grouped.outputs):
        assert torch.equal(one, other)
    # Same per-tile instructions in the same order: only the DMA loads move.
    for program in (0, 1):
        compute = [[(i.isa, i.name) for i in run.trace.program(program) if i.isa != "dma_copy"] for run in (ungrouped, grouped)]
        assert compute[0] == compute[1]


def _loads_before_first_add(trace: nkisim.Trace, program: int) -> int:
    count = 0
    for ins in trace.program(program):
        if ins.isa == "tensor_tensor":
            return count
        count += ins.name.startswith("load")
    raise AssertionError("no add in the trace")


def test_all_loads_of_a_group_come_before_any_compute() -> None:
    a, b = _inputs(1792, 384, 2)
    ungrouped = _run(a, b, budget=10**9, dry_run=True)
    grouped = _run(a, b, budget=3 * fold_sbuf_bytes_per_tile(384, 2), dry_run=True)
    assert _loads_before_first_add(ungrouped.trace, 0) == 7 * 3  # every tile: a + 2 branches
    assert _loads_before_first_add(grouped.trace, 0) == 3 * 3


def test_every_dma_uses_prebuilt_descriptors() -> None:
    a, b = _inputs(512, 384, 3)
    trace = _run(a, b, budget=kernels.FOLD_SBUF_BUDGET, dry_run=True).trace
    dmas = [ins for ins in trace if ins.isa == "dma_copy"]
    # per program: 2 tiles x (a + 3 branches loaded, x_new + z stored)
    assert len(dmas) == 2 * 2 * 6
    assert {ins.dma.dge_mode for ins in dmas} == {"none"}


def test_lnc2_shards_cover_every_row_exactly_once() -> None:
    rows, hidden = 1024, 384
    a, b = _inputs(rows, hidden, 1)
    run = _run(a, b, budget=kernels.FOLD_SBUF_BUDGET)
    written: dict[str, list[int]] = {"store_x": [], "store_z": []}
    for ins in run.trace:
        if ins.name in written:
            region = ins.writes[0].region
            assert (region.f_hi - region.f_lo) == 128 * hidden
            written[ins.name].extend(range(region.f_lo // hidden, region.f_hi // hidden))
    for rows_written in written.values():
        assert sorted(rows_written) == list(range(rows))
    programs = {ins.program_id: set() for ins in run.trace}
    for ins in run.trace:
        if ins.name == "store_x":
            programs[ins.program_id].add(ins.writes[0].region.f_lo // hidden // 512)
    assert programs == {0: {0}, 1: {1}}  # program p owns rows [p*R/2, (p+1)*R/2)
    x_ref, _ = reference.res_layernorm_fold_reference(a, b, EPS)
    assert torch.equal(run.outputs[0], x_ref)


def test_lnc1_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    a, b = _inputs(128, 384, 1)  # divisible by 1*128, not by 2*128
    with torch.no_grad():
        x_new, z = res_layernorm_fold(a, b, EPS)
    x_ref, z_ref = reference.res_layernorm_fold_reference(a, b, EPS)
    assert torch.equal(x_new, x_ref)
    assert ((z.float() - z_ref).abs() - bf16_ulp(z_ref)).max().item() <= 1e-6


def test_group_size_formula_and_published_footprints() -> None:
    assert fold_sbuf_bytes_per_tile(1280, 1) * 16 == 204_800  # ViT-H+, 16 tiles: compiled
    assert fold_sbuf_bytes_per_tile(384, 1) * 56 == 215_040  # ViT-S, 56 tiles: did not fit
    assert fold_group_size(16, 1280, 1) == 16
    assert fold_group_size(56, 384, 1) == 53
    assert fold_group_size(4, 16384, 4) == 1  # never below one tile
    assert fold_group_size(3, 384, 1) == 3  # never above the tile count


def test_vit_s_56_tiles_now_fits_sbuf_by_grouping() -> None:
    a, b = _inputs(2 * 56 * 128, 384, 1)
    grouped = _run(a, b, budget=kernels.FOLD_SBUF_BUDGET, dry_run=True)
    assert max(grouped.trace.sbuf_peak_bytes_per_partition.values()) <= SBUF_USABLE_BYTES
    # A budget with no room left for the statistics and z tile is capped to what fits (the
    # pre-v1.7 all-at-once failure of the published kernel itself is tests/nkisim/test_sbuf_allocation.py's).
    assert fold_group_size(56, 384, 1, 10**9) == kernels.limits.fold_max_group(384, 1) == 54
    capped = _run(a, b, budget=10**9, dry_run=True)
    assert max(capped.trace.sbuf_peak_bytes_per_partition.values()) == fold_sbuf_footprint(54, 384, 1)


def test_vit_h_16_tiles_fits_in_one_group() -> None:
    a, b = _inputs(2 * 16 * 128, 1280, 1)
    run = _run(a, b, budget=kernels.FOLD_SBUF_BUDGET, dry_run=True)
    assert _loads_before_first_add(run.trace, 0) == 16 * 2
    assert max(run.trace.sbuf_peak_bytes_per_partition.values()) <= SBUF_USABLE_BYTES


def test_custom_op_and_alias_are_exported() -> None:
    assert kernels.residual_layernorm_fold is res_layernorm_fold
    a, b = _inputs(256, 384, 1)
    x_new, z = torch.ops.nki_workshop.res_layernorm_fold(a, b, EPS)
    assert x_new.shape == z.shape == (256, 384)


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "a_dtype", "b_dtype", "message"),
    [
        ((300, 384), (1, 300, 384), torch.float32, torch.bfloat16, "R=300 is not divisible by LNC*128 = 256"),
        ((256, 0), (1, 256, 0), torch.float32, torch.bfloat16, "a has shape (256, 0); need R >= 1 and H >= 1"),
        ((0, 384), (1, 0, 384), torch.float32, torch.bfloat16, "a has shape (0, 384); need R >= 1 and H >= 1"),
        ((256, 384), (1, 256, 383), torch.float32, torch.bfloat16, "b has rows x width (256, 383), a has (256, 384)"),
        ((256, 384), (1, 512, 384), torch.float32, torch.bfloat16, "b has rows x width (512, 384), a has (256, 384)"),
        ((256, 384), (0, 256, 384), torch.float32, torch.bfloat16, "B=0 branches; need 1 <= B <= 4"),
        ((256, 384), (5, 256, 384), torch.float32, torch.bfloat16, "B=5 branches; need 1 <= B <= 4"),
        ((256, 16385), (1, 256, 16385), torch.float32, torch.bfloat16, "H=16385 > 16384"),
        ((256, 16384), (2, 256, 16384), torch.float32, torch.bfloat16, "H=16384 with B=2 needs 229,400 B of SBUF"),
        ((256, 384), (256, 384), torch.float32, torch.bfloat16, "b must be 3-D [B, R, H], got shape (256, 384)"),
        ((256, 384), (1, 256, 384), torch.bfloat16, torch.bfloat16, "a must be float32 (the residual stream), got bfloat16"),
        ((256, 384), (1, 256, 384), torch.float32, torch.float32, "b must be bfloat16 (the branch outputs), got float32"),
    ],
)
def test_limits_have_clear_messages(lnc2: int, a_shape, b_shape, a_dtype, b_dtype, message: str) -> None:
    a, b = torch.zeros(a_shape, dtype=a_dtype), torch.zeros(b_shape, dtype=b_dtype)
    with pytest.raises(kernels.KernelInputError) as err:
        res_layernorm_fold(a, b, EPS)
    assert message in str(err.value)


def test_the_largest_width_runs_with_one_branch(lnc2: int) -> None:
    a, b = _inputs(256, 16384, 1)
    run = _run(a, b, budget=kernels.FOLD_SBUF_BUDGET, dry_run=True)
    assert max(run.trace.sbuf_peak_bytes_per_partition.values()) <= SBUF_USABLE_BYTES


def test_unsupported_lnc_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "4")
    a, b = _inputs(512, 384, 1)
    with pytest.raises(kernels.KernelInputError, match="LNC=4; trn2 supports LNC 1 or 2"):
        res_layernorm_fold(a, b, EPS)


def test_inputs_requiring_grad_are_refused_with_the_fix(lnc2: int) -> None:
    a, b = _inputs(256, 384, 1)
    with pytest.raises(RuntimeError, match=r"inference only \(no backward\): call it under torch.no_grad\(\)"):
        res_layernorm_fold(a.requires_grad_(True), b, EPS)
    with torch.no_grad():
        res_layernorm_fold(a, b, EPS)  # the same tensors are fine without autograd
