"""Kernels the real toolchain accepts, which nkisim must accept too (issue 18's false rejections).

The published SBUF facts (the published fold kernel compiled at ViT-H+ and at the v1.7 ViT-S grouping)
are checked on the published kernel itself: tests/nkisim/test_sbuf_allocation.py.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from helpers import rand, run_tiles


@pytest.mark.parametrize("op, reduce", [
    (nl.bitwise_and, np.bitwise_and.reduce), (nl.bitwise_or, np.bitwise_or.reduce),
    (nl.bitwise_xor, np.bitwise_xor.reduce),
    (nl.logical_and, lambda v, axis: np.all(v != 0, axis=axis)),
    (nl.logical_or, lambda v, axis: np.any(v != 0, axis=axis)),
    (nl.logical_xor, lambda v, axis: np.sum(v != 0, axis=axis) % 2),
])
def test_tensor_reduce_with_bitwise_and_logical_ops(op, reduce):
    # Documented reduction ops of tensor_reduce (SDK:nki/api/nki/isa/__init__.py).
    v = np.random.default_rng(1).integers(0, 1 << 20, size=(128, 8)).astype(np.int32)
    v[::3, 2] = 0
    got = run_tiles(lambda d, o: nisa.tensor_reduce(dst=o, op=op, data=d, axis=1), v,
                    outs=[((128, 1), np.int32)])
    assert np.array_equal(got[:, 0], reduce(v, axis=1).astype(np.int32))


@pytest.mark.parametrize("lo, hi", [(0, 128), (0, 64), (64, 128), (0, 32), (32, 64), (64, 96), (96, 128),
                                    (96, 100), (0, 1)])
def test_engine_accesses_from_every_allowed_start_partition(lo, hi):
    a = rand((128, 8))
    got = run_tiles(lambda d, o: nisa.tensor_copy(dst=o[lo:hi], src=d[lo:hi]), a, outs=[((128, 8), np.float32)])
    assert np.array_equal(got[lo:hi], a[lo:hi])


def test_four_free_dims_and_int16_strides_are_accepted():
    a = rand((128, 2, 2, 2, 4))
    body = lambda d, o: nisa.tensor_copy(dst=o, src=d[:, :, :, :, ::2])
    got = run_tiles(body, a, outs=[((128, 2, 2, 2, 2), np.float32)])
    assert np.array_equal(got, a[:, :, :, :, ::2])


WIDTHS = (8, 16)
SETTINGS = {"cols": 8}


def _width(i):
    return WIDTHS[i]


@nki.jit
def uses_the_0_6_subset(x):
    """Comprehensions, ==, string-keyed dicts, immutable globals, helpers and tuples are NKI 0.6."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    sizes = {"rows": x.shape[0], "cols": _width(0)}
    tiles = [nl.ndarray((sizes["rows"], sizes["cols"]), dtype=x.dtype, buffer=nl.sbuf) for _ in range(2)]
    if x.dtype == nl.float32 and len(tiles) != 0:
        nisa.dma_copy(dst=tiles[0], src=x)
        nisa.tensor_copy(dst=tiles[1], src=tiles[0])
    nisa.dma_copy(dst=out, src=tiles[1])
    return out


def test_the_nki_0_6_language_subset_passes():
    x = rand((128, 8))
    assert np.array_equal(uses_the_0_6_subset(x), x)


def test_activation_inputs_at_the_edges_of_the_valid_range_are_valid():
    x = np.full((128, 4), 2.0**-87, np.float32)
    x[:, 1] = 2.0**97
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run_tiles(lambda d, o: nisa.activation(dst=o, op=nl.rsqrt, data=d), x, outs=[((128, 4), np.float32)])
    assert np.all(np.isfinite(got))


def test_activation_inputs_outside_the_valid_range_are_invalid_output():
    x = np.array([[9.0, 1.0]] * 128, np.float32)
    with pytest.warns(nkisim.NkiInvalidOutputWarning, match=r"activation: 128 inputs of nl.sin are outside its valid "
                                                            r"input range \[-3.14159, 3.14159\]"):
        got = run_tiles(lambda d, o: nisa.activation(dst=o, op=nl.sin, data=d), x, outs=[((128, 2), np.float32)])
    assert np.all(np.isnan(got[:, 0])) and np.allclose(got[:, 1], np.sin(1.0))


# --- found running nki-library's qkv and attention kernels unchanged (outside this repository) ------
@nki.jit(experimental_flags="skip-non-top-level-shared-hbm-check")
def branches_on_target_and_argument_buffer(x):
    """An nki.jit compiler flag, an ordered nc_version test and a buffer test on an argument, as
    nki-library's qkv / attention kernels write them."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    assert x.buffer in (nl.hbm, nl.shared_hbm, nl.private_hbm), f"argument buffer {x.buffer}"
    if nisa.get_nc_version() >= nisa.nc_version.gen4:
        nisa.activation(dst=t, op=nl.exp, data=t)
    elif nisa.get_nc_version() >= nisa.nc_version.gen3:
        nisa.activation(dst=t, op=nl.square, data=t)
    rows = x.shape[0] // nl.num_programs(axes=0)
    first = nl.program_id(0) * rows
    nisa.dma_copy(dst=out[first:first + rows], src=t[first:first + rows])
    return out


@pytest.mark.parametrize("lnc", [1, 2])
def test_jit_flags_version_order_and_argument_buffers_of_real_kernels_are_accepted(lnc):
    x = rand((128, 8))
    got = branches_on_target_and_argument_buffer[lnc](x)
    np.testing.assert_allclose(got, x * x, rtol=1e-6)   # trn2 is gen3: the gen3 branch ran


def test_nc_version_orders_by_generation_and_only_with_itself():
    gen2, gen3, gen4 = nisa.nc_version.gen2, nisa.nc_version.gen3, nisa.nc_version.gen4
    assert gen2 < gen3 < gen4 and gen4 >= gen3 and not gen3 > gen3
    with pytest.raises(TypeError):
        gen3 < 3


@dataclass
class _Dims(nl.NKIObject):
    partitions: int
    unused: int


@nki.jit
def branches_on_a_tensor_and_leaves_a_field_out(x, index):
    """`if index:` as "an index was given" and a dataclass field left to its default None, as
    nki-library's MoE / MLP kernels write them."""
    dims = _Dims(partitions=x.shape[0])
    assert dims.unused == None  # noqa: E711 (NKI 0.6 has no `is`)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((dims.partitions, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if index:
        nisa.activation(dst=t, op=nl.square, data=t)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_tensor_condition_is_true_with_a_warning_and_left_out_fields_are_none():
    x = rand((128, 8))
    with pytest.warns(nkisim.NkiWarning, match="always true: it tests that the tensor exists, not its values"):
        got = branches_on_a_tensor_and_leaves_a_field_out(x, np.zeros((128, 1), np.int32))   # all-zero values
    np.testing.assert_allclose(got, x * x, rtol=1e-6)


def test_a_while_loop_on_a_tensor_is_stopped_with_an_error_instead_of_tracing_forever(monkeypatch):
    from nkisim.emulator import tensor as tensor_module

    monkeypatch.setattr(tensor_module, "TRUTH_TESTS_LIMIT", 50)

    @nki.jit
    def spins(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        while t:
            nisa.activation(dst=t, op=nl.square, data=t)
        return x

    with pytest.warns(nkisim.NkiWarning), pytest.raises(nkisim.NkiValidationError,
                                                       match=r"condition 50 times: .*`while <tensor>:` loop never ends"):
        nkisim.run(spins, rand((128, 8)))


def test_a_class_with_its_own_init_keeps_pythons_call_rules():
    @dataclass
    class Own(nl.NKIObject):
        a: int

        def __init__(self, a, b):
            self.a = a + b

    assert Own(1, 2).a == 3
    with pytest.raises(TypeError):
        Own(1)


def test_memset_takes_an_integral_float_into_an_integer_tile():
    got = run_tiles(lambda x, o: nisa.memset(dst=o, value=7.0), rand((128, 4)), outs=[((128, 4), np.uint32)])
    assert got.dtype == np.uint32 and np.all(got == 7)


# --- valid twins of the state and placement rules (test_rule_corpus.py, STATE): each must keep passing ---
@nki.jit
def placed_tiles_on_allowed_partitions(x):
    out = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    upper = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf, address=(64, 0))
    quarter = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.sbuf, address=(32, 128))
    ps = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.psum, address=(32, 2048))
    nisa.dma_copy(dst=upper, src=x[0:64])
    nisa.memset(dst=quarter, value=2.0)
    nisa.tensor_copy(dst=ps, src=quarter)
    nisa.tensor_tensor(dst=upper[0:32], data1=upper[0:32], data2=ps, op=nl.add)
    nisa.dma_copy(dst=out, src=upper)
    return out


@nki.jit
def two_tiles_of_128_partitions(x):
    out = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    halves = [nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf), nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)]
    unused = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.sbuf)    # never touched: nothing to check
    for h in range(2):
        nisa.dma_copy(dst=halves[h], src=x[h * 128:(h + 1) * 128])
        nisa.dma_copy(dst=out[h * 128:(h + 1) * 128], src=halves[h])
    return out


@nki.jit
def gathers_and_slices_outside_the_indirect_dims(x, rows):
    out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
    idx = nl.ndarray((128, 1), dtype=nl.uint32, buffer=nl.sbuf)
    one = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=idx, src=rows)
    nisa.memset(dst=one, value=3)
    gathered = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=gathered, src=x.ap(pattern=[[8, 128], [1, 8]], vector_offset=idx, indirect_dim=0))
    row = x.ap(pattern=[[8, 1], [1, 8]], scalar_offset=one, indirect_dim=0).slice(1, 0, 4)
    picked = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=picked, src=row)
    nisa.dma_copy(dst=out, src=gathered[:, 0:4])
    nisa.dma_copy(dst=out[0:1], src=picked)
    return out


@nki.jit
def resets_the_vector_accumulator_before_reducing(x):
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    pred = nl.ndarray((128, 8), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.memset(dst=pred, value=1)
    nisa.select_reduce(dst=t, predicate=pred, on_true=t, on_false=0.0)          # idle: leaves it undefined
    nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.multiply, operand0=1.0, reduce_op=nl.add,
                              reduce_cmd=nisa.reduce_cmd.reset_reduce)
    nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=col,
                              reduce_cmd=nisa.reduce_cmd.reduce)
    nisa.dma_copy(dst=out, src=col)
    return out


@nki.jit
def copies_a_one_column_slice_and_loads_a_register_from_sbuf(x):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_copy(dst=t[:, 7:8], src=t[:, 0:1])
    n = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=n, value=3)
    reg = nisa.register_alloc(0)
    nisa.register_load(reg, n)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_state_and_placement_twins_pass():
    x = rand((128, 8), seed=2)
    placed = placed_tiles_on_allowed_partitions(x)
    assert np.allclose(placed[0:32], x[0:32] + 2.0) and np.array_equal(placed[32:64], x[32:64])
    x256 = rand((256, 8), seed=3)
    assert np.array_equal(two_tiles_of_128_partitions(x256), x256)
    rows = (np.arange(128, dtype=np.uint32)[::-1] % 128).reshape(128, 1)
    gathered = gathers_and_slices_outside_the_indirect_dims(x, rows)
    assert np.array_equal(gathered[1:], x[rows[1:, 0], 0:4]) and np.array_equal(gathered[0], x[3, 0:4])
    assert np.allclose(resets_the_vector_accumulator_before_reducing(x)[:, 0], 2 * x.sum(axis=1), atol=1e-5)
    copied = copies_a_one_column_slice_and_loads_a_register_from_sbuf(x)
    assert np.array_equal(copied[:, 7], x[:, 0]) and np.array_equal(copied[:, :7], x[:, :7])
