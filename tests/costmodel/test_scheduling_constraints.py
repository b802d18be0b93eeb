"""The kernel's own scheduling constraints reach the cost model: an `nl.no_reorder()` block keeps its
instructions in program order and a `with_schedule` edge puts one named instruction after another
(SDK:nki/guides/how-to-scheduling-apis.rst), and `depends_on` adds a semaphore wait (runtime) or an
issue order (schedule); without them, list scheduling may reorder."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim.costmodel import constants as K
from nkisim.costmodel.scheduler import schedule
from nkisim.costmodel.variants import alongside

X = np.ones((128, 4096), dtype=np.float32)


def _loaded_ready_and_outputs(x, memset_engine=nisa.engine.unknown):
    """The operands of a slow instruction and a quick one: `loaded` (a DMA load of x), `ready` (a memset)
    and two SBUF outputs."""
    loaded = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=loaded, src=x)
    ready = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ready, value=1.0, engine=memset_engine)
    return loaded, ready, nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf), nl.ndarray(x.shape, dtype=x.dtype,
                                                                                          buffer=nl.sbuf)


def _sum_to_hbm(x, a, b):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
    nisa.dma_copy(dst=out, src=a)
    return out


def _late_then_early(x, in_block):
    """'slow' waits for a DMA load; 'quick' (after it in program order) needs only a memset, so list
    scheduling runs 'quick' first unless a no_reorder block keeps program order."""
    loaded, ready, a, b = _loaded_ready_and_outputs(x)

    def body():
        nisa.activation(dst=a, op=nl.exp, data=loaded, name="slow")
        nisa.activation(dst=b, op=nl.exp, data=ready, name="quick")

    if in_block:
        with nl.no_reorder():
            body()
    else:
        body()
    return _sum_to_hbm(x, a, b)


@nki.jit
def free_order(x):
    return _late_then_early(x, in_block=False)


@nki.jit
def kept_order(x):
    return _late_then_early(x, in_block=True)


def _slot(sched, name):
    (slot,) = [s for s in sched.slots if s.name == name]
    return slot


def test_no_reorder_block_keeps_program_order_in_the_modeled_timeline():
    free = schedule(nkisim.run(free_order, X, dry_run=True).trace)
    assert _slot(free, "quick").end <= _slot(free, "slow").start      # reordered: 'quick' did not wait
    trace = nkisim.run(kept_order, X, dry_run=True).trace
    assert [(e[1], e[2]) for e in trace.order_edges] == [(_index(trace, "quick"), _index(trace, "slow"))]
    kept = schedule(trace)
    assert _slot(kept, "quick").start >= _slot(kept, "slow").end
    assert kept.total_time > free.total_time


def test_with_schedule_edge_orders_the_named_instructions_and_keeps_values():
    edged = free_order.with_schedule([("quick", "slow")])
    np.testing.assert_array_equal(edged(X), free_order(X))
    sched = schedule(nkisim.run(edged, X, dry_run=True).trace)
    assert _slot(sched, "quick").start >= _slot(sched, "slow").end


def test_edges_survive_a_neighbouring_kernel_and_contradictions_are_named():
    trace = nkisim.run(kept_order, X, dry_run=True).trace
    both = alongside(nkisim.run(free_order, X, dry_run=True).trace, trace)
    offset = len(both.instructions) - len(trace.instructions)
    assert both.order_edges == [(p, later + offset, earlier + offset) for p, later, earlier in trace.order_edges]
    backwards = free_order.with_schedule([("slow", "quick"), ("quick", "slow")])
    with pytest.raises(RuntimeError, match="dependency cycle .*contradict each other or its data dependencies"):
        schedule(nkisim.run(backwards, X, dry_run=True).trace)


def _index(trace, name):
    (ins,) = [i for i in trace.instructions if i.name == name]
    return ins.index


def _slow_and_independent(x, kind):
    """'slow' (Scalar) waits for a DMA load; 'quick' (Vector, after it in program order) needs only a memset.
    kind None: no dependency; else quick.depends_on(slow, kind=kind)."""
    loaded, ready, a, b = _loaded_ready_and_outputs(x, memset_engine=nisa.engine.gpsimd)
    slow = nisa.activation(dst=a, op=nl.exp, data=loaded, name="slow")
    quick = nisa.tensor_scalar(dst=b, data=ready, op0=nl.multiply, operand0=2.0, engine=nisa.engine.vector,
                               name="quick")
    if kind == "runtime":
        quick.depends_on(slow, kind=nisa.dependency.runtime)
    elif kind == "schedule":
        quick.depends_on(slow, kind=nisa.dependency.schedule)
    return _sum_to_hbm(x, a, b)


@nki.jit
def independent(x):
    return _slow_and_independent(x, None)


@nki.jit
def runtime_dependency(x):
    return _slow_and_independent(x, "runtime")


@nki.jit
def schedule_dependency(x):
    return _slow_and_independent(x, "schedule")


def test_depends_on_runtime_waits_for_the_end_and_schedule_only_for_the_start():
    """NkiInstruction page (v2.33.0): runtime "lowers to a hardware semaphore wait"; schedule "constrains
    instruction issue order; instructions on different engines may still overlap"."""
    free = schedule(nkisim.run(independent, X, dry_run=True).trace)
    assert _slot(free, "quick").start < _slot(free, "slow").start      # list scheduling ran 'quick' first
    waited = schedule(nkisim.run(runtime_dependency, X, dry_run=True).trace)
    assert _slot(waited, "quick").start >= _slot(waited, "slow").end + K.SEMAPHORE_LATENCY_S
    ordered = schedule(nkisim.run(schedule_dependency, X, dry_run=True).trace)
    quick, slow = _slot(ordered, "quick"), _slot(ordered, "slow")
    assert slow.start <= quick.start < slow.end              # issued after it, running beside it
    assert free.total_time <= ordered.total_time < waited.total_time


def test_issue_edges_survive_a_neighbouring_kernel_and_cycles_name_depends_on():
    trace = nkisim.run(schedule_dependency, X, dry_run=True).trace
    both = alongside(nkisim.run(free_order, X, dry_run=True).trace, trace)
    offset = len(both.instructions) - len(trace.instructions)
    assert both.issue_edges == tuple((p, later + offset, earlier + offset) for p, later, earlier in trace.issue_edges)

    @nki.jit
    def circular(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        first = nisa.dma_copy(dst=a, src=x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        first.depends_on(nisa.memset(dst=a, value=0.0), kind=nisa.dependency.schedule)
        return out

    with pytest.raises(RuntimeError, match="dependency cycle .*with_schedule, nl.no_reorder or depends_on, contradict"):
        schedule(nkisim.run(circular, X, dry_run=True).trace)
