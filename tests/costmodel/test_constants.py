"""Per-constant checks: the table is documented, and each rule gives the documented number."""
import dataclasses
import math

import pytest
from tracebuild import TraceBuilder

from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds
from nkisim.costmodel.dma import core_dma_bytes_per_s, data_seconds, dma_engines, hbm_share_bytes_per_s


def test_every_row_has_value_source_and_confidence():
    names = [c.name for c in K.TABLE]
    assert len(names) == len(set(names))
    for c in K.TABLE:
        assert c.source and c.unit and c.confidence in ("High", "Medium", "Medium-High", "Medium-Low",
                                                        "Low-Medium", "Low", "Derived", "Fitted"), c
    assert f"| dma_engine_bandwidth | {K.DMA_ENGINE_BYTES_PER_S:g} | 2.72e+10 .. 2.3e+10 | B/s |" in K.table_markdown()


def test_uncertain_rows_can_be_varied_and_are_restored():
    rows = {c.name: c for c in K.uncertain()}
    assert {"dma_engine_bandwidth", "dma_transfer_fixed", "hbm_efficiency", "tensor_tensor_slow"} <= set(rows)
    before = K.DMA_ENGINE_BYTES_PER_S
    with K.overridden(K.varied("high")):
        assert K.DMA_ENGINE_BYTES_PER_S == rows["dma_engine_bandwidth"].high == 23e9
        assert K.TENSOR_TENSOR_SLOW_FACTOR == 2
    assert K.DMA_ENGINE_BYTES_PER_S == before
    with pytest.raises(ValueError, match="cannot vary \\['sbuf_per_partition'\\]"):
        with K.overridden({"sbuf_per_partition": 1}):
            pass
    with pytest.raises(ValueError, match="end must be 'low' or 'high'"):
        K.varied("middle")


def test_documented_values():
    assert (K.TENSOR_CLOCK_HZ, K.VECTOR_CLOCK_HZ, K.SCALAR_CLOCK_HZ) == (2.4e9, 0.96e9, 1.2e9)
    assert core_dma_bytes_per_s() == 16 * K.DMA_ENGINE_BYTES_PER_S
    assert 23e9 <= K.DMA_ENGINE_BYTES_PER_S <= 27.2e9      # fitted inside the documented range
    assert K.HBM_STACK_BYTES_PER_S == 2.9e12 / 4           # one stack: 2.9 TB/s per chip / 4
    assert (K.SWDGE_S_PER_DMA, K.HWDGE_S_PER_DMA, K.DGE_NONE_S_PER_DMA) == (0.6e-6, 0.6e-6, 0.0)


def test_dma_efficiency_is_the_per_packet_overhead():
    # a row of s bytes costs s + 199 bytes of engine time: the walkthrough's 512 B rows at 0.79 of 2 KiB rows
    assert K.dma_efficiency(K.DMA_PACKET_OVERHEAD_BYTES) == pytest.approx(0.5)
    assert K.dma_efficiency(512) / K.dma_efficiency(2048) == pytest.approx(0.79, abs=0.01)
    assert 0.97 < K.dma_efficiency(8192) < K.dma_efficiency(1 << 20) < 1.0
    xs = [16, 32, 100, 256, 700, 2048, 3000, 8192, 40000]
    ys = [K.dma_efficiency(x) for x in xs]
    assert ys == sorted(ys)
    with pytest.raises(ValueError, match="bytes per partition must be > 0"):
        K.dma_efficiency(0)


def test_dge_seconds_rejects_unknown_mode():
    with pytest.raises(ValueError, match="unknown dge_mode 'fast'"):
        K.dge_seconds("fast")


def _one(engine, opcode, p=128, n=4096, dtype="bfloat16", buffer="sbuf", **attrs):
    b = TraceBuilder()
    src = b.sbuf(b.alloc(), p, n, dtype, buffer=buffer)
    src2 = b.sbuf(b.alloc(), p, n, dtype)
    srcs = (src, src2) if opcode == "tensor_tensor" else (src,)
    return b.compute(engine, opcode, b.sbuf(b.alloc(), p, n, dtype, role="dst"), *srcs, **attrs)


def test_activate_is_n_cycles_plus_overhead_regardless_of_partitions():
    t = compute_seconds(_one("Scalar", "activation"))
    assert t == pytest.approx((4096 + K.INSTRUCTION_OVERHEAD_CYCLES) / 1.2e9)
    assert compute_seconds(_one("Scalar", "activation", p=16)) == t    # time is per free element
    acc = compute_seconds(_one("Scalar", "activation", reads_accumulator=True))
    assert acc - t == pytest.approx(K.ACT_READ_ACCUMULATOR_CYCLES / 1.2e9)
    tiny = compute_seconds(_one("Scalar", "activation", n=1))
    assert tiny == pytest.approx((K.MIN_II_CYCLES + K.INSTRUCTION_OVERHEAD_CYCLES) / 1.2e9)


def test_topk_is_the_pages_4n_plus_k_gpsimd_cycles():
    b = TraceBuilder()
    snake = b.sbuf(b.alloc(), 128, 63)                         # ceil(1000 / 16) columns
    ins = b.compute("GpSimd", "topk", b.sbuf(b.alloc(), 128, 3, role="val_dst"), snake, n=1000, k=40)
    assert compute_seconds(ins) == pytest.approx((4 * 1000 + 40 + K.GPSIMD_START_CYCLES) / K.ENGINE_CLOCK_HZ["GpSimd"])


def test_vector_perf_mode_rules():
    over = K.INSTRUCTION_OVERHEAD_CYCLES
    bf16_mul = compute_seconds(_one("Vector", "tensor_tensor", op="multiply"))
    assert bf16_mul == pytest.approx((4096 / 2 + over) / 0.96e9)        # N, then x2 perf mode
    fp32_mul = compute_seconds(_one("Vector", "tensor_tensor", dtype="float32", op="multiply"))
    assert fp32_mul == pytest.approx((4096 + over) / 0.96e9)            # N: trn2's documented data path
    with K.overridden({"tensor_tensor_slow": 2}):                       # the 2.26 docstring's 2N
        assert compute_seconds(_one("Vector", "tensor_tensor", dtype="float32", op="multiply")) == \
            pytest.approx((2 * 4096 + over) / 0.96e9)
    psum_in = compute_seconds(_one("Vector", "tensor_tensor", dtype="float32", buffer="psum", op="multiply"))
    assert psum_in == pytest.approx((4096 + over) / 0.96e9)             # N with one input in PSUM
    assert compute_seconds(_one("Vector", "tensor_scalar")) == pytest.approx((4096 / 4 + over) / 0.96e9)
    assert compute_seconds(_one("Vector", "tensor_scalar", dtype="float32")) == pytest.approx((4096 / 2 + over) / 0.96e9)
    assert compute_seconds(_one("Vector", "reciprocal", dtype="float32")) == pytest.approx((8 * 4096 + over) / 0.96e9)


@pytest.mark.parametrize("psum_source, contiguous, speedup", [
    (False, True, 4), (False, False, 2), (True, True, 2), (True, False, 1)])
def test_tensor_copy_perf_mode_follows_the_trn2_conditions(psum_source, contiguous, speedup):
    """trn2's guide, "Vector Engine Performance Mode", for tensor_copy and tensor_scalar at bf16/fp16: 4x when
    all tensors are in SBUF with contiguous innermost elements; 2x when in SBUF but not contiguous, or contiguous
    with one of them in PSUM; no lift listed for a PSUM side that is not contiguous."""
    ins = _one("Vector", "tensor_copy", buffer="psum" if psum_source else "sbuf")
    if not contiguous:
        ins = dataclasses.replace(ins, writes=tuple(dataclasses.replace(o, contiguous=False) for o in ins.writes))
    over = K.INSTRUCTION_OVERHEAD_CYCLES
    assert compute_seconds(ins) == pytest.approx((4096 / speedup + over) / 0.96e9)


@pytest.mark.parametrize("src_dtype, dst_dtype, buffer, cycles", [
    ("float32", "float32", "sbuf", 4096 / 2), ("float32", "bfloat16", "psum", 4096),
    ("bfloat16", "float8_e4m3", "sbuf", 4096 / 2), ("float16", "float32", "sbuf", 4096 / 2),
    ("int32", "int32", "sbuf", 4096 / 2), ("bfloat16", "bfloat16", "sbuf", 4096 / 4)])
def test_one_input_vector_streams_follow_the_trn2_data_path(src_dtype, dst_dtype, buffer, cycles):
    """trn2's Compute Engine Specifications give the Vector engine 512 bf16/fp16 elements per cycle and 256 of
    any other dtype: a tensor_copy / tensor_scalar with any non-bf16/fp16 operand, all in SBUF and contiguous,
    streams 2 elements per partition per cycle; with a PSUM side it keeps one (a fp32 PSUM evacuation, as the
    published V0 tiled matmul's Vector time shows); bf16/fp16 throughout takes the performance-mode path (N/4
    here)."""
    over = K.INSTRUCTION_OVERHEAD_CYCLES
    for opcode in ("tensor_copy", "tensor_scalar"):
        b = TraceBuilder()
        src = b.sbuf(b.alloc(), 128, 4096, src_dtype, buffer=buffer)
        ins = b.compute("Vector", opcode, b.sbuf(b.alloc(), 128, 4096, dst_dtype, role="dst"), src)
        assert compute_seconds(ins) == pytest.approx((cycles + over) / 0.96e9)


def test_the_published_bf16_to_fp8_quantise_takes_the_256_element_path():
    """The rmsnorm_quant spec's profile: the quantising tensor_scalar of a [128, 16384] tile takes 8.7 us."""
    quantise = TraceBuilder()
    q = quantise.compute("Vector", "tensor_scalar", quantise.sbuf(quantise.alloc(), 128, 16384, "float8_e4m3", role="dst"),
                         quantise.sbuf(quantise.alloc(), 128, 16384, "bfloat16"))
    assert compute_seconds(q) == pytest.approx(8.7e-6, rel=0.03)


def test_unknown_engine_is_a_clear_error():
    with pytest.raises(ValueError, match="engine 'Matrix'"):
        compute_seconds(_one("Matrix", "tensor_copy"))


def test_dma_engines_and_bandwidth():
    """Engine k moves partitions 8k .. 8k+7 (SDK:nki/get-started/about/nki-dma-overview.rst, examples 1
    and 2): a transfer uses the engines of the partitions it spans, each moving its 8 rows."""
    b = TraceBuilder()
    full = b.dma(b.sbuf(b.alloc(), 128, 4096), b.hbm(b.alloc(), 0, 128 * 4096))
    part = b.dma(b.sbuf(b.alloc(), 16, 4096), b.hbm(b.alloc(), 0, 16 * 4096))
    few = b.dma(b.sbuf(b.alloc(), 4, 4096), b.hbm(b.alloc(), 0, 4 * 4096))
    straddling = b.dma(b.sbuf(b.alloc(), 8, 4096, p_lo=4), b.hbm(b.alloc(), 0, 8 * 4096))
    assert dma_engines(full) == tuple(range(16)) and dma_engines(part) == (0, 1) and dma_engines(few) == (0,)
    assert dma_engines(straddling) == (0, 1)
    per_engine = K.DMA_ENGINE_BYTES_PER_S * K.dma_efficiency(8192)
    assert data_seconds(full, 1) == pytest.approx(128 * 8192 / (16 * per_engine))
    # 16 rows on 2 engines: each engine moves 8 rows, as for a full tile
    assert data_seconds(part, 1) == pytest.approx(data_seconds(full, 1))
    # 4 rows on one engine: half a full tile's time for an eighth of its bytes
    assert data_seconds(few, 1) == pytest.approx(data_seconds(full, 1) / 2)


def test_a_four_partition_load_moves_on_one_engine_at_the_published_time():
    """The overview's example 1: A[4, 4096] bf16 HBM -> SBUF, 32 KiB, ran on one DMA engine in 1416 ns
    on trn2 (published profile). The model's data time for it, at the fitted engine rate, within 10%."""
    b = TraceBuilder()
    load = b.dma(b.sbuf(b.alloc(), 4, 4096), b.hbm(b.alloc(), 0, 4 * 4096))
    assert load.dma.nbytes == 32 * 1024 and dma_engines(load) == (0,)
    assert data_seconds(load, 1) == pytest.approx(1416e-9, rel=0.10)


def test_hbm_share_of_two_cores():
    b = TraceBuilder()
    full = b.dma(b.sbuf(b.alloc(), 128, 4096), b.hbm(b.alloc(), 0, 128 * 4096))
    # Two cores streaming from one stack: each gets the efficiency-scaled half, below its DMA peak.
    assert hbm_share_bytes_per_s(2) == K.HBM_EFFICIENCY * K.HBM_STACK_BYTES_PER_S / 2 < core_dma_bytes_per_s()
    assert data_seconds(full, 2) == pytest.approx(128 * 8192 / hbm_share_bytes_per_s(2))
