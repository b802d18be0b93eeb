"""The Tensor engine's documented dI/dt throttle (SDK:tools/neuron-explorer/overview-summary-page.rst,
"Understanding throttling"): a burst starts capped at ~50% of the bf16 peak and ramps to full over ~3 us;
utilization below 50% over a ~3 us window re-engages the cap; work below the cap is never slowed."""
import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim.costmodel import constants as K
from nkisim.costmodel.scheduler import schedule
from nkisim.costmodel.tensor_engine import utilization
from nkisim.costmodel.tensor_throttle import Throttle
from nkisim.profile.summary import estimate

BF16 = ml_dtypes.bfloat16
US = 1e-6
MATMUL = 512 / 2.4e9        # a bf16 [128, 128] x [128, 512] matmul's interval at the peak


def test_a_burst_starts_at_the_floor_and_reaches_the_peak_after_the_ramp():
    throttle, t = Throttle(), 0.0
    first = throttle.interval(t, MATMUL, 1.0)
    assert first == pytest.approx(MATMUL / K.TENSOR_THROTTLE_FLOOR)       # 2x at a 50% cap
    t += first
    while t < K.TENSOR_THROTTLE_RAMP_S:
        step = throttle.interval(t, MATMUL, 1.0)
        assert MATMUL < step <= first
        t += step
    assert throttle.interval(t, MATMUL, 1.0) == pytest.approx(MATMUL)     # ramped: the formula again


def test_work_below_the_floor_is_never_slowed():
    throttle = Throttle()
    assert all(throttle.interval(i * 4 * MATMUL, 4 * MATMUL, 0.25) == 4 * MATMUL for i in range(40))


@pytest.mark.parametrize("gap_us, throttled_again", [(0.5, False), (5.0, True)])
def test_an_idle_gap_longer_than_half_the_window_re_engages_the_cap(gap_us, throttled_again):
    throttle, t = Throttle(), 0.0
    while t < 2 * K.TENSOR_THROTTLE_RAMP_S:                                # one burst, ramped up
        t += throttle.interval(t, MATMUL, 1.0)
    after_gap = throttle.interval(t + gap_us * US, MATMUL, 1.0)
    assert (after_gap > 1.5 * MATMUL) == throttled_again


def test_utilization_is_flops_over_the_bf16_peak():
    trace = nkisim.run(burst, np.zeros((128, 128), BF16), np.zeros((128, 512), BF16), dry_run=True).trace
    mm = next(i for i in trace if i.isa == "nc_matmul")
    assert utilization(mm, MATMUL) == pytest.approx(1.0)
    assert utilization(mm, 4 * MATMUL) == pytest.approx(0.25)             # what fp32's four passes give
    assert utilization(mm, MATMUL / 2) == 1.0                             # never above the peak


@nki.jit
def pe_transpose(x):
    """One [128, 128] transpose on the Tensor engine (through the PE array, into PSUM)."""
    ps = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=ps, data=nl.load(x), engine=nisa.engine.tensor)


def test_a_pe_transpose_counts_its_flops_as_a_matmul_against_the_identity():
    trace = nkisim.run(pe_transpose, np.zeros((128, 128), BF16), dry_run=True).trace
    (t,) = [i for i in trace if i.isa == "nc_transpose"]
    assert utilization(t, 128 / 2.4e9) == pytest.approx(1.0)               # 2 x 128 x 128 x 128 in 128 cycles


@nki.jit
def burst(stat, mov):
    """32 matmuls back to back into one PSUM tile (operands loaded once), then one evacuation."""
    a, b = nl.load(stat), nl.load(mov)
    acc = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    for _ in range(32):
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray((128, 512), dtype=stat.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)


def _matmul_span(dtype) -> tuple[float, float]:
    """(first matmul's lane time, the burst's span) of `burst` in this dtype."""
    trace = nkisim.run(burst, np.zeros((128, 128), dtype), np.zeros((128, 512), dtype), dry_run=True).trace
    mm = sorted((s for s in schedule(trace).slots if s.opcode == "MATMUL"), key=lambda s: s.start)
    latency = K.TENSOR_RESULT_LATENCY_CYCLES / K.TENSOR_CLOCK_HZ
    return mm[0].duration - latency, mm[-1].end - mm[0].start


def test_a_bf16_burst_pays_the_ramp_and_an_fp32_one_does_not():
    first, span = _matmul_span(BF16)
    assert first == pytest.approx(MATMUL / K.TENSOR_THROTTLE_FLOOR)
    with K.overridden({"tensor_throttle_floor": 1.0}):
        _, unthrottled = _matmul_span(BF16)
    # a linear ramp from the floor loses (1 - floor) / 2 of the ramp's time (a little more here: each
    # matmul runs at the cap of its start)
    lost = (1 - K.TENSOR_THROTTLE_FLOOR) / 2 * K.TENSOR_THROTTLE_RAMP_S
    assert lost <= span - unthrottled <= 1.15 * lost
    first32, span32 = _matmul_span(np.float32)
    assert first32 == pytest.approx(4 * MATMUL)
    with K.overridden({"tensor_throttle_floor": 1.0}):
        assert _matmul_span(np.float32)[1] == pytest.approx(span32)


def test_a_pipelined_burst_on_the_critical_path_holds_no_more_than_the_total():
    """Each matmul's span overlaps the next one's (the result latency): the path counts each only until
    the next starts."""
    trace = nkisim.run(burst, np.zeros((128, 128), BF16), np.zeros((128, 512), BF16), dry_run=True).trace
    summary = estimate(trace, with_range=False)
    assert summary.bound_by == "Tensor"
    assert sum(summary.critical_path_time.values()) <= summary.total_time + 1e-12
