"""`NkiInstruction.depends_on` as the pages describe it: NKI 0.6 (SDK 2.32 stub nki/api/nki/isa/__init__.py,
NkiInstruction) adds a runtime dependency (a hardware semaphore wait); NKI 0.7
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.NkiInstruction.html)
adds kind=nki.isa.dependency.runtime / .schedule. The two instructions of a runtime dependency (every one in 0.6)
sit at the same dynamic-loop nesting, or the producer in an enclosing scope; a schedule one may leave a dynamic
loop. Values never change; the trace carries the edges."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiArgumentError, NkiValidationError
from nkisim.emulator.errors import NkiRemovedApiError

X = np.arange(128 * 64, dtype=np.float32).reshape(128, 64)


def _copy_twice(x, link):
    """Load x, scale it by 2 into y (named 'scale'), copy y out (named 'store'); `link(load, scale, store)`
    adds the dependencies under test."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    load = nisa.dma_copy(dst=t, src=x, name="load")
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    scale = nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=2.0, name="scale")
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    store = nisa.dma_copy(dst=out, src=y, name="store")
    link(load, scale, store)
    return out


def _launch(link, build=_copy_twice):
    """Run the kernel `build(x, link)` on X."""
    @nki.jit
    def kernel(x):
        return build(x, link)

    return nkisim.run(kernel, X)


def _index(trace, name):
    (ins,) = [i for i in trace.instructions if i.name == name]
    return ins.index


def test_depends_on_returns_self_keeps_values_and_records_a_runtime_edge(nki_version):
    returned = []

    def link(load, scale, store):
        returned.extend((store.depends_on(scale, load), store))

    result = _launch(link)
    np.testing.assert_array_equal(result.outputs, 2 * X)
    t = result.trace
    assert returned[0] is returned[1]
    assert t.order_edges == [(0, _index(t, "store"), _index(t, "scale")), (0, _index(t, "store"), _index(t, "load"))]
    assert t.issue_edges == ()


def test_kind_selects_a_semaphore_wait_or_an_issue_order_in_0_7():
    t = _launch(lambda load, scale, store: (store.depends_on(load, kind=nisa.dependency.schedule),
                                            store.depends_on(scale, kind=nisa.dependency.runtime))).trace
    assert t.issue_edges == ((0, _index(t, "store"), _index(t, "load")),)
    assert t.order_edges == [(0, _index(t, "store"), _index(t, "scale"))]
    with pytest.raises(NkiArgumentError, match=r"NkiInstruction.depends_on: kind must be nki.isa.dependency.runtime "
                                               r"or nki.isa.dependency.schedule, got str 'runtime'"):
        _launch(lambda load, scale, store: store.depends_on(load, kind="runtime"))


def test_0_6_has_no_kind_and_no_dependency_enum(nki_0_6):
    with pytest.raises(NkiArgumentError, match="NkiInstruction.depends_on: got an unexpected keyword argument 'kind' "
                                               r"\(NKI 0.6.0 has no such parameter"):
        _launch(lambda load, scale, store: store.depends_on(load, kind=None))
    with pytest.raises(NkiRemovedApiError, match="nki.isa.dependency is not in NKI 0.6.0: .*always adds a runtime"):
        nisa.dependency  # noqa: B018


def test_producers_must_be_instructions_of_the_running_kernel_and_not_the_consumer(nki_version):
    with pytest.raises(NkiArgumentError, match=r"depends_on: producer 1 must be an NkiInstruction \(what an nki.isa "
                                               r"call returns\), got NkiTensor"):
        @nki.jit
        def tensor_as_producer(x):
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x).depends_on(t)
            return x

        nkisim.run(tensor_as_producer, X)
    with pytest.raises(NkiValidationError, match=r"depends_on: producer 1 \(nisa.tensor_scalar 'scale' at .*\) is "
                                                 r"the consumer itself"):
        _launch(lambda load, scale, store: scale.depends_on(scale))
    kept = []
    _launch(lambda load, scale, store: kept.append(load))
    with pytest.raises(NkiValidationError, match=r"depends_on: producer 1 \(nisa.dma_copy 'load' at .*\) was issued "
                                                 r"by another launch or core"):
        _launch(lambda load, scale, store: store.depends_on(kept[0]))
    with pytest.raises(NkiValidationError, match="depends_on called outside a running NKI kernel"):
        kept[0].depends_on()


def _looped(x, wire):
    """A fori_loop of 3 iterations, each scaling a tile; `wire(where, before, ins, seen)` adds dependencies
    (`where`: "inside" the loop or "after" it; `before`: the instruction issued ahead of the loop; `ins`: the
    iteration's own instruction, or the one after the loop; `seen`: the earlier iterations' instructions)."""
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    before = nisa.dma_copy(dst=t, src=x, name="before")
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    seen = []

    def body(i):
        inside = nisa.tensor_scalar(dst=y, data=t, op0=nl.multiply, operand0=2.0, name="inside")
        wire("inside", before, inside, seen)
        seen.append(inside)

    nl.fori_loop(0, 3, body)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    after = nisa.dma_copy(dst=out, src=y, name="after")
    wire("after", before, after, seen)
    return out


def test_a_producer_in_an_enclosing_scope_is_allowed_and_each_iteration_waits_for_it(nki_version):
    def wire(where, before, ins, seen):
        if where == "inside":
            ins.depends_on(before)

    t = _launch(wire, _looped).trace
    insides = [i.index for i in t.instructions if i.name == "inside"]
    assert len(insides) == 3
    assert t.order_edges == [(0, i, _index(t, "before")) for i in insides]


def test_no_dependency_out_of_a_dynamic_loop_or_across_its_iterations(nki_version):
    def out_of_the_loop(where, before, ins, seen):
        if where == "after":
            ins.depends_on(seen[-1])

    with pytest.raises(NkiValidationError, match=r"producer 1 \(nisa.tensor_scalar 'inside' at .*\) sits inside a "
                                                 r"dynamic loop .*that the consumer is outside of; .*same dynamic-loop "
                                                 r"nesting, or the producer in an enclosing scope"):
        _launch(out_of_the_loop, _looped)

    def across_iterations(where, before, ins, seen):
        if where == "inside" and len(seen) > 0:
            ins.depends_on(seen[-1])

    with pytest.raises(NkiValidationError, match=r"was issued in another iteration of a dynamic loop .*traced once"):
        _launch(across_iterations, _looped)


def test_a_schedule_dependency_may_leave_a_dynamic_loop_in_0_7(nki_0_7):
    """The v2.33.0 page states the same-nesting rule for kind=runtime only (its semaphore "fires
    unconditionally"); a schedule dependency emits no synchronisation, so it may leave the loop (recorded as an
    issue edge from the last iteration's instruction). Across iterations it is refused whatever the kind."""
    def out_of_the_loop(kind):
        def wire(where, before, ins, seen):
            if where == "after":
                ins.depends_on(seen[-1], **kind)
        return wire

    t = _launch(out_of_the_loop({"kind": nisa.dependency.schedule}), _looped).trace
    last_inside = [i.index for i in t.instructions if i.name == "inside"][-1]
    assert t.issue_edges == ((0, _index(t, "after"), last_inside),) and t.order_edges == []
    for kind in ({"kind": nisa.dependency.runtime}, {}):
        with pytest.raises(NkiValidationError, match=r"sits inside a dynamic loop .*waits unconditionally \(a runtime "
                                                     r"dependency; a kind=nki.isa.dependency.schedule one"):
            _launch(out_of_the_loop(kind), _looped)

    def across_iterations(where, before, ins, seen):
        if where == "inside" and len(seen) > 0:
            ins.depends_on(seen[-1], kind=nisa.dependency.schedule)

    with pytest.raises(NkiValidationError, match=r"was issued in another iteration of a dynamic loop"):
        _launch(across_iterations, _looped)


def test_while_loop_iterations_count_as_dynamic_loop_nesting(nki_version):
    @nki.jit
    def kernel(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        handles = []

        def body(r):
            handles.append(nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0))
            return nisa.register_alloc(0)

        nl.while_loop(nisa.register_alloc(1), body)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t).depends_on(handles[0])
        return out

    with pytest.raises(NkiValidationError, match="sits inside a dynamic loop"):
        nkisim.run(kernel, X)
