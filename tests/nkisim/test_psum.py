"""PSUM as a resource (banks, tile size, address=), the engines that may touch it, PSUM -> SBUF
evacuation, and dma_transpose."""
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
LINE = r"\(test_psum\.py:\d+\)$"


@nki.jit
def live_psum_tiles(x, count, reuse, cols):
    """`count` PSUM tiles of `cols` fp32, all live at once (reuse=False) or each dead before the next (reuse=True)."""
    out = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    tiles = []
    for i in range(count):
        ps = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.psum, name=f"ps{i}")
        nisa.nc_matmul(dst=ps, stationary=t[:, 0:128], moving=t[:, 0:cols])
        if reuse:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=ps, op=nl.add)
        tiles.append(ps)
    if not reuse:
        for ps in tiles:
            nisa.tensor_tensor(dst=acc, data1=acc, data2=ps, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_eight_live_banks_fit_nine_do_not():
    x = rand((128, 512))
    want = 8 * (x[:, 0:128].astype(np.float64).T @ x.astype(np.float64))
    np.testing.assert_allclose(live_psum_tiles(x, 8, False, 512), want, rtol=1e-5, atol=1e-3)
    with pytest.raises(NkiValidationError, match="PSUM capacity: program 0 needs 9 PSUM banks at once") as info:
        live_psum_tiles(x, 9, False, 512)
    msg = str(info.value)
    assert "trn2 has 8 banks of 2048 bytes per partition" in msg and "ps8 (128, 512) float32 (test_psum.py:" in msg
    assert re.search(LINE, msg)


@pytest.mark.parametrize("count, cols, fits", [
    (9, 8, True),        # nine 32-byte tiles share one bank
    (64, 8, True),       # 2 KiB of them: one bank
    (65, 8, True),       # a second bank
    (16, 256, True),     # 1 KiB tiles, two to a bank: 8 banks
    (17, 256, False),    # 9 banks
    (9, 384, False),     # 1.5 KiB tiles, one to a bank
])
def test_small_psum_tiles_share_banks(count, cols, fits):
    """No page says how the compiler places small PSUM tiles; their addresses have a finer alignment than a bank
    (tile_size.psum_min_align), so they pack into shared banks (foxl-ai/kiln's moe_dedupe, which trn2 runs,
    keeps ten PSUM tiles live, four of them small)."""
    x = rand((128, 512))
    if fits:
        nkisim.run(live_psum_tiles, x, count, False, cols, dry_run=True)
        return
    with pytest.raises(NkiValidationError, match="needs 9 PSUM banks at once"):
        nkisim.run(live_psum_tiles, x, count, False, cols, dry_run=True)


def test_dead_psum_tiles_free_their_bank():
    x = rand((128, 512))
    r = nkisim.run(live_psum_tiles, x, 20, True, 512, dry_run=True)
    assert sum(i.isa == "nc_matmul" for i in r.trace) == 20


@pytest.mark.parametrize("shape, dtype, ok", [
    ((128, 512), nl.float32, True), ((128, 1024), nl.bfloat16, True), ((128, 4, 128), nl.float32, True),
    ((128, 2, 2048), nl.float32, True), ((128, 4096), nl.float32, True),     # all 8 banks, used slice by slice
    ((128, 4097), nl.float32, False), ((128, 2, 2049), nl.float32, False), ((64, 8193), nl.bfloat16, False),
])
def test_a_psum_allocation_fits_the_16_kib_of_a_partition(shape, dtype, ok):
    @nki.jit
    def k(x):
        nl.ndarray(shape, dtype=dtype, buffer=nl.psum)

    if ok:
        k(np.zeros(1, F32))
        return
    with pytest.raises(NkiValidationError, match=r"nl.ndarray: PSUM capacity: .* needs \d+ bytes per partition, "
                                                 r"but PSUM has 16384 \(8 banks of 2048 bytes\)") as info:
        k(np.zeros(1, F32))
    assert re.search(LINE, str(info.value))


@nki.jit
def bank_slices(x, crossing):
    """A double-buffered (128, 2, 2048) fp32 accumulator (all 8 banks), zeroed and evacuated 4 banks at
    a time by the Vector engine (as nki-autotune's kernel_15, measured on trn2), written by matmuls in
    bank-sized slices, or (`crossing`) by one matmul whose output straddles two banks."""
    out = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.ndarray((128, 2, 2048), dtype=nl.float32, buffer=nl.psum)
    res = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.sbuf)
    for buf in range(2):
        nisa.memset(dst=acc[:, buf, :], value=0.0)
        for j in range(4):
            lo = j * 512 + (256 if crossing and j == 1 else 0)
            nisa.nc_matmul(dst=acc[:, buf, lo:lo + 512], stationary=t[:, 0:128], moving=t)
    nisa.tensor_copy(dst=res, src=acc[:, 1, :])
    nisa.dma_copy(dst=out, src=res)
    return out


def test_a_matmul_writes_one_bank_while_vector_accesses_may_span_several():
    x = rand((128, 512))
    r = nkisim.run(bank_slices, x, False)
    ref = x[:, 0:128].T.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(r.outputs, np.tile(ref, (1, 4)), rtol=1e-4, atol=1e-3)
    with pytest.raises(NkiValidationError, match=r"nc_matmul: dst: the Tensor engine writes one 2048-byte PSUM "
                                                 r"bank \(tile-size constraint #2.*spans bytes 3072\.\.5119 of each "
                                                 r"partition, banks 1\.\.2") as info:
        nkisim.run(bank_slices, x, True, dry_run=True)
    assert re.search(LINE, str(info.value))


def test_a_multi_bank_allocation_counts_every_bank_it_occupies():
    @nki.jit
    def k(x):
        t = nl.load(x)
        big = nl.ndarray((128, 2048), dtype=nl.float32, buffer=nl.psum)    # 4 banks
        small = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(5)]
        res = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
        for ps in small:
            nisa.nc_matmul(dst=ps, stationary=t[:, 0:128], moving=t)
        for j in range(4):     # the five small tiles are still live here: 4 + 5 banks
            nisa.nc_matmul(dst=big[:, j * 512:(j + 1) * 512], stationary=t[:, 0:128], moving=t)
        for ps in small:
            nisa.tensor_copy(dst=res, src=ps)

    with pytest.raises(NkiValidationError, match="needs 9 PSUM banks at once"):
        nkisim.run(k, rand((128, 512)), dry_run=True)


@nki.jit
def placed(x, addresses):
    out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    t = nl.load(x)
    acc = nl.zeros((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    tiles = [nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum, address=a) for a in addresses]
    for ps in tiles:
        nisa.nc_matmul(dst=ps, stationary=t, moving=t[:, 0:8])
    for ps in tiles:
        nisa.tensor_tensor(dst=acc, data1=acc, data2=ps, op=nl.add)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_address_places_tiles_on_banks_and_shared_banks_count_once():
    x = rand((128, 128))
    nkisim.run(placed, x, tuple((0, b * 2048) for b in range(8)), dry_run=True)
    # ten tiles on the same two banks (nki-library aliases banks on purpose): two banks in use
    nkisim.run(placed, x, tuple((0, (b % 2) * 2048) for b in range(10)), dry_run=True)
    with pytest.raises(NkiValidationError, match="needs 9 PSUM banks at once"):
        nkisim.run(placed, x, tuple((0, b * 2048) for b in range(8)) + (None,), dry_run=True)


@pytest.mark.parametrize("address, match", [
    ((0, 1024), "PSUM address byte offset 1024 does not start a bank; .* one of 0, 2048, 4096"),
    ((0, 16384), "PSUM address byte offset 16384 does not start a bank"),
    ((64, 0), r"address partition offset 64 with 128 partitions covers partitions 64\.\.191; psum has partitions 0\.\.127"),
    ((0, 2048.0), r"address must be a tuple \(partition_offset, free_offset\) of compile-time ints"),
])
def test_address_must_start_a_bank(address, match):
    with pytest.raises(NkiValidationError, match=match) as info:
        placed(rand((128, 128)), (address,))
    assert re.search(LINE, str(info.value))


def test_gpsimd_never_touches_psum():
    @nki.jit
    def memset_gpsimd(x):
        ps = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=ps, value=0.0, engine=nisa.engine.gpsimd)

    with pytest.raises(NkiValidationError, match="memset: dst is in psum, but this instruction runs on GpSimd, and "
                                                 "GpSimd cannot access PSUM") as info:
        memset_gpsimd(np.zeros(1, F32))
    assert re.search(LINE, str(info.value))


@nki.jit
def int32_add(x, engine):
    out = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.load(x)
    ps = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.psum)
    nisa.tensor_copy(dst=ps, src=t)
    res = nl.ndarray(x.shape, dtype=nl.int32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=res, data1=t, data2=ps, op=nl.add, engine=engine)
    nisa.dma_copy(dst=out, src=res)
    return out


def test_int32_tensor_tensor_with_a_psum_operand_falls_back_to_vector():
    x = np.arange(128 * 4, dtype=np.int32).reshape(128, 4)
    r = nkisim.run(int32_add, x, nisa.engine.unknown)
    assert np.array_equal(r.outputs, 2 * x)
    assert [i.engine for i in r.trace if i.isa == "tensor_tensor"] == ["Vector"]
    with pytest.raises(NkiValidationError, match="data2 is in psum, but this instruction runs on GpSimd"):
        int32_add(x, nisa.engine.gpsimd)


def test_plus_equals_on_a_tile_says_how_to_accumulate():
    @nki.jit
    def k(x):
        ps = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        ps += nl.load(x)

    with pytest.raises(NkiValidationError, match=r"NKI tensors have no '\+='; accumulate matmuls .*accumulate=True"):
        k(rand((128, 8)))


@nki.jit
def linear_bias(x, w, b):
    """y = x @ w + b: x [R, K] with R sharded over the programs, K tiled by 128 and accumulated in
    PSUM, the bias added on the PSUM -> SBUF evacuation (Scalar engine activation, bias column)."""
    R, K = x.shape
    N = w.shape[1]
    y = nl.ndarray((R, N), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = R // nl.num_programs()
    r0 = nl.program_id(0) * rows
    bias = nl.ndarray((N, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=bias, src=b)
    for r in range(r0, r0 + rows, 128):
        acc = nl.ndarray((N, 128), dtype=nl.float32, buffer=nl.psum)    # y.T tile: N on partitions
        for k in range(0, K, 128):
            xt = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_transpose(dst=xt, src=x[r:r + 128, k:k + 128])      # x tile as [K, R]
            wt = nl.ndarray((128, N), dtype=w.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=wt, src=w[k:k + 128, :])
            nisa.nc_matmul(dst=acc, stationary=wt, moving=xt, accumulate=k > 0)
        yt = nl.ndarray((N, 128), dtype=x.dtype, buffer=nl.sbuf)
        nisa.activation(dst=yt, op=nl.copy, data=acc, bias=bias)
        out = nl.ndarray((128, N), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=out, src=yt)
        nisa.dma_copy(dst=y[r:r + 128, :], src=out)
    return y


@pytest.mark.parametrize("lnc", [1, 2])
def test_tiled_linear_with_bias_on_evacuation_runs_and_profiles(lnc):
    x, w, b = rand((256, 256), 1).astype(BF16), rand((256, 64), 2).astype(BF16), rand((64, 1), 3)
    r = nkisim.run(linear_bias, x, w, b, lnc=lnc)
    want = x.astype(np.float64) @ w.astype(np.float64) + b.T
    np.testing.assert_allclose(r.outputs.astype(F32), want, rtol=2e-2, atol=5e-2)
    prof = nkisim.estimate(r.trace)
    assert prof.opcode_count("MATMUL", "Tensor") == 4 and prof.opcode_time("MATMUL", "Tensor") > 0


# --- dma_transpose ---------------------------------------------------------------------------------
@nki.jit
def dma_t(x, via_sbuf, axes, dge):
    shape = tuple([x.shape[a] for a in ((1, 0), (2, 1, 0), (3, 1, 2, 0))[x.ndim - 2]])
    out = nl.ndarray(shape, dtype=x.dtype, buffer=nl.shared_hbm)
    src = x
    if via_sbuf:
        src = nl.load(x)
    d = nl.ndarray(shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=d, src=src, axes=axes, dge_mode=dge)
    nisa.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize("shape, axes", [((96, 128), None), ((64, 32), (1, 0)), ((4, 8, 16), (2, 1, 0)),
                                         ((2, 3, 4, 16), (3, 1, 2, 0))])
@pytest.mark.parametrize("via_sbuf", [False, True])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_dma_transpose_permutes_bit_exactly(shape, axes, via_sbuf, dtype):
    x = rand(shape, 4).astype(dtype)
    x.flat[7] = np.nan
    r = nkisim.run(dma_t, x, via_sbuf, axes, nisa.dge_mode.unknown)
    perm = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}[x.ndim]
    assert np.array_equal(r.outputs.view(np.uint8), np.ascontiguousarray(x.transpose(perm)).view(np.uint8))
    (t,) = [i for i in r.trace if i.isa == "dma_transpose"]
    assert t.engine == "DMA" and t.dma.direction == ("sbuf->sbuf" if via_sbuf else "hbm->sbuf")


@pytest.mark.parametrize("x, axes, dge, match", [
    (rand((8, 8)), (0, 1), nisa.dge_mode.unknown, r"axes=\(0, 1\): a 2-D dma_transpose permutes by \(1, 0\)"),
    (rand((8, 8)).astype(np.int8), None, nisa.dge_mode.unknown, "DMA transpose moves 2- or 4-byte elements"),
    (rand((8, 8)), None, nisa.dge_mode.swdge, "dge_mode=swdge is the indirect"),
    # nki.isa.dma_transpose "DMA Direct Transpose Constraints": only unknown and hwdge
    (rand((8, 8)).astype(BF16), None, nisa.dge_mode.none, r"dge_mode=none: a direct dma_transpose takes dge_mode "
                                                          r"unknown or hwdge"),
    (rand((8, 8)), None, nisa.dge_mode.hwdge, "dge_mode=hwdge transposes 2-byte dtypes only"),
    (rand((8, 8)).astype(BF16), None, nisa.dge_mode.hwdge, r"a 2-D src needs exactly 16 rows"),
    (rand((16, 256)).astype(BF16), None, nisa.dge_mode.hwdge, "dst partition dimension 256 exceeds maximum 128"),
    (rand((3, 8, 16)).astype(BF16), None, nisa.dge_mode.hwdge, r"src.shape\[0\] in \(1, 2, 4, 8, 16\)"),
])
def test_dma_transpose_rules(x, axes, dge, match):
    with pytest.raises(NkiValidationError, match=match) as info:
        dma_t(x, False, axes, dge)
    assert re.search(LINE, str(info.value))


def test_dma_transpose_hwdge_shape_that_fits():
    x = rand((16, 128), 5).astype(BF16)
    assert np.array_equal(dma_t(x, False, None, nisa.dge_mode.hwdge), x.T)


def test_dma_transpose_writes_sbuf_only():
    @nki.jit
    def k(x):
        ps = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.dma_transpose(dst=ps, src=x)

    with pytest.raises(NkiValidationError, match="dst is in psum; dma_transpose writes to SBUF"):
        k(rand((8, 8)))


# --- dma_transpose, indirect form: gather rows by an index tile, then transpose ---------------------
@nki.jit
def gather_t(table, indices, rows, dge, oob):
    """rows of `table` [T, C] picked by `indices` (a [P, N] uint32 tile, read column by column),
    transposed into a [C, rows] tile."""
    cols = table.shape[1]
    index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=indices)
    d = nl.ndarray((cols, rows), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=d, value=-1.0)
    view = table.ap(pattern=[[cols, rows], [1, cols]], vector_offset=index, indirect_dim=0)
    nisa.dma_transpose(dst=d, src=view, dge_mode=dge, oob_mode=oob)
    out = nl.ndarray((cols, rows), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


TABLE = rand((300, 48), 6).astype(BF16)


@pytest.mark.parametrize("index_shape, rows", [((16, 1), 16), ((128, 1), 128), ((128, 3), 336), ((128, 2), 240)])
def test_gather_transpose_reads_the_index_tile_column_by_column(index_shape, rows):
    idx = np.random.default_rng(7).integers(0, TABLE.shape[0], index_shape).astype(np.uint32)
    got = gather_t(TABLE, idx, rows, nisa.dge_mode.unknown, nisa.oob_mode.error)
    want = TABLE[idx.T.reshape(-1)[:rows]].T
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16))


def test_gather_transpose_out_of_bounds_rows_fail_or_are_skipped():
    idx = np.arange(16, dtype=np.uint32).reshape(16, 1)
    idx[3, 0] = 10_000
    with pytest.raises(NkiValidationError, match="oob_mode"):
        gather_t(TABLE, idx, 16, nisa.dge_mode.swdge, nisa.oob_mode.error)
    got = gather_t(TABLE, idx, 16, nisa.dge_mode.swdge, nisa.oob_mode.skip).astype(F32)
    keep = [r for r in range(16) if r != 3]
    np.testing.assert_array_equal(got[:, keep], TABLE[idx[keep, 0]].T.astype(F32))
    np.testing.assert_array_equal(got[:, 3], np.full(48, -1.0, F32))    # the skipped row's column is untouched


@nki.jit
def transpose_at(table, offset, as_register, oob):
    """16 rows of `table` from a run-time row offset (a scalar_offset view), transposed by the DMA."""
    at = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=at, src=offset)
    if as_register:
        reg = nisa.register_alloc(0)
        nisa.register_load(reg, at)
        at = reg
    d = nl.ndarray((table.shape[1], 16), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=d, value=-1.0)
    view = table.ap(pattern=[[table.shape[1], 16], [1, table.shape[1]]], offset=0, scalar_offset=at, indirect_dim=0)
    nisa.dma_transpose(dst=d, src=view, oob_mode=oob)
    out = nl.ndarray((table.shape[1], 16), dtype=table.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=d)
    return out


@pytest.mark.parametrize("as_register", [False, True])
def test_transpose_from_a_scalar_offset_skips_a_transfer_out_of_bounds(as_register):
    """NKI 0.5.0's notes: "nki.isa.dma_transpose with scalar_offset now supports oob_mode.skip for runtime indirect
    indexing": an offset in bounds transposes its rows, one out of bounds fails or (skip) leaves dst as it was."""
    for oob in (nisa.oob_mode.error, nisa.oob_mode.skip):
        got = transpose_at(TABLE, np.array([[7]], np.int32), as_register, oob)
        assert np.array_equal(got.view(np.uint16), TABLE[7:23].T.view(np.uint16))
    with pytest.raises(NkiValidationError, match="outside the"):
        transpose_at(TABLE, np.array([[290]], np.int32), as_register, nisa.oob_mode.error)
    skipped = transpose_at(TABLE, np.array([[290]], np.int32), as_register, nisa.oob_mode.skip).astype(F32)
    np.testing.assert_array_equal(skipped, np.full((48, 16), -1.0, F32))


@pytest.mark.parametrize("table, index, rows, dge, match", [
    (TABLE.astype(F32), np.zeros((16, 1), np.uint32), 16, nisa.dge_mode.unknown, "2-byte dtypes only, got float32"),
    (TABLE, np.zeros((16, 1), np.uint32), 16, nisa.dge_mode.hwdge, "lowered to software DGE"),
    (TABLE, np.zeros((16, 1), np.int32), 16, nisa.dge_mode.unknown, "takes uint32 indices"),
    (TABLE, np.zeros((24, 1), np.uint32), 16, nisa.dge_mode.unknown, r"indices.shape\[0\] = 24 must be in \[16, 128\]"),
    (TABLE, np.zeros((64, 2), np.uint32), 128, nisa.dge_mode.unknown, r"indices.shape\[0\] must be exactly 128"),
    (TABLE, np.zeros((32, 1), np.uint32), 24, nisa.dge_mode.unknown, r"src.shape\[0\] = 24 must be divisible by 16"),
    (TABLE, np.zeros((16, 1), np.uint32), 32, nisa.dge_mode.unknown, "leading count 32 exceeds the 16 indices"),
])
def test_gather_transpose_rules(table, index, rows, dge, match):
    with pytest.raises(NkiValidationError, match=match) as info:
        gather_t(table, index, rows, dge, nisa.oob_mode.error)
    assert re.search(LINE, str(info.value))


def test_dma_copy_gather_still_takes_one_index_per_partition():
    @nki.jit
    def k(table, indices):
        index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=indices)
        d = nl.ndarray((128, 48), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=d, src=table.ap(pattern=[[48, 128], [1, 48]], vector_offset=index, indirect_dim=0))
        return d

    with pytest.raises(NkiValidationError, match=r"vector_offset must be a \[P, 1\] tile"):
        k(TABLE, np.zeros((64, 2), np.uint32))


def test_dma_transpose_of_a_scalar_offset_view_reads_at_the_run_time_offset():
    @nki.jit
    def k(x, start):
        s = nl.ndarray((1, 1), dtype=start.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=start)
        d = nl.ndarray((16, 32), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=x.ap(pattern=[[16, 32], [1, 16]], scalar_offset=s, indirect_dim=0))
        out = nl.ndarray((16, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=d)
        return out

    x = rand((96, 16), 9).astype(BF16)
    got = k(x, np.array([[40]], np.int32))
    assert np.array_equal(got.view(np.uint16), x[40:72].T.view(np.uint16))
