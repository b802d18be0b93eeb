"""Every lesson version of the residual-add + LayerNorm fold kernel (notebooks/lesson_kernels/layernorm_*.py)
is correct against kernels.reference, and the versions the lessons call bit-identical are."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "notebooks"))

import nkisim  # noqa: E402

nkisim.install()

import kernels  # noqa: E402
from lesson_kernels import (layernorm_affine, layernorm_dge, layernorm_grouped, layernorm_loads_first,  # noqa: E402
                            layernorm_naive, layernorm_thinned)
from lesson_kernels.layernorm_check import EPS, assert_bit_identical, check_fold, fold_inputs  # noqa: E402

BUDGET = kernels.FOLD_SBUF_BUDGET

# (kernel, extra compile-time args) for every lesson version from lesson 10 on, in lesson order: the
# shifted chain, so the same per-tile instructions (and bits) as kernels.res_layernorm_fold_kernel.
SHIFTED_FAMILY = [
    (layernorm_thinned.res_layernorm_thinned, ()),
    (layernorm_dge.res_layernorm_swdge, ()),
    (layernorm_dge.res_layernorm_hwdge, ()),
    (layernorm_dge.res_layernorm_dge_none, ()),
    (layernorm_loads_first.res_layernorm_ring, ()),
    (layernorm_loads_first.res_layernorm_loads_first, ()),
    (layernorm_grouped.res_layernorm_grouped, (BUDGET,)),
]
NAIVE_FAMILY = [(layernorm_naive.res_layernorm_naive, ()), (layernorm_grouped.res_layernorm_grouped_naive_chain,
                                                            (BUDGET,))]


def run(kernel, a, b, *extra, lnc=1):
    return nkisim.run(kernel, a, b, EPS, *extra, lnc=lnc).outputs


@pytest.mark.parametrize("branches", [1, 3])
def test_every_lesson_version_matches_the_reference(branches: int) -> None:
    a, b = fold_inputs(256, 64, branches, seed=branches)
    for kernel, extra in [*NAIVE_FAMILY, *SHIFTED_FAMILY]:
        check_fold(run(kernel, a, b, *extra), a, b)


def test_naive_chain_gives_the_same_bits_in_any_schedule() -> None:
    a, b = fold_inputs(640, 96, 2, seed=5)  # 5 tiles
    naive, grouped = (run(k, a, b, *extra) for k, extra in NAIVE_FAMILY)
    assert_bit_identical(naive, grouped)


def test_shifted_family_is_bit_identical_to_the_kernels_package() -> None:
    """Lessons 11-13 change descriptor modes, schedule and grouping only: the bits of lesson 10, and of
    kernels.res_layernorm_fold_kernel at any LNC."""
    a, b = fold_inputs(640, 96, 2, seed=7)  # 5 tiles: the ring wraps
    thinned = run(layernorm_thinned.res_layernorm_thinned, a, b)
    for kernel, extra in SHIFTED_FAMILY[1:]:
        assert_bit_identical(thinned, run(kernel, a, b, *extra))
    a, b = fold_inputs(512, 128, 2, seed=7)
    thinned = run(layernorm_thinned.res_layernorm_thinned, a, b)
    for lnc in (1, 2):
        assert_bit_identical(thinned, run(kernels.res_layernorm_fold_kernel, a, b, BUDGET, lnc=lnc))


@pytest.mark.parametrize("tiles_per_group", [1, 2, 3])
def test_grouping_is_bit_identical_for_any_group_size(tiles_per_group: int) -> None:
    a, b = fold_inputs(640, 96, 2, seed=6)
    budget = tiles_per_group * kernels.fold_sbuf_bytes_per_tile(96, 2)
    ungrouped = run(layernorm_loads_first.res_layernorm_loads_first, a, b)
    assert_bit_identical(ungrouped, run(layernorm_grouped.res_layernorm_grouped, a, b, budget))


def test_shifted_chain_survives_a_large_row_mean_where_one_pass_fails() -> None:
    a, b = fold_inputs(128, 384, 1, seed=8, mean=1000.0)
    check_fold(run(layernorm_thinned.res_layernorm_thinned, a, b), a, b)
    with pytest.raises(AssertionError, match="max \\|z - z_ref\\|"):
        check_fold(run(layernorm_thinned.res_layernorm_onepass, a, b), a, b)


def test_loads_first_without_grouping_runs_out_of_sbuf_and_grouping_fits() -> None:
    a, b = torch.zeros(8192, 384), torch.zeros(1, 8192, 384, dtype=torch.bfloat16)
    with pytest.raises(nkisim.NkiValidationError, match="SBUF capacity"):
        nkisim.run(layernorm_loads_first.res_layernorm_loads_first, a, b, EPS, dry_run=True)
    peak = nkisim.run(layernorm_grouped.res_layernorm_grouped, a, b, EPS, BUDGET, dry_run=True).sbuf_peak_bytes
    assert peak <= nkisim.SBUF_USABLE_BYTES_PER_PARTITION


@pytest.mark.parametrize("lnc", [1, 2])
def test_the_affine_kernel_is_layernorm_with_gamma_and_beta(lnc: int) -> None:
    """Lesson 15's "before": the finished schedule with LayerNorm's own affine; x_new is the same."""
    a, b = fold_inputs(512, 128, 2, seed=9)
    gen = torch.Generator().manual_seed(9)
    gamma, beta = 1 + 0.5 * torch.randn(1, 128, generator=gen), 0.3 * torch.randn(1, 128, generator=gen)
    x_new, z = nkisim.run(layernorm_affine.res_layernorm_affine, a, b, gamma, beta, EPS, BUDGET, lnc=lnc).outputs
    folded_x, _ = run(kernels.res_layernorm_fold_kernel, a, b, BUDGET, lnc=lnc)
    assert torch.equal(x_new, folded_x)
    want = torch.nn.functional.layer_norm(folded_x.double(), (128,), gamma[0].double(), beta[0].double(), EPS)
    assert z.dtype == torch.bfloat16 and (z.double() - want).abs().max() <= 2 ** -6 * want.abs().max()


def test_lesson_kernels_reject_partial_tiles() -> None:
    a, b = fold_inputs(200, 64, 1)
    with pytest.raises(AssertionError, match="R=200 is not divisible by 128"):
        nkisim.run(layernorm_naive.res_layernorm_naive, a, b, EPS)


def test_dge_modes_reach_the_trace() -> None:
    a, b = fold_inputs(128, 64, 1)
    for kernel, mode in ((layernorm_thinned.res_layernorm_thinned, "unknown"), (layernorm_dge.res_layernorm_swdge, "swdge"),
                         (layernorm_dge.res_layernorm_hwdge, "hwdge"), (layernorm_dge.res_layernorm_dge_none, "none")):
        trace = nkisim.run(kernel, a, b, EPS, dry_run=True).trace
        assert {i.dma.dge_mode for i in trace if i.dma is not None} == {mode}


def test_check_fold_catches_a_wrong_kernel_output() -> None:
    """The lessons' checker itself fails on a wrong z and on an inexact x_new."""
    a, b = fold_inputs(128, 64, 1)
    x_new, z = run(layernorm_naive.res_layernorm_naive, a, b)
    with pytest.raises(AssertionError):
        check_fold((x_new, (z.float() * 1.05).to(torch.bfloat16)), a, b)
    with pytest.raises(AssertionError):
        check_fold((x_new + 1e-3, z), a, b)
    with pytest.raises(AssertionError):
        assert_bit_identical((x_new, z), (x_new, (z.float() + 2 ** -6).to(torch.bfloat16)))
