"""An SBUF/PSUM access with a wide innermost stride runs at half bandwidth.

SDK:nki/guides/architecture/trainium_inferentia2_arch.rst, "Performance Consideration" (access pattern):
with the most-minor free-dim stride under 16 bytes an interface supplies its peak; "If the most-minor F
dimension stride exceeds 16 bytes, the achievable bandwidth of each tensor read/write interface will be
half of the peak bandwidth, which translates to roughly 50% performance hit on the instructions"."""
from __future__ import annotations

import pytest
import torch

import nkisim
from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds, rule_cycles, wide_stride

import nki
import nki.isa as nisa
import nki.language as nl

N = 512   # elements per partition each instruction streams


def _copy_with_step(step: int, engine):
    """One fp32 copy of N elements per partition taken every `step` elements of a wider tile."""
    @nki.jit
    def kernel(x):
        wide = nl.ndarray((128, N * step), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wide, src=x)
        out = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=wide[:, 0:N * step:step], engine=engine)
        result = nl.ndarray((128, N), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=result, src=out)
        return result
    return kernel


def _copy(step: int, engine=nisa.engine.vector):
    trace = nkisim.run(_copy_with_step(step, engine), torch.empty(128, N * step), dry_run=True).trace
    (copy,) = [i for i in trace.instructions if i.isa == "tensor_copy"]
    return copy


@pytest.mark.parametrize("engine", [nisa.engine.vector, nisa.engine.scalar, nisa.engine.gpsimd])
def test_a_stride_over_16_bytes_halves_the_streaming_rate(engine):
    contiguous, step4, step8 = (_copy(step, engine) for step in (1, 4, 8))   # fp32: 4, 16 and 32 bytes apart
    assert [wide_stride(i) for i in (contiguous, step4, step8)] == [False, False, True]
    assert step8.reads[0].inner_stride_bytes == 32 and step4.reads[0].inner_stride_bytes == 16
    hz = K.ENGINE_CLOCK_HZ[contiguous.engine]
    # a 16-byte stride costs nothing on Scalar and GpSimd; on Vector it only leaves the 256-element path for
    # fp32, which needs contiguous elements (N/2 -> N, costs.streaming_cycles)
    if engine is nisa.engine.vector:
        assert (rule_cycles(contiguous), rule_cycles(step4)) == (N / 2, N)
    else:
        assert compute_seconds(step4) == pytest.approx(compute_seconds(contiguous))
    # past 16 bytes the per-element cycles double; the fixed overheads do not
    assert (compute_seconds(step8) - compute_seconds(step4)) * hz == pytest.approx(N * (K.WIDE_STRIDE_SLOWDOWN - 1))


def test_one_element_per_partition_has_no_stride():
    @nki.jit
    def column(x):
        wide = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=wide, src=x)
        out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=out, src=wide[:, 7:8])
        result = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=result, src=out)
        return result

    (copy,) = [i for i in nkisim.run(column, torch.empty(128, 64), dry_run=True).trace.instructions
               if i.isa == "tensor_copy"]
    assert copy.reads[0].inner_stride_bytes == 0 and not wide_stride(copy)
