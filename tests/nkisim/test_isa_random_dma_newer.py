"""Random-number instructions (isa_random.py), dma_compute (isa_dma.py) and the NeuronCore-v4-only
APIs refused on trn2 (newer_cores.py)."""
import re
import warnings

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim

from helpers import rand, run_tiles
from nkisim import NkiValidationError, NkiWarning

F32, BF16 = np.float32, ml_dtypes.bfloat16
LINE = r"\(test_isa_random_dma_newer\.py:\d+\)$"


def _xorwow(state, n):
    """Marsaglia's XORWOW in plain Python ints (the reference the emulator's lanes must follow)."""
    x, y, z, w, v, d = (int(s) for s in state)
    out = []
    for _ in range(n):
        t = x ^ (x >> 2)
        x, y, z, w = y, z, w, v
        v = (v ^ (v << 4) ^ t ^ (t << 1)) & 0xFFFFFFFF
        d = (d + 362437) & 0xFFFFFFFF
        out.append((v + d) & 0xFFFFFFFF)
    return out, [x, y, z, w, v, d]


def test_gpsimd_rng_follows_xorwow_from_the_set_state_and_get_state_reads_it_back():
    seeds = np.random.default_rng(0).integers(1, 2**32, size=(4, 6), dtype=np.uint64).astype(np.uint32)

    def body(s, bits, small, state):
        nisa.rand_set_state(src_seeds=s)
        nisa.rng(dst=bits, engine=nisa.engine.gpsimd)
        nisa.rng(dst=small, engine=nisa.engine.gpsimd)
        nisa.rand_get_state(dst=state)
    bits, small, state = run_tiles(body, seeds, outs=[((4, 5), np.uint32), ((4, 3), np.int8), ((4, 6), np.uint32)])
    for p in range(4):
        draws, end = _xorwow(seeds[p], 8)
        assert bits[p].tolist() == draws[:5]
        assert small[p].tolist() == [np.uint32(d).astype(np.int8) for d in draws[5:]]   # low 8 bits
        assert state[p].tolist() == end


def test_vector_rng_is_reproducible_from_a_seed():
    def body(seed, a, b):
        nisa.set_rng_seed(src_seeds=seed)
        nisa.rng(dst=a)
        nisa.set_rng_seed(src_seeds=seed)
        nisa.rng(dst=b)
    a, b = run_tiles(body, np.array([[1234]], np.int32), outs=[((8, 16), np.uint16), ((8, 16), np.uint16)])
    assert np.array_equal(a, b) and len(np.unique(a)) > 100


def test_dropout_probability_edges_and_rate():
    x = rand((128, 256), 1, 1, 2)

    def body(t, p, none, every, some, per_row):
        nisa.dropout(dst=none, data=t, prob=0.0)
        nisa.dropout(dst=every, data=t, prob=1.0)
        nisa.dropout(dst=some, data=t, prob=0.25)
        nisa.dropout(dst=per_row, data=t, prob=p)
    p = np.where(np.arange(128) < 64, 0.0, 1.0).astype(F32).reshape(128, 1)
    none, every, some, per_row = run_tiles(body, x, p, outs=[((128, 256), F32)] * 4)
    assert np.array_equal(none, x) and np.all(every == 0)
    kept = some != 0
    assert np.array_equal(some[kept], x[kept]) and abs(1 - kept.mean() - 0.25) < 0.01   # unscaled survivors
    assert np.array_equal(per_row[:64], x[:64]) and np.all(per_row[64:] == 0)


def test_random_rules():
    def fails(body, *arrays, outs, match):
        with pytest.raises(NkiValidationError, match=match) as info:
            run_tiles(body, *arrays, outs=outs)
        assert re.search(LINE, str(info.value)), str(info.value)

    fails(lambda x, o: nisa.rng(dst=o), rand((4, 4)), outs=[((4, 4), F32)], match="must be an integer type")
    fails(lambda s: nisa.rand_set_state(src_seeds=s), np.zeros((4, 5), np.uint32), outs=[],
          match="6 elements per partition")
    fails(lambda s: nisa.rand_set_state(src_seeds=s, engine=nisa.engine.vector), np.zeros((4, 6), np.uint32),
          outs=[], match="NeuronCore-v4")
    fails(lambda x, o: nisa.dropout(dst=o, data=x, prob=1.5), rand((4, 4)), outs=[((4, 4), F32)],
          match=r"prob=1.5 must be a probability")
    fails(lambda x, p, o: nisa.dropout(dst=o, data=x, prob=p), np.ones((4, 4), np.int32), np.ones((4, 1), BF16),
          outs=[((4, 4), np.int32)], match="prob must be float32")


# --- dma_compute ---------------------------------------------------------------------------------
@nki.jit
def sum_three(a, b, c):
    out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=c)
    nisa.dma_compute(dst=out, srcs=[a, b, t], reduce_op=nl.add)
    return out


def test_dma_compute_sums_in_fp32_and_casts_once():
    a, b, c = rand((4, 64), 1), rand((4, 64), 2), rand((4, 64), 3)
    got = sum_three(a, b, c)
    assert np.array_equal(got.astype(F32), ((a + b) + c).astype(BF16).astype(F32))


def test_dma_compute_rules():
    @nki.jit
    def scaled(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a, a], reduce_op=nl.add, scales=[1.0, 2.0])
        return out
    with pytest.raises(NkiValidationError, match=r"every scale must be 1.0 .*\(dma_compute's page\)"):
        scaled(rand((2, 2)))

    @nki.jit
    def maxed(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_compute(dst=out, srcs=[a], reduce_op=nl.maximum)
        return out
    with pytest.raises(NkiValidationError, match=r"reduce_op=nl.maximum is not supported; dma_compute supports only nl.add"):
        maxed(rand((2, 2)))


# read-modify-write through a vector_offset view: a bf16 table [32, 8], rows picked by an index tile
TABLE = rand((32, 8), 4).astype(BF16)


@nki.jit
def gather_add(table, indices, acc0, oob):
    """acc = acc0 + table[indices] (gather RMW into SBUF)."""
    index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=indices)
    acc = nl.ndarray(acc0.shape, dtype=acc0.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=acc0)
    rows = table.ap(pattern=[[8, indices.shape[0]], [1, 8]], vector_offset=index, indirect_dim=0)
    nisa.dma_compute(dst=acc, srcs=[acc, rows], reduce_op=nl.add, oob_mode=oob)
    out = nl.ndarray(acc0.shape, dtype=acc0.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def scatter_add(table, indices, delta):
    """out = table, then out[indices] += delta (scatter RMW into HBM)."""
    out = nl.ndarray(table.shape, dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=table)
    index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=indices)
    d = nl.ndarray(delta.shape, dtype=delta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=d, src=delta)
    rows = out.ap(pattern=[[8, indices.shape[0]], [1, 8]], vector_offset=index, indirect_dim=0)
    nisa.dma_compute(dst=rows, srcs=[rows, d], reduce_op=nl.add)
    return out


def test_dma_compute_gather_rmw_adds_the_indexed_rows_in_fp32():
    idx = np.array([[5], [0], [31], [5]], np.uint32)
    acc0 = rand((4, 8), 5)
    got = gather_add(TABLE, idx, acc0, nisa.oob_mode.error)
    np.testing.assert_array_equal(got, acc0 + TABLE[idx[:, 0]].astype(F32))


def test_dma_compute_gather_rmw_skips_out_of_bounds_rows():
    idx = np.array([[1], [99], [2], [3]], np.uint32)
    acc0 = rand((4, 8), 6)
    with pytest.raises(NkiValidationError, match="oob_mode"):
        gather_add(TABLE, idx, acc0, nisa.oob_mode.error)
    got = gather_add(TABLE, idx, acc0, nisa.oob_mode.skip)
    np.testing.assert_array_equal(got[1], acc0[1])                    # the skipped row is left as it was
    np.testing.assert_array_equal(got[[0, 2, 3]], acc0[[0, 2, 3]] + TABLE[[1, 2, 3]].astype(F32))


def test_dma_compute_scatter_rmw_adds_into_the_indexed_hbm_rows():
    idx = np.array([[7], [2], [30]], np.uint32)
    delta = rand((3, 8), 7).astype(BF16)
    got = scatter_add(TABLE, idx, delta)
    want = TABLE.copy()
    want[[7, 2, 30]] = (TABLE[[7, 2, 30]].astype(F32) + delta.astype(F32)).astype(BF16)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_dma_compute_scatter_rmw_warns_about_repeated_indices():
    """unique_indices must be True: "non-unique indices not yet supported" (the dma_compute page); the toolchain
    cannot see index values, so a scatter that updates a row twice runs, with a warning. A gather may read a row
    twice."""
    with pytest.warns(NkiWarning, match=r"indices address 8 elements of dst more than once \(element 56 of the HBM "
                                        r"tensor 2 times\), but unique_indices is True"):
        scatter_add(TABLE, np.array([[7], [2], [7]], np.uint32), rand((3, 8), 8).astype(BF16))
    idx = np.array([[5], [5]], np.uint32)
    acc0 = rand((2, 8), 9)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(gather_add(TABLE, idx, acc0, nisa.oob_mode.error),
                                      acc0 + TABLE[[5, 5]].astype(F32))


def test_dma_compute_rmw_outside_the_documented_forms_is_refused():
    @nki.jit
    def three_sources(table, indices, acc0):
        index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=indices)
        acc = nl.ndarray(acc0.shape, dtype=acc0.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=acc, src=acc0)
        rows = table.ap(pattern=[[8, 4], [1, 8]], vector_offset=index, indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[acc, rows, acc], reduce_op=nl.add)

    @nki.jit
    def not_matching_dst(table, indices, acc0):
        index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=indices)
        acc = nl.ndarray(acc0.shape, dtype=acc0.dtype, buffer=nl.sbuf)
        other = nl.ndarray(acc0.shape, dtype=acc0.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=other, src=acc0)
        rows = table.ap(pattern=[[8, 4], [1, 8]], vector_offset=index, indirect_dim=0)
        nisa.dma_compute(dst=acc, srcs=[other, rows], reduce_op=nl.add)

    idx, acc0 = np.zeros((4, 1), np.uint32), rand((4, 8), 8)
    with pytest.raises(NkiValidationError, match="takes exactly 2 srcs, got 3") as info:
        three_sources(TABLE, idx, acc0)
    assert re.search(LINE, str(info.value))
    with pytest.raises(NkiValidationError, match="matches neither form"):
        not_matching_dst(TABLE, idx, acc0)


# --- NeuronCore-v4 only --------------------------------------------------------------------------
@pytest.mark.parametrize("call", [
    lambda t: nisa.quantize_mx(dst=t, src=t, dst_scale=t),
    lambda t: nisa.nc_matmul_mx(dst=t, stationary=t, moving=t, stationary_scale=t, moving_scale=t),
    lambda t: nisa.activate2(dst=t, op=nl.gelu, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.add),
    lambda t: nisa.exponential(dst=t, src=t),
    lambda t: nisa.rand2(dst=t, min=0.0, max=1.0),
])
def test_newer_core_instructions_are_refused_with_the_reason(call):
    @nki.jit
    def k(x):
        call(nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf))
    with pytest.raises(NkiValidationError, match=r"is available only on NeuronCore-v4 \(trn3\).*nkisim emulates "
                                                 r"trn2") as info:
        k(np.zeros(1, F32))
    assert re.search(LINE, str(info.value))


@pytest.mark.parametrize("dtype", [nl.float8_e4m3fn_x4, nl.float8_e5m2_x4, nl.float4_e2m1fn_x4])
def test_mx_packed_dtypes_exist_but_tensors_of_them_are_refused(dtype):
    @nki.jit
    def k(x):
        nl.ndarray((4, 4), dtype=dtype, buffer=nl.sbuf)
    with pytest.raises(NkiValidationError, match=rf"nl.ndarray: dtype nl.{dtype.name} \(.*nisa.nc_matmul_mx, which is "
                                                 r"available only on NeuronCore-v4"):
        k(np.zeros(1, F32))

    @nki.jit
    def v(x):
        t = nl.ndarray((4, 4), dtype=nl.uint8, buffer=nl.sbuf)
        t.view(dtype)
    with pytest.raises(NkiValidationError, match=f"view: dtype nl.{dtype.name}"):
        v(np.zeros(1, F32))


# --- nl.* callables lowering to these instructions -----------------------------------------------
def test_nl_random_seed_and_rand_reproduce_the_docs_example():
    @nki.jit
    def k(x):
        out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        seed = nl.full((1, 1), 42, dtype=nl.int32, buffer=nl.sbuf)
        nl.random_seed(seed)
        a = nl.rand((128, 512), dtype=nl.float32)
        nl.random_seed(seed)
        b = nl.rand((128, 512), dtype=nl.float32)
        nisa.dma_copy(dst=out[0], src=a)
        nisa.dma_copy(dst=out[1], src=b)
        return out
    r = nkisim.run(k, np.zeros(1, F32))
    a, b = r.outputs
    assert np.array_equal(a, b) and a.min() >= 0 and a.max() < 1 and abs(a.mean() - 0.5) < 0.01
    assert [i.attrs.get("via") for i in r.trace.instructions[1:4]] == ["nl.random_seed", "nl.rand", "nl.rand"]


def test_nl_rand_fills_an_hbm_tensor_through_sbuf_tiles_of_128_rows():
    # the rand page's buffer: "sbuf, psum, hbm"; rng writes SBUF or PSUM only, so HBM is filled by DMA
    @nki.jit
    def k(x):
        return nl.rand((300, 2, 16), dtype=nl.float32, buffer=nl.shared_hbm)
    r = nkisim.run(k, np.zeros(1, F32))
    a = r.outputs
    assert a.shape == (300, 2, 16) and a.min() >= 0 and a.max() < 1 and abs(a.mean() - 0.5) < 0.02
    assert not np.array_equal(a[:128], a[128:256])          # each tile draws its own bits
    kinds = [(i.opcode, i.attrs.get("via")) for i in r.trace.instructions]
    assert kinds == [("RNG", "nl.rand"), ("TENSOR_SCALAR", "nl.rand"), ("DMA", "nl.rand")] * 3


def test_nl_dropout_and_gather_flattened_lower_to_one_instruction_each():
    x = rand((16, 32), 1, 1, 2)
    idx = np.random.default_rng(3).integers(0, 32, size=(16, 8)).astype(np.uint32)

    @nki.jit
    def k(x, idx):
        out = nl.ndarray((16, 40), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        t, i = nl.load(x), nl.load(idx)
        nl.store(out[:, 0:32], nl.dropout(t, 0.0, dtype=nl.bfloat16))
        nl.store(out[:, 32:40], nl.gather_flattened(t, i, dtype=nl.bfloat16))
        return out
    got = k(x, idx).astype(F32)
    assert np.array_equal(got[:, :32], x.astype(BF16).astype(F32))
    assert np.array_equal(got[:, 32:], np.take_along_axis(x, idx.astype(np.int64), 1).astype(BF16).astype(F32))
