"""nc_matmul and nc_transpose against numpy references: dtypes, partial tiles, PSUM accumulation,
double-row FP8, transpose mode, and every shape / memory / dtype rule with its error message."""
import re

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from helpers import rand
from nkisim import NkiValidationError

F32, BF16 = np.float32, ml_dtypes.bfloat16
LINE = r"\(test_tensor_engine\.py:\d+\)$"


def reference(lhsT, rhs):
    """stationary.T @ moving with the inputs' own rounding, products and sums in float64."""
    return (lhsT.astype(np.float64).T @ rhs.astype(np.float64)).astype(F32)


@nki.jit
def matmul_k_tiles(lhsT, rhs, accumulate_flags=None):
    """[K, M].T @ [K, N] with K tiled by 128, accumulated in one PSUM tile."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.psum)
    for i in range(K // 128):
        a = nl.ndarray((128, M), dtype=lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), dtype=rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[i * 128:(i + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[i * 128:(i + 1) * 128, :])
        flag = None if accumulate_flags == None else accumulate_flags[i]
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=flag)
    res = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("dtype, tol", [(F32, 1e-5), (BF16, 1e-5), (np.float16, 1e-5),
                                        (ml_dtypes.float8_e4m3, 1e-5), (ml_dtypes.float8_e5m2, 1e-5)])
def test_matmul_accumulates_in_fp32_for_every_input_dtype(dtype, tol):
    lhsT, rhs = rand((384, 64), 1).astype(dtype), rand((384, 200), 2).astype(dtype)
    got = matmul_k_tiles(lhsT, rhs)
    want = reference(lhsT, rhs)      # exact products of the rounded inputs; only the fp32 sum order differs
    assert got.dtype == F32
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_mixed_low_precision_inputs_are_allowed():
    lhsT, rhs = rand((128, 32), 3).astype(BF16), rand((128, 16), 4).astype(ml_dtypes.float8_e5m2)
    np.testing.assert_allclose(matmul_k_tiles(lhsT, rhs), reference(lhsT, rhs), rtol=1e-5, atol=1e-4)


def test_explicit_accumulate_flags_start_then_accumulate():
    lhsT, rhs = rand((256, 128), 5), rand((256, 512), 6)
    got = matmul_k_tiles(lhsT, rhs, (False, True))
    np.testing.assert_allclose(got, reference(lhsT, rhs), rtol=1e-5, atol=1e-4)


def test_accumulate_false_restarts_the_group():
    lhsT, rhs = rand((256, 8), 7), rand((256, 8), 8)
    got = matmul_k_tiles(lhsT, rhs, (False, False))          # second matmul overwrites the first
    np.testing.assert_allclose(got, reference(lhsT[128:], rhs[128:]), rtol=1e-5, atol=1e-5)


def test_accumulate_true_on_never_written_psum_is_rejected_with_the_kernel_line():
    lhsT, rhs = rand((128, 8)), rand((128, 8))
    with pytest.raises(NkiValidationError, match="accumulate=True onto PSUM that no matmul has written") as info:
        matmul_k_tiles(lhsT, rhs, (True,))
    assert re.search(LINE, str(info.value))


@nki.jit
def zeros_then_matmul(lhsT, rhs, accumulate):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.zeros((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
    a = nl.load(lhsT)
    b = nl.load(rhs)
    for _ in range(2):
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=accumulate)
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_default_accumulate_adds_onto_a_zeroed_psum_tile_as_the_arch_guide_shows():
    lhsT, rhs = rand((64, 32), 9), rand((64, 48), 10)
    np.testing.assert_allclose(zeros_then_matmul(lhsT, rhs, None), 2 * reference(lhsT, rhs), rtol=1e-5, atol=1e-4)


@nki.jit
def memset_then_matmul(lhsT, rhs, value):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=value)
    a, b = nl.load(lhsT), nl.load(rhs)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray(acc.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_default_accumulate_starts_the_group_over_a_memset_as_the_arch_guide_says():
    """"the first nki.isa.nc_matmul instruction overwrites the destination PSUM bank" (trn1/inf2 arch guide):
    a memset before it does not count as the group's first write."""
    lhsT, rhs = rand((64, 32), 11), rand((64, 48), 12)
    np.testing.assert_allclose(memset_then_matmul(lhsT, rhs, 5.0), reference(lhsT, rhs), rtol=1e-5, atol=1e-4)


def test_default_accumulate_in_a_compiled_loop_must_be_one_flag_for_the_body():
    """The body of nl.fori_loop is one copy: accumulate=None cannot overwrite in iteration 0 and accumulate after."""
    @nki.jit
    def loop(lhsT, rhs):
        acc = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.psum)
        a, b = nl.load(lhsT), nl.load(rhs)
        nl.fori_loop(0, 2, lambda i: nisa.nc_matmul(dst=acc, stationary=a, moving=b))
        return lhsT

    with pytest.raises(NkiValidationError, match=r"accumulate=None in the body of nl.fori_loop: the compiler infers "
                                                 r"one flag .* accumulated onto in iteration 1 and was overwritten"):
        loop(rand((64, 32)), rand((64, 48)))


def test_explicit_accumulate_onto_memset_psum_is_rejected_on_trn2():
    with pytest.raises(NkiValidationError, match="written by a non-matmul instruction .* undefined on trn2"):
        zeros_then_matmul(rand((64, 32)), rand((64, 48)), True)


@nki.jit
def partial_tile(lhsT, rhs):
    """Write rows 64..64+M and columns 8..8+N of a [128, 512] PSUM tile; return the whole tile
    (an access of 33-64 partitions starts at partition 0 or 64)."""
    K, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    a, b = nl.load(lhsT), nl.load(rhs)
    nisa.nc_matmul(dst=acc[64:64 + M, 8:8 + N], stationary=a, moving=b)
    res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_partial_tiles_write_only_their_box_of_psum():
    lhsT, rhs = rand((96, 40), 11), rand((96, 100), 12)
    got = partial_tile(lhsT, rhs)
    np.testing.assert_allclose(got[64:104, 8:108], reference(lhsT, rhs), rtol=1e-5, atol=1e-4)
    untouched = np.ones(got.shape, bool)
    untouched[64:104, 8:108] = False
    assert np.isnan(got[untouched]).all()        # never written: the uninitialised-memory sentinel


@nki.jit
def double_row(stat, mov):
    """stat [K, 2, M], mov [K, 2, N] in FP8 double-row mode."""
    out = nl.ndarray((stat.shape[2], mov.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
    a, b = nl.load(stat), nl.load(mov)
    acc = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=acc, stationary=a, moving=b, perf_mode=nisa.matmul_perf_mode.double_row)
    res = nl.ndarray(out.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_double_row_fp8_contracts_over_the_partitions_and_the_pair_dim():
    fp8 = ml_dtypes.float8_e4m3
    stat, mov = rand((128, 2, 64), 13).astype(fp8), rand((128, 2, 256), 14).astype(ml_dtypes.float8_e5m2)
    want = reference(stat.reshape(256, 64), mov.reshape(256, 256))
    np.testing.assert_allclose(double_row(stat, mov), want, rtol=1e-5, atol=1e-4)
    with pytest.raises(NkiValidationError, match="perf_mode=double_row takes float8_e4m3, float8_e5m2"):
        double_row(stat.astype(BF16), mov.astype(BF16))


@nki.jit
def transpose_mode(data, ident):
    out = nl.ndarray((data.shape[1], ident.shape[1]), dtype=data.dtype, buffer=nl.shared_hbm)
    a, i = nl.load(data), nl.load(ident)
    ps = nl.ndarray(out.shape, dtype=data.dtype, buffer=nl.psum)
    nisa.nc_matmul(dst=ps, stationary=a, moving=i, is_transpose=True)
    res = nl.ndarray(out.shape, dtype=data.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=ps)
    nisa.dma_copy(dst=out, src=res)
    return out


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_transpose_mode_is_bit_exact_with_nan_and_inf(dtype):
    data = rand((64, 96), 15).astype(dtype)
    data[3, 5], data[10, 0], data[63, 95] = np.nan, np.inf, -np.inf
    got = transpose_mode(data, np.eye(64, dtype=dtype))
    assert got.dtype == dtype
    assert np.array_equal(got.view(np.uint8), np.ascontiguousarray(data.T).view(np.uint8))


def test_transpose_mode_needs_an_identity_moving_tile_and_stationary_dtype():
    with pytest.raises(NkiValidationError, match="is_transpose=True needs moving to be an identity matrix"):
        transpose_mode(rand((8, 8)), np.full((8, 8), 1.0, F32))

    @nki.jit
    def wrong_dst(data):
        a = nl.load(data)
        ps = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=a, moving=a, is_transpose=True)

    with pytest.raises(NkiValidationError, match="dst dtype float32 must be bfloat16"):
        wrong_dst(rand((8, 8)).astype(BF16))


def fails(body, match, *arrays):
    """Run body(*sbuf tiles of arrays, psum [128, 512] fp32) in a kernel; the error names the rule and line."""

    @nki.jit
    def k(*xs):
        tiles = [nl.load(x) for x in xs]
        ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        body(*tiles, ps)

    with pytest.raises(NkiValidationError, match=match) as info:
        k(*arrays)
    assert re.search(LINE, str(info.value)), str(info.value)
    return str(info.value)


def test_shape_limits_name_the_rule_and_the_limit():
    s, m = rand((128, 128)), rand((128, 512))
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[:, 0:8], stationary=a, moving=b[:, 0:4]),
          r"nc_matmul: dst must hold \[128, 4\] \(stationary free size x moving free size\), got shape \(128, 8\)",
          s, m)
    wide = rand((128, 129))
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[:, 0:8], stationary=a, moving=b[:, 0:8]),
          "stationary free size 129 exceeds maximum 128", wide, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps, stationary=a[:, 0:128], moving=b),
          "moving free size 513 exceeds maximum 512", s, rand((128, 513)))
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[:, 0:8], stationary=a[0:64], moving=b[:, 0:8]),
          "stationary has 64 partitions but moving has 128", s, m)


def test_memory_and_dtype_rules():
    s, m = rand((128, 64)), rand((128, 64))
    fails(lambda a, b, ps: nisa.nc_matmul(dst=a, stationary=a, moving=b),
          "dst is in sbuf; the Tensor engine writes its result to PSUM", s, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:64], stationary=ps[:, 0:64], moving=b),
          "stationary is in psum; the Tensor engine reads its inputs from SBUF", s, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:64], stationary=a, moving=b),
          "if one input is float32/tfloat32 the other must be too", s.astype(BF16), m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:64], stationary=a, moving=b),
          "float8_e4m3fn .* needs NeuronCore-v4", s.astype(ml_dtypes.float8_e4m3fn), m.astype(BF16))
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:64], stationary=a, moving=b),
          "stationary dtype int8: the Tensor engine takes", s.astype(np.int8), m.astype(np.int8))

    def bf16_dst(a, b, ps):
        d = nl.ndarray((64, 64), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=d, stationary=a, moving=b)
    fails(bf16_dst, "a matmul writes float32 to PSUM on trn2", s.astype(BF16), m.astype(BF16))
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:64], stationary=a, moving=b, accumulate=1),
          "accumulate must be a bool, got int", s, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:64], stationary=a, moving=b, perf_mode="fast"),
          "perf_mode must be a nki.isa.matmul_perf_mode member", s, m)


def test_pe_tiling_limits_the_stationary_tile():
    s, m = rand((64, 32)), rand((64, 16))
    body = lambda a, b, ps: nisa.nc_matmul(dst=ps[0:32, 0:16], stationary=a, moving=b, tile_position=(64, 32),
                                           tile_size=(64, 32))

    @nki.jit
    def tiled(x, y):
        out = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
        body(nl.load(x), nl.load(y), ps)
        res = nl.ndarray((32, 16), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=ps[0:32, 0:16])
        nisa.dma_copy(dst=out, src=res)
        return out

    np.testing.assert_allclose(tiled(s, m), reference(s, m), rtol=1e-5, atol=1e-5)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:32, 0:16], stationary=a, moving=b, tile_position=(0, 0),
                                          tile_size=(32, 32)),
          "contraction .* size 64 exceeds the 32 PE rows of tile_size row 32", s, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:32, 0:16], stationary=a, moving=b, tile_position=(32, 0),
                                          tile_size=(64, 128)),
          "tile_position row start 32 must be a multiple of its tile size 64", s, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:32, 0:16], stationary=a, moving=b, tile_size=(64, 128)),
          "tile_position and tile_size must both be set", s, m)
    fails(lambda a, b, ps: nisa.nc_matmul(dst=ps[0:64, 0:16], stationary=a, moving=b, tile_position=(0, 0),
                                          tile_size=(64, 32)),
          r"stationary free size 64 exceeds maximum 32 \(tile_size column 32\); tile M into pieces of at most 32 \(",
          rand((64, 64)), m)


# --- nc_transpose ----------------------------------------------------------------------------------
@nki.jit
def transpose_kernel(x, engine, dst_buffer):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.load(x)
    d = nl.ndarray(out.shape, dtype=x.dtype, buffer=dst_buffer)
    nisa.nc_transpose(dst=d, data=t, engine=engine)
    if dst_buffer == nl.psum:
        res = nl.ndarray(out.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=d)
        d = res
    nisa.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize("shape, engine, buffer, lane", [
    ((128, 96), nisa.engine.tensor, nl.psum, "Tensor"),
    ((100, 128), nisa.engine.unknown, nl.psum, "Tensor"),
    ((32, 20), nisa.engine.vector, nl.sbuf, "Vector"),
    ((16, 32), nisa.engine.unknown, nl.psum, "Vector"),
])
@pytest.mark.parametrize("dtype", [F32, BF16, np.int8])
def test_nc_transpose_is_bit_exact_on_both_engines(shape, engine, buffer, lane, dtype):
    x = (rand(shape, 16) * 20).astype(dtype)
    r = nkisim.run(transpose_kernel, x, engine, buffer)
    assert r.outputs.dtype == x.dtype and np.array_equal(r.outputs, x.T)
    assert [i.engine for i in r.trace if i.isa == "nc_transpose"] == [lane]


def test_nc_transpose_flattens_free_dims_and_checks_engine_limits():
    @nki.jit
    def k3(x):
        out = nl.ndarray((24, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        d = nl.ndarray((24, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.nc_transpose(dst=d, data=nl.load(x), engine=nisa.engine.vector)
        nisa.dma_copy(dst=out, src=d)
        return out

    x = rand((16, 4, 6), 17)
    assert np.array_equal(k3(x), x.reshape(16, 24).T)
    with pytest.raises(NkiValidationError, match=r"data \[64, 8\] exceeds the Vector engine's 32x32 transpose"):
        transpose_kernel(rand((64, 8)), nisa.engine.vector, nl.sbuf)
    with pytest.raises(NkiValidationError, match="the Tensor engine transposes from SBUF to PSUM"):
        transpose_kernel(rand((64, 8)), nisa.engine.tensor, nl.sbuf)
    with pytest.raises(NkiValidationError, match="dst partition dimension 256 exceeds maximum 128"):
        transpose_kernel(rand((128, 256)), nisa.engine.tensor, nl.psum)
    with pytest.raises(NkiValidationError, match="engine=nisa.engine.scalar is not allowed"):
        transpose_kernel(rand((8, 8)), nisa.engine.scalar, nl.psum)


# --- nki.language callables ------------------------------------------------------------------------
def test_nl_matmul_and_nl_transpose_lower_to_the_tensor_engine():
    @nki.jit
    def k(x, y):
        out = nl.ndarray((x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        out_t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        out_c = nl.ndarray((x.shape[1], x.shape[0]), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        a, b = nl.load(x), nl.load(y)
        nl.store(out, nl.copy(nl.matmul(a, b)))
        nl.store(out_t, nl.copy(nl.transpose(a)))
        nl.store(out_c, nl.transpose(a, dtype=nl.bfloat16))
        return out, out_t, out_c

    x, y = rand((64, 96), 18), rand((96, 80), 19)
    r = nkisim.run(k, x, y)
    np.testing.assert_allclose(r.outputs[0], reference(x.T, y), rtol=1e-5, atol=1e-4)
    assert np.array_equal(r.outputs[1], x.T) and np.array_equal(r.outputs[2], x.T.astype(BF16))
    assert [i.isa for i in r.trace if i.engine == "Tensor"] == ["nc_transpose", "nc_matmul"] + ["nc_transpose"] * 2


@pytest.mark.parametrize("lnc", [1, 2])
def test_identity_matrix_load_transpose2d_and_transpose_mode_together(lnc):
    @nki.jit
    def k(x):
        out = nl.ndarray((x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        xt = nl.load_transpose2d(x)                                  # [F, P] in SBUF via the DMA engines
        ident = nl.shared_identity_matrix(n=x.shape[1], dtype=x.dtype)
        ps = nl.ndarray((x.shape[0], x.shape[1]), dtype=x.dtype, buffer=nl.psum)
        nisa.nc_matmul(dst=ps, stationary=xt, moving=ident, is_transpose=True)   # back to [P, F]
        if nl.program_id(0) == 0:
            nl.store(out, nl.copy(ps))
        return out

    x = rand((64, 32), 20).astype(BF16)
    assert np.array_equal(nkisim.run(k, x, lnc=lnc).outputs, x)
