"""LNC=2 kernels whose cores synchronise (core_barrier, sendrecv): the cost model makes a core wait
for its partner, and the critical path shows that wait; kernels without them are scheduled as each
core alone. Every expected time is built from the model's constants and the schedule's own slots."""
from dataclasses import replace

import matplotlib.pyplot as plt
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch

import nkisim
from kernels.gelu import gelu_fwd
from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import compute_seconds
from nkisim.costmodel.dma import data_seconds
from nkisim.costmodel.scheduler import TaskGraph, schedule
from nkisim.costmodel.variants import alongside
from nkisim.profile.summary import estimate
from nkisim.profile.views import show_timeline

SEM = K.SEMAPHORE_LATENCY_S
STATIC = nisa.dge_mode.none     # prebuilt descriptors: no descriptor generation on an engine's queue
LONG = 6                        # program 0's Vector instructions before the synchronisation (program 1: one)
X = np.ones((256, 512), np.float32)


@nki.jit
def barrier_after_uneven_work(x):
    """Each core scales its half LONG times (core 0) or once (core 1), writes it to a shared tensor,
    meets the other at a barrier, then reads the other core's half; core 1 also does unrelated work
    on GpSimd (the barrier's engine) and on Vector after the barrier."""
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    half = x.shape[0] // 2
    t = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid * half:(pid + 1) * half], dge_mode=STATIC)
    for _ in range(LONG if pid == 0 else 1):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0, name="work")
    nisa.dma_copy(dst=shared[pid * half:(pid + 1) * half], src=t, dge_mode=STATIC, name="publish")
    nisa.core_barrier(data=shared, cores=(0, 1))
    other = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=other, src=shared[(1 - pid) * half:(2 - pid) * half], dge_mode=STATIC, name="read_other")
    if pid == 1:
        for engine in (nisa.engine.gpsimd, nisa.engine.vector):
            scratch = nl.ndarray((half, 8), dtype=x.dtype, buffer=nl.sbuf)
            nisa.memset(dst=scratch, value=0.0, engine=engine, name=f"after_on_{engine.name}")
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half], src=other, dge_mode=STATIC)
    return out


@nki.jit
def send_after_long_work(x):
    """Core 0 scales a tile LONG times and sends it to core 1, which scales what it receives; core 1
    sends core 0 a tile it loaded (so both sides of each sendrecv carry a message)."""
    out = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    mine = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    got = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[pid * 128:(pid + 1) * 128], dge_mode=STATIC)
    if pid == 0:
        for _ in range(LONG):
            nisa.tensor_scalar(dst=mine, data=mine, op0=nl.multiply, operand0=2.0, name="produce")
    nisa.sendrecv(src=mine, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
    if pid == 1:
        nisa.tensor_scalar(dst=got, data=got, op0=nl.add, operand0=1.0, name="consume")
        nisa.dma_copy(dst=out, src=got, dge_mode=STATIC)
    return out


def _one(sched, core, opcode, name=None):
    (slot,) = [s for s in sched.slots if s.core == core and s.opcode == opcode and name in (None, s.name)]
    return slot


def _traced(kernel):
    r = nkisim.run(kernel, X, lnc=2)
    return r.trace, schedule(r.trace)


def test_a_barrier_completes_after_the_later_cores_arrival():
    trace, sched = _traced(barrier_after_uneven_work)
    publish0 = _one(sched, 0, "DMA", "publish")
    arrive0, arrive1 = _one(sched, 0, "BARRIER_WAIT"), _one(sched, 1, "BARRIER_WAIT")
    barrier1 = _one(sched, 1, "CORE_BARRIER")
    # core 0 reaches its barrier a semaphore after its shared-tensor write (its GpSimd is idle) ...
    assert publish0.start > max(s.end for s in sched.slots if s.core == 0 and s.name == "work")
    assert arrive0.start == pytest.approx(publish0.end + SEM)
    # ... core 1 got there first and waits: its barrier starts a semaphore after core 0's arrival
    assert arrive1.start < arrive0.start
    assert barrier1.start == pytest.approx(arrive0.start + SEM)
    assert arrive1.end == pytest.approx(barrier1.start)         # the wait is drawn up to that moment
    assert TaskGraph(trace).total_time() == sched.total_time     # the range's total: a wait is not the last end
    barrier_ins = next(i for i in trace.program(1) if i.isa == "core_barrier")
    assert barrier1.duration == pytest.approx(compute_seconds(barrier_ins))
    # after the barrier, core 1's read of core 0's half waits for it (data hazard on the shared tensor)
    # (its trigger waits for the barrier: the latency to first byte follows it)
    read1 = _one(sched, 1, "DMA", "read_other")
    assert read1.start == pytest.approx(barrier1.end + SEM + K.DMA_QUEUE_LATENCY_S)


def test_a_barrier_blocks_its_engine_only():
    _, sched = _traced(barrier_after_uneven_work)
    barrier1 = _one(sched, 1, "CORE_BARRIER")
    on_gpsimd, on_vector = _one(sched, 1, "MEMSET", "after_on_gpsimd"), _one(sched, 1, "MEMSET", "after_on_vector")
    assert on_gpsimd.start == pytest.approx(barrier1.end)      # the barrier's engine waits for it
    assert on_vector.start < _one(sched, 1, "BARRIER_WAIT").end   # Vector does not


def test_the_critical_path_leads_to_the_partner_that_arrived_last():
    trace, sched = _traced(barrier_after_uneven_work)
    path = [(s.core, s.opcode) for s in sched.critical_path]
    crossing = path.index((1, "CORE_BARRIER"))
    assert path[crossing - 1] == (0, "BARRIER_WAIT")
    assert path.count((0, "TENSOR_SCALAR")) == LONG             # core 0's long work is what core 1 waited for
    summary = estimate(trace, with_range=False)
    gpsimd_work = sum(s.duration for s in sched.slots if s.engine == "GpSimd" and s.opcode != "BARRIER_WAIT")
    wait1 = _one(sched, 1, "BARRIER_WAIT").duration
    assert wait1 > gpsimd_work
    assert summary.engine_active_time["GpSimd"] <= gpsimd_work + 1e-15       # the wait is not engine work
    assert summary.dma_transfer_count == sum(1 for i in trace if i.dma is not None)   # waits are not work


def test_a_receivers_consumer_waits_for_the_senders_producer():
    trace, sched = _traced(send_after_long_work)
    produced = max(s.end for s in sched.slots if s.core == 0 and s.name == "produce")
    send0 = _one(sched, 0, "SENDRECV")
    receive1, consume1 = _one(sched, 1, "RECEIVE"), _one(sched, 1, "TENSOR_SCALAR", "consume")
    send_ins = next(i for i in trace.program(0) if i.isa == "sendrecv")
    # the send is a DMA on core 0's queue, costed by the DMA model, triggered after its src's producer
    assert send0.lane == "DMA/static"
    assert send0.start == pytest.approx(produced + SEM + K.DMA_QUEUE_LATENCY_S)
    assert send0.duration == pytest.approx(data_seconds(send_ins, 2))
    # the data lands on core 1 a semaphore after the send; the consumer starts then (one semaphore)
    assert receive1.start == pytest.approx(send0.end + SEM) and receive1.duration == 0
    assert consume1.start == pytest.approx(receive1.start)
    assert [(s.core, s.opcode) for s in sched.critical_path][-4:-1] == [(0, "SENDRECV"), (1, "RECEIVE"),
                                                                       (1, "TENSOR_SCALAR")]
    # core 1's own send to core 0 did not wait for anything of core 0's
    assert _one(sched, 1, "SENDRECV").start < produced


def test_without_synchronisation_each_core_is_scheduled_as_alone():
    x = torch.randn(512, 256).to(torch.bfloat16)
    trace = nkisim.run(gelu_fwd, x, lnc=2, dry_run=True).trace
    both = schedule(trace)
    alone = [schedule(replace(trace, instructions=trace.program(core))) for core in (0, 1)]
    assert sorted(both.slots, key=_key) == sorted(alone[0].slots + alone[1].slots, key=_key)
    assert both.total_time == max(a.total_time for a in alone)


def _key(slot):
    return slot.core, slot.start, slot.lane, slot.index


@pytest.mark.parametrize("kernel, program, isa, message", [
    (barrier_after_uneven_work, 1, "core_barrier",
     r"program 0's core_barrier #0 \(.*\) waits for program 1, whose trace has no core_barrier #0"),
    (send_after_long_work, 0, "sendrecv",
     r"program 1's sendrecv \(.*\) receives message #0 from program 0 on pipe_id=0, which sends only 0 there"),
])
def test_a_synchronisation_without_its_partner_is_reported(kernel, program, isa, message):
    trace, _ = _traced(kernel)
    lone = replace(trace, instructions=[i for i in trace if not (i.program_id == program and i.isa == isa)])
    with pytest.raises(ValueError, match=message):
        schedule(lone)


def test_two_barriers_with_one_number_are_reported():
    trace, _ = _traced(barrier_after_uneven_work)
    barrier = next(i for i in trace.program(0) if i.isa == "core_barrier")
    twice = replace(trace, instructions=[*trace.instructions, replace(barrier, index=len(trace.program(0)))])
    with pytest.raises(ValueError, match=r"program 0 has two core_barriers numbered 0 .*number each program's "
                                         r"barriers 0, 1, \.\.\."):
        schedule(twice)


def test_a_neighbour_with_barriers_pairs_its_own_barriers():
    trace, sched = _traced(barrier_after_uneven_work)
    both = schedule(alongside(trace, trace))
    barriers = sorted((s.core, s.start) for s in both.slots if s.opcode == "CORE_BARRIER")
    assert len(barriers) == 4
    assert both.total_time > sched.total_time


def test_the_timeline_draws_the_wait_but_not_the_receive():
    for kernel in (barrier_after_uneven_work, send_after_long_work):
        fig = show_timeline(estimate(_traced(kernel)[0], with_range=False))
        legend = [t.get_text() for legend in fig.legends for t in legend.get_texts()]
        assert ("waiting at core_barrier" in legend) == (kernel is barrier_after_uneven_work)
        assert "RECEIVE" not in legend and "BARRIER_WAIT" not in legend
        plt.close(fig)
