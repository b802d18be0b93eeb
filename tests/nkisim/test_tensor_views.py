"""NkiTensor view methods and access patterns (`.ap()`), checked against numpy views of the same
data. Semantics: nki.language.NkiTensor reference page and the access-pattern deep dive
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/deep-dives/nki-aps.html)."""
import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkisim import NkiValidationError


def copy_view(x, make_view, out_shape, out_dtype=None, on_chip=True):
    """Load x (HBM) into SBUF (or use it in HBM), DMA `make_view(tile)` to a fresh HBM output."""

    @nki.jit
    def kernel(a):
        src = a
        if on_chip:
            src = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=src, src=a)
        view = make_view(src)
        out = nl.ndarray(out_shape, dtype=out_dtype or a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=view)
        return out

    return kernel(x)


X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def test_ap_pattern_and_offset_select_a_window():
    """Deep dive's concrete example: t[0:16, 8:16] of a (16, 16) tensor is [[16, 16], [1, 8]] at offset 8."""
    x = np.arange(16 * 16, dtype=np.float32).reshape(16, 16)
    got = copy_view(x, lambda t: t.ap(pattern=[[16, 16], [1, 8]], offset=8), (16, 8))
    np.testing.assert_array_equal(got, x[:, 8:16])


def test_ap_five_dim_pattern_is_a_pooling_window():
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 6, 6)
    got = copy_view(x, lambda t: t.ap([[36, 2], [12, 3], [2, 3], [6, 2], [1, 2]]), (2, 3, 3, 2, 2))
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2, 3, 2).transpose(0, 1, 3, 2, 4))


def test_ap_offset_none_keeps_the_view_offset_and_int_adds_to_it():
    """API reference: offset=None inherits the view's storage offset, offset=N shifts by N more."""
    got = copy_view(X, lambda t: t[:, 8:].ap([[64, 128], [1, 4]]), (128, 4))
    np.testing.assert_array_equal(got, X[:, 8:12])
    got = copy_view(X, lambda t: t[:, 8:].ap([[64, 128], [1, 4]], offset=2), (128, 4))
    np.testing.assert_array_equal(got, X[:, 10:14])


def test_ap_dtype_reinterprets_with_element_counts_of_the_new_dtype():
    x = np.arange(128 * 8, dtype=np.int32).reshape(128, 8)
    got = copy_view(x, lambda t: t.ap([[16, 128], [1, 16]], dtype=nl.bfloat16), (128, 16), nl.bfloat16)
    np.testing.assert_array_equal(got.view(np.uint16), x.view(np.uint16))


def test_ap_on_chip_cannot_skip_partitions():
    """Deep dive: the step of an on-chip pattern's leading pair must be the free size (every partition)."""
    with pytest.raises(NkiValidationError, match="partition cannot be skipped"):
        copy_view(X, lambda t: t.ap([[128, 64], [1, 64]]), (64, 64))


def test_ap_on_a_column_slice_may_step_partitions_by_the_views_free_size():
    """A [P, F] column slice of a [P, 2F] tile: the leading step F (the view's free size) and 2F (the
    storage's) both mean "next partition"; anything else skips partitions."""
    big = np.arange(16 * 64, dtype=np.float32).reshape(16, 64)

    @nki.jit
    def k(a, step):
        t = nl.ndarray((16, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        out = nl.ndarray((16, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t[:, 0:32].ap([[step, 16], [1, 8]], offset=None))
        return out

    for step in (32, 64):
        np.testing.assert_array_equal(k(big, step), big[:, 0:8])
    with pytest.raises(NkiValidationError, match="partition cannot be skipped"):
        k(big, 128)


def test_ap_outside_the_storage_is_an_error_where_an_instruction_uses_it():
    with pytest.raises(NkiValidationError, match=r"dma_copy: src is an \.ap\(\) view built at test_tensor_views.py:\d+ "
                                                 r"whose pattern \[\[64, 128\], \[1, 64\]\] at offset 1 reaches elements "
                                                 r"1\.\.8192, outside the 8192 float32 elements"):
        copy_view(X, lambda t: t.ap([[64, 128], [1, 64]], offset=1), (128, 64))
    with pytest.raises(NkiValidationError, match=r"index: this tensor is an \.ap\(\) view built at"):
        copy_view(X, lambda t: t.ap([[64, 128], [1, 64]], offset=1)[:, 0:8], (128, 8))


@nki.jit
def guarded_last_column(x):
    """nki-library's output_projection_tkg shape: a strided view per column step, built one step past the
    end and used only under a guard ("the last psum tile may be incomplete")."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    out = nl.ndarray((128, 2, 32), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in range(3):
        every_other = t.ap(pattern=[[64, 128], [2, 32]], offset=i)
        if i < 2:
            nisa.dma_copy(dst=out[:, i, :], src=every_other)
    return out


def test_an_unused_ap_view_outside_the_storage_is_not_an_error():
    got = guarded_last_column(X)
    np.testing.assert_array_equal(got, np.stack([X[:, 0::2], X[:, 1::2]], axis=1))


def test_ap_in_hbm_can_broadcast_with_step_zero():
    got = copy_view(X, lambda t: t.ap([[64, 4], [0, 3], [1, 2]]), (4, 3, 2), on_chip=False)
    np.testing.assert_array_equal(got, np.broadcast_to(X[:4, None, :2], (4, 3, 2)))


def test_step_zero_destination_keeps_the_last_value_written():
    """A [0, n] destination pair names one address n times (nki-library writes activation_reduce's unwanted
    dst so, keeping only reduce_res): the address holds the last element in access order, reduce_res all."""
    x = np.random.default_rng(3).standard_normal((128, 64)).astype(np.float32)

    @nki.jit
    def k(a):
        t = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        scratch = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        sums = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a)
        nisa.activation_reduce(dst=scratch.ap(pattern=[[1, 128], [0, 64]]), op=nl.square, data=t,
                               reduce_op=nl.add, reduce_res=sums, bias=0.0)
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:1], src=scratch)
        nisa.dma_copy(dst=out[:, 1:2], src=sums)
        return out

    got = k(x)
    np.testing.assert_array_equal(got[:, 0], x[:, -1] ** 2)
    np.testing.assert_allclose(got[:, 1], (x ** 2).sum(1), rtol=1e-5)


def test_slice_pattern_matches_the_hand_written_ap():
    """Deep dive: t.slice(dim=1, start=8, end=24) == t.ap([[64, 128], [1, 16]], offset=8)."""
    seen = {}
    record = seen.update

    def view(t):
        u = t.slice(dim=1, start=8, end=24)
        v = t.ap(pattern=[[64, 128], [1, 16]], offset=8)
        record(u=u.get_pattern(), uo=u.offset, v=v.get_pattern(), vo=v.offset)
        return u

    got = copy_view(X, view, (128, 16))
    assert seen == {"u": [[64, 128], [1, 16]], "uo": 8, "v": [[64, 128], [1, 16]], "vo": 8}
    np.testing.assert_array_equal(got, X[:, 8:24])


@pytest.mark.parametrize("make, shape, want", [
    (lambda t: t.slice(1, 0, 64, 2), (128, 32), lambda x: x[:, 0:64:2]),
    (lambda t: t.reshape_dim(1, (4, -1)), (128, 4, 16), lambda x: x.reshape(128, 4, 16)),
    (lambda t: t.reshape_dim(1, (4, 16)).permute((0, 2, 1)), (128, 16, 4),
     lambda x: x.reshape(128, 4, 16).transpose(0, 2, 1)),
    (lambda t: t.reshape_dim(1, (2, 4, 8)).flatten_dims(1, 2), (128, 8, 8), lambda x: x.reshape(128, 8, 8)),
    (lambda t: t.reshape_dim(1, (8, 8)).select(1, 3), (128, 8), lambda x: x.reshape(128, 8, 8)[:, 3]),
    (lambda t: t.expand_dim(1).squeeze_dim(1), (128, 64), lambda x: x),
    (lambda t: t.slice(1, 5, 6).expand_dim(1).broadcast(2, 1).broadcast(1, 3), (128, 3, 1),
     lambda x: np.broadcast_to(x[:, None, 5:6], (128, 3, 1))),
    (lambda t: t.rearrange(("b", ("h", "w")), ("b", "w", "h"), {"h": 4}), (128, 16, 4),
     lambda x: x.reshape(128, 4, 16).transpose(0, 2, 1)),
])
def test_view_primitives_match_numpy(make, shape, want):
    np.testing.assert_array_equal(copy_view(X, make, shape), want(X))


def test_queries_contiguity_and_pattern():
    seen = {}
    record = seen.update

    def view(t):
        p = t.reshape_dim(1, (4, 16)).permute((0, 2, 1))
        record(full=t.is_contiguous(), part=t[:, 0:32].is_contiguous(), perm=p.is_contiguous(),
                    pattern=p.get_pattern(), indirect=p.is_indirect())
        return t

    copy_view(X, view, (128, 64))
    assert seen == {"full": True, "part": True, "perm": False, "pattern": [[64, 128], [1, 16], [16, 4]],
                    "indirect": False}


@pytest.mark.parametrize("make, match", [
    (lambda t: t.permute((1, 0)), "partition dim stays outermost"),
    (lambda t: t.broadcast(1, 4), "only a size-1 dim"),
    (lambda t: t.squeeze_dim(1), "only a size-1 dim"),
    (lambda t: t.reshape_dim(0, (2, 64)), "partition dim"),
    (lambda t: t.slice(1, 10, 5), "start < end"),
    (lambda t: t.select(1, 64), "out of range"),
    (lambda t: t.reshape_dim(1, (3, -1)), "cannot split"),
    (lambda t: t.reshape_dim(1, (4, 16)).permute((0, 2, 1)).flatten_dims(1, 2), "not contiguous"),
    (lambda t: t.indirect(t), "NeuronCore-v4"),
])
def test_view_rule_violations_are_errors(make, match):
    with pytest.raises(NkiValidationError, match=match):
        copy_view(X, make, (128, 64))


def test_reinterpret_cast_is_view():
    x = np.arange(128 * 4, dtype=np.float32).reshape(128, 4)
    got = copy_view(x, lambda t: t.reinterpret_cast(nl.uint8), (128, 16), nl.uint8)
    np.testing.assert_array_equal(got, x.view(np.uint8))


# --- dynamic (indirect) access -------------------------------------------------------------------
def indirect_copy(a, idx, make_view, out_shape, oob_mode=None, into=None, dge_mode=None):
    """DMA `make_view(a, index_tile)` (HBM -> SBUF) and the tile back to a fresh HBM output."""

    @nki.jit
    def kernel(a, i, init):
        index = nl.ndarray(i.shape, dtype=i.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=i)
        tile = nl.ndarray(out_shape, dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=init)
        kw = {} if oob_mode == None else {"oob_mode": oob_mode}
        kw.update({} if dge_mode is None else {"dge_mode": dge_mode})
        nisa.dma_copy(dst=tile, src=make_view(a, index), **kw)
        out = nl.ndarray(out_shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out

    init = np.full(out_shape, -1, a.dtype) if into is None else into
    return kernel(a, idx, init)


A = np.arange(4 * 128 * 16, dtype=np.float32).reshape(4 * 128, 16)


def test_scalar_offset_adds_index_times_the_elements_right_of_indirect_dim():
    """Deep dive: start = offset + scalar_offset * prod(shape[indirect_dim+1:])."""
    got = indirect_copy(A, np.array([[3 * 128]], np.int32),
                        lambda a, i: a.ap([[16, 128], [1, 8]], offset=2, scalar_offset=i, indirect_dim=0), (128, 8))
    np.testing.assert_array_equal(got, A[384:512, 2:10])


def test_scalar_offset_on_a_permuted_view_steps_by_that_dims_stride():
    """NkiTensor.ap: indirect_dim is the "dimension in self.shape whose stride scales the indirect scalar/vector
    offset". On a contiguous tensor that stride is prod(shape[indirect_dim+1:]) (above); on A.T, dim 0 steps one
    element of A, not 512 (nki-library's attention_tkg offsets a permuted block table so)."""
    got = indirect_copy(A, np.array([[3]], np.int32),
                        lambda a, i: a.permute([1, 0]).ap([[16, 128], [1, 1]], scalar_offset=i, indirect_dim=0),
                        (128, 1))
    np.testing.assert_array_equal(got, A[0:128, 3:4])


def test_a_dynamic_start_address_needs_software_or_hardware_dge():
    """dma_copy page: "When either sw_dge or hw_dge mode is used, the src and dst tensors can have a dynamic
    start address"; the DGE deep dive: dge_mode none "Cannot handle dynamic (runtime-computed) addresses"."""
    view = lambda a, i: a.ap([[16, 128], [1, 8]], offset=2, scalar_offset=i, indirect_dim=0)
    for mode in (nisa.dge_mode.swdge, nisa.dge_mode.hwdge, nisa.dge_mode.unknown):
        got = indirect_copy(A, np.array([[128]], np.int32), view, (128, 8), dge_mode=mode)
        np.testing.assert_array_equal(got, A[128:256, 2:10])
    with pytest.raises(NkiValidationError, match=r"dge_mode=none builds the descriptors at compile time, so it takes "
                                                 r"no dynamic \(runtime\) start address; use dge_mode swdge or hwdge"):
        indirect_copy(A, np.array([[128]], np.int32), view, (128, 8), dge_mode=nisa.dge_mode.none)


def test_dynamic_select_picks_the_runtime_batch():
    a3 = A.reshape(4, 128, 16)
    got = indirect_copy(a3, np.array([[2]], np.int32), lambda a, i: a.select(0, i), (128, 16))
    np.testing.assert_array_equal(got, a3[2])


def test_vector_offset_gathers_one_row_per_partition():
    rows = np.array([5, 0, 511, 7] * 16, np.int32).reshape(64, 1)
    got = indirect_copy(A, rows, lambda a, i: a.ap([[16, 64], [1, 16]], 0, vector_offset=i, indirect_dim=0), (64, 16))
    np.testing.assert_array_equal(got, A[rows[:, 0]])


def test_vector_offset_index_may_carry_trailing_size_one_dims():
    """An index view [P, 1, 1] (nki-library's router_topk scatter) names the same indices as [P, 1]."""
    rows = np.array([5, 0, 511, 7] * 16, np.int32).reshape(64, 1)
    got = indirect_copy(A, rows, lambda a, i: a.ap([[16, 64], [1, 16]], 0, indirect_dim=0,
                                                  vector_offset=i.ap([[1, 64], [1, 1], [1, 1]])), (64, 16))
    np.testing.assert_array_equal(got, A[rows[:, 0]])


def test_vector_select_is_the_same_gather():
    rows = np.arange(0, 128, 2, dtype=np.int32).reshape(64, 1)
    got = indirect_copy(A, rows, lambda a, i: a.vector_select(0, i), (64, 16))
    np.testing.assert_array_equal(got, A[rows[:, 0]])


def test_out_of_bounds_index_is_an_error_by_default_and_skipped_with_oob_skip():
    rows = np.array([[1], [10_000], [2], [-1]], np.int32)
    make = lambda a, i: a.vector_select(0, i)  # noqa: E731
    with pytest.raises(NkiValidationError, match="oob_mode"):
        indirect_copy(A, rows, make, (4, 16))
    got = indirect_copy(A, rows, make, (4, 16), oob_mode=nisa.oob_mode.skip)
    np.testing.assert_array_equal(got[[0, 2]], A[[1, 2]])
    np.testing.assert_array_equal(got[[1, 3]], np.full((2, 16), -1, np.float32))   # skipped rows untouched


def test_vector_offset_scatter_writes_rows_of_an_hbm_output():
    rows = np.array([[3], [0], [6]], np.int32)

    @nki.jit
    def scatter(src, i):
        index = nl.ndarray(i.shape, dtype=i.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=i)
        tile = nl.ndarray(src.shape, dtype=src.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=src)
        out = nl.ndarray((8, 16), dtype=src.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=nl.zeros((8, 16), dtype=src.dtype, buffer=nl.sbuf))
        nisa.dma_copy(dst=out.vector_select(0, index), src=tile)
        return out

    src = np.arange(3 * 16, dtype=np.float32).reshape(3, 16)
    want = np.zeros((8, 16), np.float32)
    want[[3, 0, 6]] = src
    np.testing.assert_array_equal(scatter(src, rows), want)


def test_indirect_views_refuse_a_second_indirection_and_indexing():
    with pytest.raises(NkiValidationError, match="already indirect"):
        indirect_copy(A, np.array([[1]], np.int32), lambda a, i: a.select(0, i).ap([[16, 1], [1, 16]],
                                                                                    scalar_offset=i), (1, 16))
    with pytest.raises(NkiValidationError, match="indexed further"):
        indirect_copy(A, np.array([[1]], np.int32), lambda a, i: a.vector_select(0, i)[0:1], (1, 16))


def test_dynamic_select_on_chip_in_a_compute_instruction():
    """A scalar-offset SBUF view is resolved when the instruction runs (the index is read then)."""

    @nki.jit
    def kernel(x, i):
        index = nl.ndarray(i.shape, dtype=i.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=i)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        col = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=col, src=t.reshape_dim(1, (4, 16)).select(1, index))
        out = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=col)
        return out

    got = kernel(X, np.array([[2]], np.int32))
    np.testing.assert_array_equal(got, X.reshape(128, 4, 16)[:, 2])


def test_bf16_dtype_survives_views():
    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8).astype(ml_dtypes.bfloat16)
    got = copy_view(x, lambda t: t.slice(1, 2, 6), (128, 4))
    np.testing.assert_array_equal(got, x[:, 2:6])


def test_indirect_views_in_a_dry_run_trace_without_reading_indexes():
    import nkisim

    @nki.jit
    def kernel(a, i):
        index = nl.ndarray(i.shape, dtype=i.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=i)
        t = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=a.vector_select(0, index))
        s = nl.ndarray((64, 4), dtype=a.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=s, src=t.reshape_dim(1, (4, 4)).select(1, index[0:1, :]))
        out = nl.ndarray((64, 16), dtype=a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    run = nkisim.run(kernel, A, np.full((64, 1), 10_000, np.int32), dry_run=True)
    assert [ins.isa for ins in run.trace.instructions].count("dma_copy") == 3


def test_views_of_indirect_views_keep_the_indirection():
    a3 = A.reshape(4, 128, 16)
    got = indirect_copy(a3, np.array([[1]], np.int32), lambda a, i: a.select(0, i).slice(1, 4, 12).slice(0, 0, 64),
                        (64, 8))
    np.testing.assert_array_equal(got, a3[1, 0:64, 4:12])
    rows = np.array([[3], [1]], np.int32)
    got = indirect_copy(A, rows, lambda a, i: a.vector_select(0, i).slice(1, 2, 6), (2, 4))
    np.testing.assert_array_equal(got, A[[3, 1], 2:6])
    with pytest.raises(NkiValidationError, match="takes part in this view's indirection"):
        indirect_copy(A, rows, lambda a, i: a.vector_select(0, i).slice(0, 0, 1), (1, 16))
