"""In-place outputs: a kernel may return an argument it wrote (nki-library's `*.must_alias_input`
outputs), at LNC=1 and LNC=2 alike; the caller's array is the output."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch


@nki.jit
def scale_into(x, out):
    rows = x.shape[0] // nl.num_programs()
    part = nl.ds(nl.program_id(0) * rows, rows)
    t = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[part, :])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[part, :], src=t)
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_returning_a_written_argument_works_at_every_lnc(lnc):
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    out = np.zeros_like(x)
    got = scale_into[lnc](x, out)
    np.testing.assert_array_equal(got, 2 * x)
    np.testing.assert_array_equal(out, 2 * x)          # written in place


@pytest.mark.parametrize("lnc", [1, 2])
def test_torch_in_place_output(lnc):
    x = torch.arange(128 * 8, dtype=torch.float32).reshape(128, 8)
    out = torch.zeros_like(x)
    got = scale_into[lnc](x, out)
    assert torch.equal(got, 2 * x) and torch.equal(out, 2 * x)


def test_a_private_on_chip_result_is_still_rejected():
    @nki.jit
    def returns_sbuf(x):
        return nl.load(x)

    with pytest.raises(AssertionError, match="shared_hbm"):
        returns_sbuf(np.zeros((128, 4), np.float32))


def test_lnc2_programs_writing_disjoint_column_blocks_do_not_race():
    """The cross-core race check follows strided views (each program owns a block of columns)."""

    @nki.jit
    def columns(x):
        cols = x.shape[1] // nl.num_programs()
        part = nl.ds(nl.program_id(0) * cols, cols)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((x.shape[0], cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[:, part])
        nisa.dma_copy(dst=out[:, part], src=t)
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(columns[2](x), x)
