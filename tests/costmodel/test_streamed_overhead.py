"""The access overhead a Vector or Scalar instruction hides behind the previous one on its engine.

SDK:nki/guides/architecture/trainium_inferentia2_arch.rst, "Performance Consideration": starting an
SBUF/PSUM access costs ~60 cycles, which "compute engines can typically hide ... through instruction
level parallelism". So an instruction that follows another on its engine back to back holds the engine
its cost less that overhead; one that starts on an idle engine (it waited for another engine's result)
pays it, and so does one that reads the output of a short instruction before it: it "cannot start data
read until the previous instruction has all of its output committed to the local SRAM" (SDK:nki/deep-dives/
nki_perf_guide.rst, Opt #5a), with nothing to set its access up behind. Behind a long one, a dependent
instruction pays only the static overhead, the 100 cycles the page's "Cost Model" adds to dependent
back-to-back instructions. The static overhead stays in every case."""
from __future__ import annotations

import pytest

from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds, hides_next_access, streamed_saving
from nkisim.costmodel.scheduler import schedule

from tracebuild import TraceBuilder

VECTOR_HZ = K.VECTOR_CLOCK_HZ
ACCESS = K.ACCESS_OVERHEAD_CYCLES / VECTOR_HZ


def _durations(trace, engine: str) -> list[float]:
    return [s.duration for s in sorted(schedule(trace).slots, key=lambda s: s.start) if s.engine == engine]


def _vector_stream(count: int, chained: bool, columns: int = 1024) -> tuple[TraceBuilder, list]:
    """`count` fp32 tensor_scalar instructions on Vector over `columns` elements per partition, each reading
    the previous one's output (`chained`) or its own input (independent); no DMA, so every input is ready at
    the start."""
    b = TraceBuilder("stream")
    src = b.sbuf(b.alloc(), 128, columns, "float32")
    out = []
    for _ in range(count):
        dst = b.sbuf(b.alloc(), 128, columns, "float32", role="dst")
        out.append(b.compute("Vector", "tensor_scalar", dst, src, op0="multiply"))
        if chained:
            src = b.sbuf(dst.region.storage_id, 128, columns, "float32")
    return b, out


def test_back_to_back_independent_instructions_hide_the_access_overhead():
    b, ins = _vector_stream(4, chained=False)
    full = compute_seconds(ins[0])
    assert streamed_saving(ins[0]) == pytest.approx(ACCESS)
    durations = _durations(b.trace, "Vector")
    assert durations[0] == pytest.approx(full)                 # the first starts on an idle engine
    assert durations[1:] == pytest.approx([full - ACCESS] * 3)   # the static overhead stays


def test_an_instruction_reading_a_short_previous_ones_output_pays_the_access_overhead():
    """32 columns stream in 32 cycles, under the 60-cycle access overhead: nothing hides the next set-up."""
    b, ins = _vector_stream(4, chained=True, columns=32)
    assert not hides_next_access(ins[0])
    assert _durations(b.trace, "Vector") == pytest.approx([compute_seconds(ins[0])] * 4)


def test_an_instruction_reading_a_long_previous_ones_output_pays_the_static_overhead_only():
    """Behind 1024 streamed columns the dependent instruction sets its access up: the page's dependent
    back-to-back cost, its streaming cycles + 100, with no access overhead on top (fp32 on Vector's
    256-element path: 512 cycles for 1024 columns)."""
    b, ins = _vector_stream(4, chained=True)
    full = compute_seconds(ins[0])
    assert hides_next_access(ins[0])
    assert _durations(b.trace, "Vector") == pytest.approx([full] + [full - ACCESS] * 3)
    assert full - ACCESS == pytest.approx((1024 / 2 + K.STATIC_OVERHEAD_CYCLES) / VECTOR_HZ)


def test_an_instruction_that_waits_for_another_engine_pays_the_access_overhead():
    """Vector idles while Scalar computes its input: the multiply starts on an idle engine."""
    b = TraceBuilder("cross_engine")
    x = b.sbuf(b.alloc(), 128, 4096, "float32")
    warm = b.compute("Vector", "tensor_scalar", b.sbuf(b.alloc(), 128, 64, "float32", role="dst"),
                     b.sbuf(b.alloc(), 128, 64, "float32"), op0="multiply")
    y = b.sbuf(b.alloc(), 128, 4096, "float32", role="dst")
    b.compute("Scalar", "activation", y, x, func="exp")
    mul = b.compute("Vector", "tensor_scalar", b.sbuf(b.alloc(), 128, 4096, "float32", role="dst"),
                    b.sbuf(y.region.storage_id, 128, 4096, "float32"), op0="multiply")
    assert _durations(b.trace, "Vector") == pytest.approx([compute_seconds(warm), compute_seconds(mul)])


def test_other_engines_hide_nothing():
    b = TraceBuilder("gpsimd")
    ins = [b.compute("GpSimd", "tensor_scalar", b.sbuf(b.alloc(), 128, 512, "float32", role="dst"),
                     b.sbuf(b.alloc(), 128, 512, "float32"), op0="multiply") for _ in range(3)]
    assert streamed_saving(ins[0]) == 0.0
    assert _durations(b.trace, "GpSimd") == pytest.approx([compute_seconds(i) for i in ins])


def test_a_scalar_instruction_beside_descriptor_generation_pays_the_access_overhead():
    """A hardware-DGE DMA issued from Scalar runs on the DGE block Scalar's sequencer commands, not in Scalar's
    compute pipeline (tests/costmodel/test_hardware_dge.py): the next ACTIVATE starts beside it on an idle
    engine, with no compute instruction before it to overlap its SBUF access with."""
    b = TraceBuilder("hwdge_then_act")
    b.dma(b.sbuf(b.alloc(), 128, 512), b.hbm(b.alloc(), 0, 128 * 512), "hwdge", queue="Scalar")
    act = b.compute("Scalar", "activation", b.sbuf(b.alloc(), 128, 512, role="dst"), b.sbuf(b.alloc(), 128, 512),
                    func="exp")
    slots = schedule(b.trace).slots
    (dge,) = [s for s in slots if s.opcode == "DGE"]
    (activate,) = [s for s in slots if s.lane == "Scalar"]
    assert dge.lane == "DGE/Scalar" and activate.opcode == "ACTIVATE"
    assert activate.start < dge.end                                     # side by side ...
    assert activate.duration == pytest.approx(compute_seconds(act))   # ... and no overhead hidden
