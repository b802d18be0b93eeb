"""A transfer whose descriptors are generated on the device (software or hardware DGE) gets them one
engine at a time, and each engine runs its queue's transfers in order on its own, so an engine starts
its rows once its descriptors are written and it is free (`nkisim/costmodel/dma.py`, `engine_step`).
Prebuilt descriptors (dge_mode.none) are all there at the trigger: their engines start together. A
queue runs generated descriptors in the order they are written."""
import pytest
from tracebuild import TraceBuilder, gelu_like, many_small_dmas

from nkisim.costmodel import constants as K
from nkisim.costmodel.dma import engine_step
from nkisim.costmodel.scheduler import _build_tasks, schedule
from nkisim.profile.summary import estimate


def _transfers(sched):
    return sorted((s for s in sched.slots if s.engine == "DMA"), key=lambda s: s.start)


def test_engine_j_starts_once_its_descriptors_are_written():
    sched = schedule(many_small_dmas("swdge", count=8))
    dges = sorted((s for s in sched.slots if s.opcode == "DGE"), key=lambda s: s.start)
    first, dge = _transfers(sched)[0], dges[0]
    starts = [start for start, _ in first.engine_intervals()]
    assert first.engines == 16 and engine_step(K.SWDGE_S_PER_DMA, 16) == pytest.approx(K.SWDGE_S_PER_DMA / 16)
    # nothing else holds the engines: engine j starts (j + 1) / 16 of the generation after it began, plus latency
    assert starts == pytest.approx([dge.start + (j + 1) * dge.duration / 16 + K.DMA_QUEUE_LATENCY_S for j in range(16)])
    # each engine moves its rows for the same time; the slot spans the first engine's start to the last one's end
    busy = {round(end - start, 15) for start, end in first.engine_intervals()}
    assert len(busy) == 1 and first.start == starts[0] and first.end == pytest.approx(starts[-1] + busy.pop())


def test_a_stream_paced_by_its_descriptor_generation_keeps_its_engines_out_of_phase():
    """The walkthrough's tiled kernel on trn2: a transfer in flight 99.93% of the time, each engine busy 81%
    of it. Many small software-DGE loads: each engine idles while it waits for its next descriptors, but
    not at the same moment as the others, so the DMA-active share exceeds every engine's busy share; with
    prebuilt descriptors nothing staggers them and the two shares are one."""
    for mode, out_of_phase in (("swdge", True), ("hwdge", True), ("none", False)):
        s = estimate(many_small_dmas(mode), with_range=False)
        per_engine_busy = s.dma_packet_time / 16
        transfers = [x for x in s.timeline.slots if x.engine == "DMA"]
        assert any(x.engine_starts for x in transfers) == out_of_phase, mode
        if out_of_phase:
            assert s.dma_active_time > 1.2 * per_engine_busy, mode
        else:
            assert s.dma_active_time == pytest.approx(per_engine_busy), mode


def test_one_engine_has_nothing_to_stagger():
    b = TraceBuilder("four_rows")
    b.dma(b.sbuf(b.alloc(), 4, 4096), b.hbm(b.alloc(), 0, 4 * 4096), "swdge")
    (transfer,) = _transfers(schedule(b.trace))
    assert transfer.engines == 1 and transfer.engine_starts == ()
    assert engine_step(K.SWDGE_S_PER_DMA, 1) == 0.0


def test_a_queue_runs_generated_descriptors_in_the_order_they_were_written():
    """A store's descriptors are written after its tile's ACTIVATE; loads of later tiles, which wait for
    nothing, had theirs written long before. A queue runs its descriptors in the order they reach it:
    generated ones as they are written, not in program order."""
    trace = gelu_like(2048, 2048, lnc=2, dge_mode="swdge")
    tasks, sched = _build_tasks(trace), schedule(trace)
    for core in (0, 1):
        on_queue = sorted((tid for tid, t in enumerate(tasks) if t.is_transfer and t.core == core),
                          key=lambda tid: sched.slots[tid].start)
        written = [sched.slots[tasks[tid].queued_by].end for tid in on_queue]
        assert written == sorted(written)
        assert [tasks[tid].ins.index for tid in on_queue] != sorted(tasks[tid].ins.index for tid in on_queue)

