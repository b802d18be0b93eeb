"""The Tensor-engine cost rule on traces of real kernels: the documented initiation intervals, and
matmul kernels profiled like the others (Tensor lane, PSUM evacuation on Vector/Scalar)."""
from types import SimpleNamespace

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds, operations
from nkisim.costmodel.scheduler import schedule
from nkisim.costmodel.tensor_engine import matmul_cycles
from nkisim.profile.summary import estimate
from test_tensor_throttle import burst   # 32 matmuls accumulating into one PSUM tile, then an evacuation

BF16, F32, FP8 = ml_dtypes.bfloat16, np.float32, ml_dtypes.float8_e4m3


@nki.jit
def one_matmul(stat, mov, is_transpose, onezero):
    ps = nl.ndarray((stat.shape[-1], mov.shape[-1]), dtype=stat.dtype if is_transpose else nl.float32,
                    buffer=nl.psum)
    mode = nisa.matmul_perf_mode.double_row if stat.ndim == 3 else nisa.matmul_perf_mode.none
    nisa.nc_matmul(dst=ps, stationary=nl.load(stat), moving=nl.load(mov), is_transpose=is_transpose,
                   is_stationary_onezero=onezero, perf_mode=mode)


def matmul_seconds(stat, mov, is_transpose=False, onezero=False):
    trace = nkisim.run(one_matmul, stat, mov, is_transpose, onezero, dry_run=True).trace
    (mm,) = [i for i in trace if i.engine == "Tensor"]
    return compute_seconds(mm)


CYCLE = 1 / 2.4e9


# max(min(64, N_stationary), N_moving), never below the 64-cycle minimum initiation interval
@pytest.mark.parametrize("m, n, cycles", [(128, 512, 512), (128, 32, 64), (16, 8, 64), (100, 300, 300)])
def test_bf16_matmul_costs_max_of_min64_stationary_and_moving(m, n, cycles):
    s, mv = np.zeros((128, m), BF16), np.zeros((128, n), BF16)
    assert matmul_seconds(s, mv) == pytest.approx(cycles * CYCLE)


def test_fp32_costs_four_times_and_transpose_mode_or_onezero_two_times():
    s, mv = np.zeros((128, 128), F32), np.zeros((128, 512), F32)
    assert matmul_seconds(s, mv) == pytest.approx(4 * 512 * CYCLE)
    assert matmul_seconds(s, mv, onezero=True) == pytest.approx(2 * 512 * CYCLE)
    ident = np.zeros((128, 128), F32)
    assert matmul_seconds(s, ident, is_transpose=True) == pytest.approx(2 * 128 * CYCLE)


def test_tf32_runs_at_the_bf16_rate_and_fp32_at_a_quarter():
    # "79 BF16/FP16/TF32 TFLOPS" per NeuronCore-v3 Tensor engine (neuron-core-v3 page); tfloat32 tiles are not
    # emulated, so the rule is checked on the attributes a traced matmul carries
    def cycles(dtype):
        attrs = dict(stationary_free=128, moving_free=512, dtype=dtype, is_transpose=False, onezero=False)
        return matmul_cycles(SimpleNamespace(attrs=attrs))
    assert cycles("tfloat32") == cycles("bfloat16") == 512
    assert cycles("float32") == 4 * 512


def test_double_row_fp8_does_twice_the_work_in_the_same_time():
    s, mv = np.zeros((128, 2, 128), FP8), np.zeros((128, 2, 512), FP8)
    assert matmul_seconds(s, mv) == pytest.approx(512 * CYCLE)
    assert matmul_seconds(s[:, 0], mv[:, 0]) == pytest.approx(512 * CYCLE)
    # ... and the roofline counts that work: 2 x (128 x 2) x 128 x 512 FLOPs
    double, single = (next(i for i in nkisim.run(one_matmul, a, b, False, False, dry_run=True).trace
                           if i.engine == "Tensor") for a, b in ((s, mv), (s[:, 0], mv[:, 0])))
    assert operations(double) == 2 * operations(single) == 2.0 * 256 * 128 * 512


@nki.jit
def transposes(x):
    t = nl.load(x)
    ps = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=ps, data=t, engine=nisa.engine.tensor)
    small = nl.ndarray((32, 32), dtype=x.dtype, buffer=nl.sbuf)
    nisa.nc_transpose(dst=small, data=t[0:32, 0:32], engine=nisa.engine.vector)


def test_transpose_costs_by_engine():
    trace = nkisim.run(transposes, np.zeros((128, 100), BF16), dry_run=True).trace
    tensor, vector = [i for i in trace if i.isa == "nc_transpose"]
    assert compute_seconds(tensor) == pytest.approx(max(128, min(64, 100)) * CYCLE)
    assert compute_seconds(vector) == pytest.approx((K.MIN_II_CYCLES + K.INSTRUCTION_OVERHEAD_CYCLES) / 0.96e9)


def test_an_fp32_tensor_engine_transpose_runs_in_transpose_mode_like_the_matmul_one():
    """trainium2_arch.rst, "Built-in Transpose Support": nc_transpose(engine=tensor) and
    nc_matmul(is_transpose=True) both use transpose mode, a "2x speedup in FP32 transpose" over the fp32 rate."""
    def tensor_transpose(dtype):
        trace = nkisim.run(transposes, np.zeros((128, 128), dtype), dry_run=True).trace
        return compute_seconds(next(i for i in trace if i.isa == "nc_transpose" and i.engine == "Tensor"))
    assert tensor_transpose(BF16) == pytest.approx(128 * CYCLE)
    assert tensor_transpose(F32) == pytest.approx(2 * 128 * CYCLE)
    assert tensor_transpose(F32) == pytest.approx(matmul_seconds(np.zeros((128, 128), F32), np.zeros((128, 128), F32),
                                                                 is_transpose=True))


@nki.jit
def tiled_matmul(lhsT, rhs):
    K_, M = lhsT.shape
    N = rhs.shape[1]
    out = nl.ndarray((M, N), dtype=lhsT.dtype, buffer=nl.shared_hbm)
    for m in range(0, M, 128):
        for n in range(0, N, 512):
            acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
            for k in range(0, K_, 128):
                a = nl.ndarray((128, 128), dtype=lhsT.dtype, buffer=nl.sbuf)
                b = nl.ndarray((128, 512), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=a, src=lhsT[k:k + 128, m:m + 128])
                nisa.dma_copy(dst=b, src=rhs[k:k + 128, n:n + 512])
                nisa.nc_matmul(dst=acc, stationary=a, moving=b)
            res = nl.ndarray((128, 512), dtype=lhsT.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=out[m:m + 128, n:n + 512], src=res)
    return out


def test_a_tiled_matmul_profiles_with_tensor_time_and_psum_evacuation():
    lhsT, rhs = np.zeros((512, 256), BF16), np.zeros((512, 1024), BF16)
    with K.overridden({"tensor_throttle_floor": 1.0}):   # the cycle formula alone (throttling: test_tensor_throttle)
        prof = nkisim.profile(tiled_matmul, lhsT, rhs)
    assert prof.opcode_count("MATMUL", "Tensor") == 2 * 2 * 4
    # each matmul's span: its interval, then the pipeline latency until its result is in PSUM
    assert prof.opcode_time("MATMUL", "Tensor") == pytest.approx(16 * (512 + K.TENSOR_RESULT_LATENCY_CYCLES) * CYCLE)
    # evacuation: fp32 PSUM -> bf16 SBUF on Vector, no perf mode (a PSUM side, fp32 input): N cycles
    evac = prof.opcode_time("TENSOR_COPY", "Vector") / 4
    assert evac == pytest.approx((512 + K.INSTRUCTION_OVERHEAD_CYCLES) / 0.96e9)
    assert prof.total_time > prof.opcode_time("MATMUL", "Tensor")


@nki.jit
def dma_moves(x):
    """The same [128, 128] bf16 tile moved four ways: copy and transpose, from HBM and within SBUF."""
    a = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x, name="copy")
    nisa.dma_transpose(dst=b, src=x, name="transpose")
    nisa.dma_copy(dst=b, src=a, name="sbuf copy")
    nisa.dma_transpose(dst=a, src=b, name="sbuf transpose")


def test_dma_transposes_move_data_at_90_and_50_percent_of_a_copy():
    from nkisim.costmodel.dma import data_seconds

    trace = nkisim.run(dma_moves, np.zeros((128, 128), BF16), dry_run=True).trace
    t = {i.name: data_seconds(i, 1) for i in trace}
    assert t["transpose"] == pytest.approx(t["copy"] / 0.9)
    assert t["sbuf transpose"] == pytest.approx(t["sbuf copy"] / 0.5)


def _transpose_and_copy(partitions: int, inner: int):
    @nki.jit
    def kernel(x, y):
        out = nl.ndarray((partitions, inner), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=out, src=x, name="transpose")
        nisa.dma_copy(dst=out, src=y, name="copy")
    return kernel


@pytest.mark.parametrize("partitions, inner, fill", [
    (128, 128, 1.0), (64, 128, 0.5), (128, 24, 24 / 32), (100, 16, 100 / 128)])
def test_a_dma_transpose_writes_128_by_16_blocks_on_all_16_engines(partitions, inner, fill):
    """trn2's guide: the 16 engines write "a single [nl.par_dim(128), 16] SBUF tile in parallel at a time"; output
    partitions in multiples of 128 and an innermost free size in multiples of 16 are the "pre-requisite" for the
    best throughput. A partly filled block takes as long as a full one (the model's reading of "at the cost of
    DMA performance"): against a copy of the same bytes on the same engines, the transpose's 90% is scaled by
    the share of its blocks it fills."""
    from nkisim.costmodel.dma import data_seconds, dma_engines

    transpose, copy = nkisim.run(_transpose_and_copy(partitions, inner), np.zeros((inner, partitions), BF16),
                                 np.zeros((partitions, inner), BF16), dry_run=True).trace
    assert dma_engines(transpose) == tuple(range(16))
    copy_on_16 = data_seconds(copy, 1) * len(dma_engines(copy)) / 16
    assert data_seconds(transpose, 1) == pytest.approx(copy_on_16 / (K.DMA_TRANSPOSE_EFFICIENCY * fill))


def test_the_pipeline_accepts_matmuls_each_interval_and_their_result_is_ready_a_latency_later():
    trace = nkisim.run(burst, np.zeros((128, 128), BF16), np.zeros((128, 512), BF16), dry_run=True).trace
    with K.overridden({"tensor_throttle_floor": 1.0}):   # unthrottled: the interval is the cycle formula
        sched = schedule(trace)
        summary = estimate(trace, with_range=False)
    mm = sorted((s for s in sched.slots if s.opcode == "MATMUL"), key=lambda s: s.start)
    interval, latency = 512 * CYCLE, K.TENSOR_RESULT_LATENCY_CYCLES * CYCLE
    assert latency > 0
    for a, b in zip(mm, mm[1:]):
        assert b.start == pytest.approx(a.start + interval)        # not after a's result
    assert all(s.duration == pytest.approx(interval + latency) for s in mm)
    (copy,) = [s for s in sched.slots if s.opcode == "TENSOR_COPY"]
    assert copy.start == pytest.approx(mm[-1].end + K.SEMAPHORE_LATENCY_S)   # another engine waits for the result
    assert summary.engine_active_time["Tensor"] == pytest.approx(len(mm) * interval + latency)
