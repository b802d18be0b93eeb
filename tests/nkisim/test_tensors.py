"""Buffers, dtypes, the NaN sentinel, views and slicing rules, calling convention."""
import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch

from nkisim import NkiValidationError

from helpers import copy_through_sbuf as _copy_body

copy_through_sbuf = nki.jit(_copy_body)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.uint8,
                                   torch.float8_e4m3fn])
def test_torch_in_torch_out_dtype_preserved(dtype):
    x = (torch.arange(4 * 8) % 7).reshape(4, 8).to(dtype)
    y = copy_through_sbuf(x)
    assert isinstance(y, torch.Tensor) and y.dtype == dtype and torch.equal(y, x)


def test_numpy_in_numpy_out_bf16():
    x = np.linspace(-2, 2, 32, dtype=np.float32).reshape(4, 8).astype(ml_dtypes.bfloat16)
    y = copy_through_sbuf(x)
    assert isinstance(y, np.ndarray) and y.dtype == x.dtype and np.array_equal(y.view(np.uint16), x.view(np.uint16))


@nki.jit
def read_unwritten(x):
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t[:, 0:4], src=x[:, 0:4])           # only half the tile is written
    nisa.dma_copy(dst=out, src=t)
    return out


def test_nan_sentinel_shows_unwritten_memory():
    y = read_unwritten(np.ones((2, 8), np.float32))
    assert np.all(y[:, :4] == 1) and np.all(np.isnan(y[:, 4:]))


@nki.jit
def unwritten_int(x):
    out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    return out


def test_int_sentinel_is_4():
    assert np.all(unwritten_int(np.zeros((2, 3), np.int32)) == 4)


def shapes_of_views(x):
    t = nl.ndarray((128, 4, 16), dtype=nl.float32, buffer=nl.sbuf)
    shapes = {
        "onchip_int_p": t[3].shape, "onchip_slot": t[:, 2, :].shape, "onchip_scalar_col": t[:, 1, 5].shape,
        "onchip_ds": t[nl.ds(8, 16), :, 0:8].shape, "ellipsis": t[..., 0].shape,
        "hbm_int": x[1].shape, "hbm_step": x[::2, 1:7:3].shape, "hbm_neg": x[-1, -2:].shape,
        "hbm_element": x[2, 3].shape, "hbm_element_offset": x[2, 3].offset,
        "reshape": t.reshape((128, 64)).shape,
    }
    shapes["strides"] = t[:, 1, ::2].strides
    shapes["offset"] = t[4:8, 1, 2:].offset
    return shapes


def test_view_shapes_follow_nki_indexing_rules():
    out = {}
    record = out.update

    @nki.jit
    def k(x):
        record(shapes_of_views(x))

    k(np.zeros((6, 10), np.float32))
    assert out["onchip_int_p"] == (1, 4, 16)     # partition dim kept for an int index
    assert out["onchip_slot"] == (128, 16)
    assert out["onchip_scalar_col"] == (128, 1)  # stays 2-D
    assert out["onchip_ds"] == (16, 4, 8)
    assert out["ellipsis"] == (128, 4)
    assert out["hbm_int"] == (10,)               # HBM drops int dims
    assert out["hbm_step"] == (3, 2)
    assert out["hbm_neg"] == (2,)
    # "HBM tensors: integer indexing removes the dimension. Result is at least 1D." (NkiTensor.__getitem__)
    assert out["hbm_element"] == (1,) and out["hbm_element_offset"] == 2 * 10 + 3
    assert out["reshape"] == (128, 64)
    assert out["strides"] == (64, 2)
    assert out["offset"] == 4 * 64 + 16 + 2


@pytest.mark.parametrize("index, message", [
    (lambda t: t[0:129], "slice 0:129 out of bounds for dim 0 of size 128"),
    (lambda t: t[:, 16], "index: 16 out of bounds for dim 1 of size 16"),
    (lambda t: t[:, [1, 2]], "unsupported index"),
    (lambda t: t.reshape((128, 15)), "reshape: element count 1920"),
    (lambda t: t.reshape((64, 32)), "partition dim 64 must stay 128"),
    (lambda t: t.reshape((128, 4, 4))[:, :, 0:2].reshape((128, 8)), "cannot be reshaped"),
])
def test_bad_views_raise(index, message):
    @nki.jit
    def k(x):
        t = nl.ndarray((128, 16), dtype=nl.float32, buffer=nl.sbuf)
        index(t)

    with pytest.raises(NkiValidationError, match=message):
        k(np.zeros(1, np.float32))


@nki.jit
def strided_copy(x):
    out = nl.ndarray((4, 3), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 3), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[::2, 1::2])
    nisa.dma_copy(dst=out[::-1, :], src=t)
    return out


def test_strided_and_reversed_views():
    x = np.arange(8 * 6, dtype=np.float32).reshape(8, 6)
    assert np.array_equal(strided_copy(x), x[::2, 1::2][::-1])


@nki.jit
def write_input_in_place(x):
    t = nl.ndarray((x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.activation(dst=t, op=nl.exp, data=t)
    nisa.dma_copy(dst=x, src=t)


def test_inputs_written_by_the_kernel_are_updated_in_place():
    x = torch.zeros(4, 6, dtype=torch.bfloat16)
    write_input_in_place(x)
    assert torch.all(x == 1)
    base = np.zeros((6, 4), np.float32)
    write_input_in_place(base.T)          # non-contiguous argument: written back after the launch
    assert np.all(base == 1)


@nki.jit
def cast_on_dma(x):
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=x)
    return out


def test_bf16_rounding_is_round_to_nearest_even():
    # 1 + 2^-8 lies halfway between two bf16 values: RNE picks the even one (1.0);
    # 1 + 3*2^-8 rounds up to 1 + 2^-6.
    x = np.array([[1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 3.0e38]], np.float32)
    y = cast_on_dma(x).astype(np.float32)
    assert y[0, 0] == 1.0 and y[0, 1] == 1 + 2 ** -6 and y[0, 2] == -1.0
    assert np.array_equal(cast_on_dma(x), x.astype(ml_dtypes.bfloat16))


@nki.jit
def float_to_int(x):
    out = nl.ndarray(x.shape, dtype=nl.int8, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=nl.int8, buffer=nl.sbuf)
    s = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=s, src=x)
    nisa.tensor_copy(dst=t, src=s)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_float_to_int_rounds_half_even_and_saturates():
    x = np.array([[0.5, 1.5, 2.5, -0.5, 300.0, -300.0, np.nan, 2.4]], np.float32)
    assert float_to_int(x).tolist() == [[0, 2, 2, 0, 127, -128, 0, 2]]


def test_unsupported_argument_dtype_is_rejected():
    with pytest.raises(NkiValidationError, match="float64 is not an NKI dtype"):
        copy_through_sbuf(np.zeros((2, 2)))
