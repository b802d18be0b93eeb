"""The GELU track's lesson kernels (notebooks/lesson_kernels/gelu_*.py): correct against the PyTorch
reference, and bit-identical to `kernels.gelu_fwd` wherever a lesson step is a version of it."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import nkisim

nkisim.install()

import kernels  # noqa: E402
from kernels import reference  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "notebooks"))

from lesson_kernels import gelu_tuning  # noqa: E402
from lesson_kernels.gelu_naive import gelu_naive_erf  # noqa: E402
from lesson_kernels.gelu_one_tile import gelu_one_tile  # noqa: E402

DTYPES = [torch.float32, torch.bfloat16]
# A shape with full tiles, a partial tile, and (for gelu_fwd_wide) two 256-row blocks plus leftovers.
ROWS, COLS = 600, 48


def _input(rows: int, cols: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    return (3 * torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed))).to(dtype)


def _assert_matches_reference(y: torch.Tensor, x: torch.Tensor) -> None:
    assert y.dtype == x.dtype and y.shape == x.shape
    want = reference.gelu_exact(x)
    if x.dtype == torch.float32:
        torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    else:  # bf16 output: within bf16 rounding of the fp32 reference
        torch.testing.assert_close(y.float(), want, rtol=2**-7, atol=1e-2)


@pytest.mark.parametrize("dtype", DTYPES)
def test_one_tile_matches_reference_and_gelu_fwd(dtype):
    x = _input(128, COLS, dtype)
    y = nkisim.run(gelu_one_tile, x).outputs
    _assert_matches_reference(y, x)
    torch.testing.assert_close(y, nkisim.run(kernels.gelu_fwd, x).outputs, rtol=0, atol=0)


def test_one_tile_is_three_instructions():
    trace = nkisim.run(gelu_one_tile, _input(16, 8, torch.float32)).trace
    assert [(i.engine, i.opcode) for i in trace] == [("DMA", "DMA"), ("Scalar", "ACTIVATE"), ("DMA", "DMA")]


def test_one_tile_rejects_more_than_128_rows():
    with pytest.raises(nkisim.NkiValidationError, match="256 exceeds maximum 128"):
        nkisim.run(gelu_one_tile, _input(256, 8, torch.float32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_naive_erf_matches_reference(dtype):
    x = _input(ROWS, COLS, dtype)
    _assert_matches_reference(nkisim.run(gelu_naive_erf, x).outputs, x)


def test_naive_erf_covers_the_tails():
    """Large |x|, where exp(-x^2/2) underflows and GELU is x or 0, and x = 0 exactly."""
    x = torch.tensor([[-12.0, -6.0, -0.0, 0.0, 1e-6, 6.0, 12.0, 40.0]])
    _assert_matches_reference(nkisim.run(gelu_naive_erf, x).outputs, x)


def test_naive_erf_instruction_mix_per_tile():
    """The lesson's table: 3 ACTIVATE, 6 TENSOR_SCALAR, 1 RECIPROCAL, 8 TENSOR_TENSOR per tile."""
    trace = nkisim.run(gelu_naive_erf, torch.empty(300, 16), dry_run=True).trace  # 3 tiles
    assert trace.counts() == {("DMA", "DMA"): 6, ("Scalar", "ACTIVATE"): 9, ("Vector", "TENSOR_SCALAR"): 18,
                              ("Vector", "RECIPROCAL"): 3, ("Vector", "TENSOR_TENSOR"): 24}




@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "kernel, lnc, kwargs",
    [
        (gelu_tuning.gelu_fwd_double_buffered, 1, {"slots": 1}),
        (gelu_tuning.gelu_fwd_wide, 1, {}),
        (gelu_tuning.gelu_fwd_hwdge, 1, {}),
        (gelu_tuning.gelu_fwd_stream_buffers, 1, {"slots": 2}),
        (gelu_tuning.gelu_fwd_split_columns, 1, {"interleaved": False}),
        (gelu_tuning.gelu_fwd_split_columns, 1, {"interleaved": True}),
        (kernels.gelu_fwd, 2, {}),
    ],
    ids=["ring1", "wide", "hwdge", "stream2", "halves", "even_odd", "lnc2"],
)
def test_tuning_variants_equal_gelu_fwd(kernel, lnc, kwargs, dtype):
    _assert_variant_equals_gelu_fwd(kernel, lnc, kwargs, dtype)


def test_the_interleaved_columns_move_one_element_per_packet():
    """Lesson 07's fragmented transfer: the even / odd column views are runs of one element in HBM, the
    contiguous halves one run per partition row (nkisim/costmodel/dma.py, packets)."""
    from nkisim.costmodel.dma import packets

    for interleaved, per_row in ((False, 1), (True, 16)):
        trace = nkisim.run(gelu_tuning.gelu_fwd_split_columns, torch.empty(128, 32), interleaved=interleaved,
                           dry_run=True).trace
        dmas = [i for i in trace.instructions if i.isa == "dma_copy"]
        assert len(dmas) == 4 and all(packets(i) == 128 * per_row for i in dmas)


# Hardware results do not depend on where a tile lives in SBUF: a ring slot (a strided view) must
# give bit-identical results to a fresh contiguous tile.
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("slots", [2, 3])
def test_double_buffered_ring_equals_gelu_fwd(slots, dtype):
    _assert_variant_equals_gelu_fwd(gelu_tuning.gelu_fwd_double_buffered, 1, {"slots": slots}, dtype)


def _assert_variant_equals_gelu_fwd(kernel, lnc: int, kwargs: dict, dtype: torch.dtype) -> None:
    x = _input(ROWS, COLS, dtype)
    y = nkisim.run(kernel, x, lnc=lnc, **kwargs).outputs
    _assert_matches_reference(y, x)
    torch.testing.assert_close(y, nkisim.run(kernels.gelu_fwd, x).outputs, rtol=0, atol=0)


def test_wide_variant_uses_fewer_wider_instructions():
    x = torch.empty(512, 32)
    wide = nkisim.run(gelu_tuning.gelu_fwd_wide, x, dry_run=True).trace
    base = nkisim.run(kernels.gelu_fwd, x, dry_run=True).trace
    act = [i for i in wide if i.opcode == "ACTIVATE"]
    assert len(act) == 2 and len([i for i in base if i.opcode == "ACTIVATE"]) == 4
    assert all(i.elements_per_partition == gelu_tuning.WIDE_ROWS * 32 for i in act)


def test_hwdge_variant_marks_every_dma():
    trace = nkisim.run(gelu_tuning.gelu_fwd_hwdge, torch.empty(200, 16), dry_run=True).trace
    dmas = [i.dma for i in trace if i.dma is not None]
    assert len(dmas) == 4 and all(d.dge_mode == "hwdge" for d in dmas)


def _instructions(run) -> list[tuple[str, str, str]]:
    return [(i.engine, i.opcode, i.name) for i in run.trace]


@pytest.mark.parametrize("dtype", DTYPES)
def test_per_tile_kernels_are_the_finished_kernels_at_lnc1(dtype):
    """Lessons 4 and 5 show these kernels and then run kernels.gelu_fwd / gelu_bwd: same outputs,
    bit for bit, and the same instructions in the same order."""
    from lesson_kernels.gelu_per_tile import gelu_bwd_per_tile, gelu_per_tile

    x, g = _input(ROWS, COLS, dtype), _input(ROWS, COLS, dtype, seed=1)
    fwd, finished_fwd = nkisim.run(gelu_per_tile, x), nkisim.run(kernels.gelu_fwd, x)
    _assert_matches_reference(fwd.outputs, x)
    assert torch.equal(fwd.outputs, finished_fwd.outputs)
    assert _instructions(fwd) == _instructions(finished_fwd)
    assert [op for _, op, _ in _instructions(fwd)].count("ACTIVATE") == -(-ROWS // 128)
    bwd, finished_bwd = nkisim.run(gelu_bwd_per_tile, x, g), nkisim.run(kernels.gelu_bwd, x, g)
    assert torch.equal(bwd.outputs, finished_bwd.outputs)
    assert _instructions(bwd) == _instructions(finished_bwd)
