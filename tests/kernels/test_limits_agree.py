"""kernels/limits.py keeps its own copy of the trn2 limits the kernels need (they import on a trn2
instance without nkisim); the copy must agree with nkisim.limits, where each is defined once. And the
fold kernel's grouping (kernels/limits.py) must agree with the emulator's SBUF allocation model
(nkisim/README.md, "SBUF allocation model") wherever the input limits accept a shape."""
import warnings

import pytest
import torch

import kernels
import nkisim
from kernels import fold_group_size
from kernels import limits as kernel_limits
from kernels.limits import SBUF_USABLE_BYTES, check_fold_inputs, fold_sbuf_footprint
from nkisim import limits


def test_the_kernels_copy_of_the_trn2_limits_agrees_with_nkisim():
    assert kernel_limits.PMAX == limits.PARTITIONS
    assert kernel_limits.SBUF_USABLE_BYTES == limits.SBUF_USABLE_BYTES_PER_PARTITION


def test_nki_language_tile_sizes_come_from_the_same_limits():
    import nki.language as nl

    assert nl.tile_size.pmax == limits.PARTITIONS
    assert nl.tile_size.sbuf_fmax_bytes == limits.SBUF_USABLE_BYTES_PER_PARTITION


@pytest.mark.parametrize("hidden", [64, 384, 1280, 4096, 16384])
@pytest.mark.parametrize("branches", [1, 2, 3, 4])
def test_the_grouping_and_the_emulator_agree_wherever_the_limits_accept(hidden: int, branches: int) -> None:
    """Every (H, B, R) the input limits accept launches within the usable SBUF, so the compiler spills
    nothing (no NkiSpillWarning, no spill transfers), at the footprint the limits predict (exact from
    two tiles a group; with one, a and b die before the statistics are born): R of 1, 2, G and G + 1
    tiles per program, G the largest group at that (H, B). Where one tile cannot fit, the limits refuse."""
    if fold_sbuf_footprint(1, hidden, branches) > SBUF_USABLE_BYTES:
        with pytest.raises(kernels.KernelInputError, match="single tile"):
            check_fold_inputs((256, hidden), "float32", (branches, 256, hidden), "bfloat16", 2)
        return
    largest = fold_group_size(10**6, hidden, branches)
    for n_tiles in sorted({1, 2, largest, largest + 1}):
        check_fold_inputs((256 * n_tiles, hidden), "float32", (branches, 256 * n_tiles, hidden), "bfloat16", 2)
        a = torch.empty(256 * n_tiles, hidden, device="meta")
        b = torch.empty(branches, 256 * n_tiles, hidden, dtype=torch.bfloat16, device="meta")
        with warnings.catch_warnings():
            warnings.simplefilter("error", nkisim.NkiSpillWarning)
            run = nkisim.run(kernels.res_layernorm_fold_kernel, a, b, 1e-6, kernels.FOLD_SBUF_BUDGET, lnc=2)
        group = fold_group_size(n_tiles, hidden, branches)
        predicted = fold_sbuf_footprint(group, hidden, branches)
        assert run.trace.spills == []
        assert run.sbuf_peak_bytes <= predicted <= SBUF_USABLE_BYTES
        assert run.sbuf_peak_bytes == predicted or group == 1
