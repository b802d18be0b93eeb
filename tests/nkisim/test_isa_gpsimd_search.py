"""GpSimd instructions (isa_gpsimd.py) and the search instructions (isa_search.py: the top-8 ones and topk)
against numpy references written from the NKI API reference pages and the docs' example tests."""
import re

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from helpers import rand, run_tiles
from nkisim import NkiValidationError
from nkisim.emulator import nki_versions

F32, BF16 = np.float32, ml_dtypes.bfloat16
LINE = r"\(test_isa_gpsimd_search\.py:\d+\)$"
DUMMY = np.zeros((1, 1), F32)


def fails(body, *arrays, outs, match):
    with pytest.raises(NkiValidationError, match=match) as info:
        run_tiles(body, *(arrays or (DUMMY,)), outs=outs)
    assert re.search(LINE, str(info.value)), str(info.value)


# --- iota ----------------------------------------------------------------------------------------
def test_iota_row_column_and_2d_patterns_as_the_docs_example():
    def body(_, a, b, c, e):
        nisa.iota(dst=a, pattern=[[1, 512]])                           # arange(512) on one partition
        nisa.iota(dst=b, pattern=[[0, 1]], channel_multiplier=2, offset=5)   # 5 + 2 p, one element each
        nisa.iota(dst=c, pattern=[[-1, 512]])
        nisa.iota(dst=e, pattern=[[1, 64]], channel_multiplier=1)      # column + row index
    a, b, c, e = run_tiles(body, DUMMY, outs=[((1, 512), np.int32), ((128, 1), np.int32), ((1, 512), F32),
                                              ((128, 64), np.int32)])
    assert np.array_equal(a[0], np.arange(512)) and np.array_equal(b[:, 0], np.arange(5, 261, 2))
    assert np.array_equal(c[0], -np.arange(512, dtype=F32))
    assert np.array_equal(e, np.arange(128)[:, None] + np.arange(64)[None, :])


def test_iota_four_dim_pattern_row_major_into_a_flat_dst_and_int32_wrap():
    pattern = ((100, 2), (10, 3), (1, 2), (1000, 2))
    got = run_tiles(lambda _, o: nisa.iota(dst=o, pattern=[list(p) for p in pattern], offset=7), DUMMY, outs=[((2, 24), np.int32)])
    w, z, y, x = np.meshgrid(range(2), range(3), range(2), range(2), indexing="ij")
    assert np.array_equal(got[1], (7 + 100 * w + 10 * z + y + 1000 * x).reshape(-1))
    wrapped = run_tiles(lambda _, o: nisa.iota(dst=o, pattern=[[1, 2]], offset=2**31 - 1), DUMMY,
                        outs=[((1, 2), np.int32)])
    assert wrapped.tolist() == [[2**31 - 1, -2**31]]


def test_iota_rules():
    fails(lambda _, o: nisa.iota(dst=o, pattern=[[1, 8]]), outs=[((4, 16), np.int32)],
          match="generates 8 elements per partition but dst has 16")
    fails(lambda _, o: nisa.iota(dst=o, pattern=[[1, 2]] * 5), outs=[((4, 32), np.int32)],
          match="1 to 4")

    def in_psum(_):
        nisa.iota(dst=nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum), pattern=[[1, 8]])
    fails(in_psum, outs=[], match="GpSimd operands must be in SBUF")


# --- affine_select -------------------------------------------------------------------------------
def test_affine_select_causal_mask_keeps_bits_and_fills_fp32_min():
    """The docs' use case: keep column <= row (affine = row - column >= 0), else FP32 min."""
    a = rand((128, 128), 1)
    got = run_tiles(lambda t, o: nisa.affine_select(dst=o, pattern=[[-1, 128]], channel_multiplier=1,
                                                    on_true_tile=t, on_false_value=np.finfo(F32).min,
                                                    cmp_op=nl.greater_equal), a, outs=[((128, 128), F32)])
    assert np.array_equal(got, np.where(np.tril(np.ones((128, 128), bool)), a, np.finfo(F32).min))


def test_affine_select_default_equal_and_casting_output():
    a = rand((8, 8), 2)
    got = run_tiles(lambda t, o: nisa.affine_select(dst=o, pattern=[[1, 8]], channel_multiplier=-1, on_true_tile=t,
                                                    on_false_value=0.0), a, outs=[((8, 8), BF16)])
    assert np.array_equal(got.astype(F32), np.where(np.eye(8, dtype=bool), a.astype(BF16).astype(F32), 0))


def test_affine_select_rejects_non_comparison():
    fails(lambda t, o: nisa.affine_select(dst=o, pattern=[[1, 8]], channel_multiplier=0, on_true_tile=t,
                                          on_false_value=0.0, cmp_op=nl.add), rand((8, 8)), outs=[((8, 8), F32)],
          match="cmp_op=nl.add is not a comparison")


# --- gathers -------------------------------------------------------------------------------------
def test_nc_n_gather_flattens_free_dims_per_partition():
    data = rand((16, 4, 8), 3)
    idx = np.random.default_rng(0).integers(0, 32, size=(16, 10)).astype(np.uint32)
    got = run_tiles(lambda d, i, o: nisa.nc_n_gather(dst=o, data=d, indices=i), data, idx, outs=[((16, 10), F32)])
    assert np.array_equal(got, np.take_along_axis(data.reshape(16, -1), idx.astype(np.int64), axis=1))
    fails(lambda d, i, o: nisa.nc_n_gather(dst=o, data=d, indices=i), data, idx + 32, outs=[((16, 10), F32)],
          match=r"indices value \d+ is out of range \[0, 32\)")


def test_local_gather_docs_example():
    """The docs' example: [128, 512, 4] src, the same 16x4 indices on every 16-partition group."""
    rng = np.random.default_rng(1)
    src = rng.random((128, 512, 4)).astype(F32)
    per_core = rng.integers(0, 512, size=(16, 4)).astype(np.uint16)
    index = np.tile(per_core, (8, 1))
    got = run_tiles(lambda s, i, o: nisa.local_gather(dst=o, src_buffer=s, index=i, num_elem_per_idx=4,
                                                      num_valid_indices=64), src, index * 4,
                    outs=[((128, 64, 4), F32)])
    want = np.empty((128, 64, 4), F32)
    for g in range(8):
        rows = slice(16 * g, 16 * (g + 1))
        want[rows] = np.take(src[rows], index[rows].flatten(order="F")[:64], axis=1)
    assert np.array_equal(got, want)


def test_local_gather_rules():
    fails(lambda s, i, o: nisa.local_gather(dst=o, src_buffer=s, index=i, num_elem_per_idx=3),
          rand((16, 8)), np.zeros((16, 1), np.uint16), outs=[((16, 48), F32)], match="num_elem_per_idx=3")
    fails(lambda s, i, o: nisa.local_gather(dst=o, src_buffer=s, index=i), rand((8, 8)),
          np.zeros((8, 1), np.uint16), outs=[((8, 16), F32)], match="multiple of 16")


# --- partitions, segments, nonzeros --------------------------------------------------------------
@pytest.mark.parametrize("op, ref", [(nl.add, np.sum), (nl.maximum, np.max)])
def test_tensor_partition_reduce(op, ref):
    a = rand((128, 4, 8), 4, 0, 100)
    got = run_tiles(lambda t, o: nisa.tensor_partition_reduce(dst=o, op=op, data=t), a, outs=[((1, 4, 8), F32)])
    assert np.allclose(got, ref(a, axis=0, keepdims=True), rtol=1e-5)


def test_tensor_partition_reduce_bitwise_or_and_rules():
    a = np.random.default_rng(2).integers(0, 1 << 20, size=(32, 8)).astype(np.int32)
    got = run_tiles(lambda t, o: nisa.tensor_partition_reduce(dst=o, op=nl.bitwise_or, data=t), a,
                    outs=[((1, 8), np.int32)])
    assert np.array_equal(got[0], np.bitwise_or.reduce(a, axis=0))
    fails(lambda t, o: nisa.tensor_partition_reduce(dst=o, op=nl.add, data=t), rand((8, 8)), outs=[((2, 8), F32)],
          match="dst must have 1 partition")


def _bounds_ref(seq):
    n = len(seq)
    lo, hi = np.zeros(n), np.zeros(n)
    for i in range(n):
        lo[i] = n if seq[i] == 0 else (lo[i - 1] if i and seq[i] == seq[i - 1] else i)
    for i in range(n - 1, -1, -1):
        hi[i] = -1 if seq[i] == 0 else (hi[i + 1] if i < n - 1 and seq[i] == seq[i + 1] else i + 1)
    return np.stack([lo, hi])


@pytest.mark.parametrize("dtype", [F32, np.int32])
def test_sequence_bounds_with_padding(dtype):
    ids = np.array([[0, 0, 1, 1, 1, 2, 3, 3, 0, 5, 5, 5, 0, 0, 7, 7]], dtype)
    got = run_tiles(lambda s, o: nisa.sequence_bounds(dst=o, segment_ids=s), ids, outs=[((1, 2, 16), dtype)])
    assert np.array_equal(got[0], _bounds_ref(ids[0]).astype(dtype))
    assert got[0, 0, 0] == 16 and got[0, 1, 0] == -1 and got[0, 0, 2] == 2 and got[0, 1, 2] == 5


def test_nonzero_with_count_docs_example_and_untouched_partitions():
    src = np.zeros((32, 8), np.int32)
    src[0] = [0, 1, 1, 0, 0, 1, 0, 0]
    src[16] = [3, 0, 0, 0, 0, 0, 0, 9]
    src[5] = 1                                        # not a GpSimd core's first partition: ignored

    def body(s, o):
        nisa.memset(dst=o, value=-7)
        nisa.nonzero_with_count(dst=o, src=s, index_offset=16, padding_val=-1)
    got = run_tiles(body, src, outs=[((32, 9), np.int32)])
    assert got[0].tolist() == [17, 18, 21, -1, -1, -1, -1, -1, 3]
    assert got[16].tolist() == [16, 23, -1, -1, -1, -1, -1, -1, 2]
    assert np.all(np.delete(got, [0, 16], axis=0) == -7)


# --- max8 / nc_find_index8 / nc_match_replace8 ---------------------------------------------------
def test_max8_descending_from_3d_source_bf16_out():
    a = rand((32, 4, 32), 5)
    got = run_tiles(lambda s, o: nisa.max8(dst=o, src=s), a, outs=[((32, 8), BF16)])
    assert np.array_equal(got.astype(F32), -np.sort(-a.reshape(32, -1), axis=1)[:, :8].astype(BF16).astype(F32))


def test_max8_element_count_limits():
    fails(lambda s, o: nisa.max8(dst=o, src=s), rand((4, 7)), outs=[((4, 8), F32)], match="between 8 and 16384")
    fails(lambda s, o: nisa.max8(dst=o, src=s), rand((4, 16)), outs=[((4, 4), F32)], match=r"must be \[4, 8\]")


def test_find_index8_of_max8_values_and_absent_sentinel():
    a = rand((32, 128), 6)

    def body(d, o, o16):
        m = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=m, src=d)
        nisa.nc_find_index8(dst=o, data=d, vals=m)
        nisa.memset(dst=m[:, 7:8], value=1000.0)                  # not in the data
        nisa.nc_find_index8(dst=o16, data=d, vals=m)
    idx, idx16 = run_tiles(body, a, outs=[((32, 8), np.uint32), ((32, 8), np.uint16)])
    assert np.array_equal(idx, np.argsort(-a, axis=1, kind="stable")[:, :8])
    assert np.all(idx16[:, 7] == 0xFFFF) and np.array_equal(idx16[:, :7], idx[:, :7])


def test_find_index8_pairs_duplicates_in_ascending_order():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8, 0]], F32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], F32)
    got = run_tiles(lambda d, v, o: nisa.nc_find_index8(dst=o, data=d, vals=v), data, vals, outs=[((1, 8), np.uint32)])
    assert got.tolist() == [[2, 4, 5, 6, 7, 8, 9, 10]]


def test_match_replace8_docs_duplicate_example():
    data = np.array([[1, 2, 3, 4, 8, 8, 8, 8, 8, 8, 8]], F32)
    vals = np.array([[3, 8, 8, 8, 8, 8, 8, 8]], F32)
    out, idx = run_tiles(lambda d, v, o, i: nisa.nc_match_replace8(dst=o, data=d, vals=v, imm=-1.0, dst_idx=i),
                         data, vals, outs=[((1, 11), F32), ((1, 8), np.uint32)])
    assert idx.tolist() == [[2, 10, 9, 8, 7, 6, 5, 4]]
    assert out.tolist() == [[1, 2, -1, 4, -1, -1, -1, -1, -1, -1, -1]]


def test_match_replace8_removes_the_top8_for_iterative_topk():
    """max8 + match_replace8 with -inf, twice: the second max8 yields ranks 9..16."""
    a = rand((16, 64), 7)

    def body(d, o):
        m = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.sbuf)
        rest = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=m, src=d)
        nisa.nc_match_replace8(dst=rest, data=d, vals=m, imm=float("-inf"))
        nisa.max8(dst=o, src=rest)
    got = run_tiles(body, a, outs=[((16, 8), F32)])
    assert np.array_equal(got, -np.sort(-a, axis=1)[:, 8:16])


# --- GpSimd tensor_tensor on 32-bit integers is native integer arithmetic (exact) -------------------
@nki.jit
def _int_tensor_tensor(a, b, engine_name):
    out = nl.ndarray((3,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    engine = getattr(nisa.engine, engine_name)
    for i, op in enumerate((nl.add, nl.multiply, nl.subtract)):
        r = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=r, data1=ta, data2=tb, op=op, engine=engine)
        nisa.dma_copy(dst=out[i], src=r)
    return out


def test_gpsimd_int32_tensor_tensor_is_exact_and_wraps_and_vector_is_fp32():
    # int32 values above 2^24 are not exact in fp32: 16777217 + 1 is 16777218 natively, 16777216 in fp32
    a = np.array([[16777217, 2**31 - 1, -7, 123456789]], np.int32)
    b = np.array([[1, 1, 3, 1000]], np.int32)
    got = _int_tensor_tensor(a, b, "unknown")           # int32 only: GpSimd by default
    wide = a.astype(np.int64), b.astype(np.int64)
    for i, fn in enumerate((np.add, np.multiply, np.subtract)):
        expected = ((fn(*wide) + 2**31) % 2**32 - 2**31).astype(np.int32)
        np.testing.assert_array_equal(got[i], expected)
    vector = _int_tensor_tensor(a, b, "vector")        # explicit Vector: fp32 math, then RNE + saturate
    assert vector[0, 0, 0] == 16777216 and vector[0, 0, 1] == 2**31 - 1


def test_gpsimd_uint32_tensor_tensor_wraps_at_32_bits():
    a = np.array([[2**32 - 1, 5]], np.uint32)
    b = np.array([[2, 7]], np.uint32)
    got = _int_tensor_tensor(a, b, "unknown")
    assert got[0].tolist() == [[1, 12]] and got[2].tolist() == [[2**32 - 3, 2**32 - 2]]


# --- topk (the v2.33.0 nki.isa.topk page; nkisim's readings in isa_search.py) --------------------
def _snake_topk(src, n, k):
    """Per 16-partition group: (values, snake indices) of the k largest of its first n snake elements."""
    out = []
    for g in range(0, src.shape[0], 16):
        snake = src[g:g + 16].astype(F32).T.reshape(-1)[:n]
        order = np.argsort(-snake, kind="stable")[:k]
        out.append((snake[order], order))
    return out


def _results(tile, k):
    """The k results of each group, by snake position j (partition j % 16, position j // 16)."""
    return [tile[g:g + 16].T.reshape(-1)[:k] for g in range(0, tile.shape[0], 16)]


def _distinct_bf16(shape, seed=0):
    grid = (np.arange(np.prod(shape)) - np.prod(shape) // 2).astype(F32) / 8     # exact in bf16 (|x| < 256)
    return np.random.default_rng(seed).permutation(grid).reshape(shape).astype(BF16)


def test_topk_finds_each_16_partition_groups_k_largest_in_the_snake_layout():
    n, k = 300, 20                                   # 19 snake columns, the last one partly used; k not a multiple of 16
    src = _distinct_bf16((128, 19))
    src[:, 18][(16 * 18 + np.arange(128) % 16) >= n] = 100      # slots past n hold the largest values: ignored

    def body(s, vals, idxs):
        nisa.topk(val_dst=vals, idx_dst=idxs, src=s, n=n)
    vals, idxs = run_tiles(body, src, outs=[((128, k), BF16), ((128, k), np.uint32)])
    for (ref_vals, ref_idx), got_v, got_i, g in zip(_snake_topk(src, n, k), _results(vals, k), _results(idxs, k),
                                                     range(0, 128, 16)):
        assert sorted(got_i.tolist()) == sorted(ref_idx.tolist())                  # 8 independent problems
        snake = src[g:g + 16].astype(F32).T.reshape(-1)
        assert np.array_equal(got_v.astype(F32), snake[got_i.astype(np.int64)])    # each value with its index
        assert np.array_equal(np.sort(got_v.astype(F32)), np.sort(ref_vals))
    # ceil(20 / 16) = 2 positions written; position 1's slots past k (partitions 4..15) hold the uninitialised
    # sentinel, and positions 2..19 are not written (still NaN / 4 from the fresh tiles)
    assert np.isnan(vals[:, 2:].astype(F32)).all() and (idxs[:, 2:] == 4).all()
    assert np.isnan(vals[np.arange(128) % 16 >= 4, 1].astype(F32)).all()
    assert not np.isnan(vals[np.arange(128) % 16 < 4, 1].astype(F32)).any()


def test_topk_writes_its_results_in_no_sorted_order():
    """The page promises no order (sorted=False); nkisim scrambles it, so a kernel that reads result 0 as the
    largest fails here, as it can on trn2 (AWS's gpsimd_topk: the hardware's order is not ascending)."""
    src = _distinct_bf16((16, 8), seed=1)

    def body(s, vals, idxs):
        nisa.topk(val_dst=vals, idx_dst=idxs, src=s, n=128)
    vals, _ = run_tiles(body, src, outs=[((16, 32), BF16), ((16, 32), np.uint32)])
    got = _results(vals, 32)[0].astype(F32)
    assert not (np.all(np.diff(got) < 0) or np.all(np.diff(got) > 0))
    assert np.array_equal(np.sort(got), np.sort(_snake_topk(src, 128, 32)[0][0]))


def test_topk_trace_record_is_one_gpsimd_topk_with_n_and_k():
    @nki.jit
    def kernel(x):
        s = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=x)
        vals = nl.ndarray((32, 40), dtype=nl.bfloat16, buffer=nl.sbuf)
        idxs = nl.ndarray((32, 40), dtype=nl.uint32, buffer=nl.sbuf)
        nisa.topk(val_dst=vals, idx_dst=idxs, src=s, n=1000)
        out = nl.ndarray((32, 40), dtype=nl.uint32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=idxs)
        return out
    [ins] = [i for i in nkisim.run(kernel, _distinct_bf16((32, 64)), dry_run=True).trace.instructions
             if i.isa == "topk"]
    assert (ins.opcode, ins.engine, ins.attrs["n"], ins.attrs["k"]) == ("TOPK", "GpSimd", 1000, 40)
    assert [w.shape for w in ins.writes] == [(32, 3), (32, 3)]     # the ceil(40 / 16) positions it writes


def test_topk_rules():
    def call(src_shape, src_dt, val_shape, val_dt, idx_shape, idx_dt, n, **kw):
        def body(_):
            src = nl.ndarray(src_shape, dtype=src_dt, buffer=nl.sbuf)
            nisa.memset(dst=src, value=0.0)
            nisa.topk(val_dst=nl.ndarray(val_shape, dtype=val_dt, buffer=nl.sbuf),
                      idx_dst=nl.ndarray(idx_shape, dtype=idx_dt, buffer=nl.sbuf), src=src, n=n, **kw)
        return body
    ok = ((32, 4), nl.bfloat16, (32, 8), nl.bfloat16, (32, 8), nl.uint32, 64)
    run_tiles(call(*ok), DUMMY)
    cases = [
        ((24, 4), nl.bfloat16, (24, 8), nl.bfloat16, (24, 8), nl.uint32, 64, "24 partitions; topk's partition dim "
                                                                             "must be a multiple of 16"),
        ((32, 4), nl.float32, (32, 8), nl.bfloat16, (32, 8), nl.uint32, 64, "src dtype float32 is not supported"),
        ((32, 4), nl.bfloat16, (32, 8), nl.bfloat16, (32, 8), nl.int32, 64, "idx_dst must be uint32"),
        ((32, 4), nl.bfloat16, (32, 8), nl.bfloat16, (32, 8), nl.uint32, 7, r"n=7 is out of range; .*8 <= n < 65536"),
        ((32, 4), nl.bfloat16, (32, 8), nl.bfloat16, (32, 8), nl.uint32, 65, r"needs ceil\(n / 16\) = 5"),
        ((32, 4), nl.bfloat16, (32, 9), nl.bfloat16, (32, 9), nl.uint32, 8, "k=9 .* k <= n=8"),
        ((32, 4), nl.bfloat16, (32, 8), nl.bfloat16, (32, 6), nl.uint32, 64, "must have the same shape"),
        ((32, 4), nl.bfloat16, (16, 8), nl.bfloat16, (16, 8), nl.uint32, 64, r"must be 2-D \[32, k\]"),
    ]
    for *args, match in cases:
        fails(call(*args), outs=[], match=match)
    fails(call(*ok, sorted=True), outs=[], match=r"nki.isa.topk\(sorted=True\) is not emulated")
    run_tiles(call(*ok, sorted=False), DUMMY)


def test_topk_sorted_keyword_is_nki_07s():
    with nki_versions.emulating("0.6"):
        with pytest.raises(TypeError, match="unexpected keyword argument 'sorted'"):
            run_tiles(lambda _: nisa.topk(val_dst=None, idx_dst=None, src=None, n=8, sorted=False), DUMMY)
