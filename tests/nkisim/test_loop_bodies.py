"""A dynamic loop's body is one copy on device: nkisim refuses a body whose instructions change between
iterations (emulator/loop_bodies.py). Sources: the v2.33.0 nki.language.fori_loop page ("carry any other loop
state through SBUF/HBM"), the dynamic-loops deep dive ("a single copy of the body is generated and the
hardware iterates over it at runtime"). At LNC=2 the cores must run the same dynamic control flow (the 2.32
LNC page)."""
import warnings

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError, NkiWarning
from nkisim.emulator import nki_versions

from helpers import compiled_loop

X = np.arange(4 * 8, dtype=np.float32).reshape(4, 8)
LOOPS = ("fori_loop", "while_loop")


def _kernel(kind, make_body, trips=4):
    @nki.jit
    def kernel(x):
        a = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.memset(dst=b, value=0.0)
        compiled_loop(kind, trips, make_body(a, b))
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out
    return kernel


def _swapping(a, b):
    """A body that swaps its source and destination tiles by Python state (on device the body is traced once)."""
    bufs = [a, b]

    def body(i):
        src, dst = bufs
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.add, operand0=1.0)
        bufs.reverse()
    return body


@pytest.mark.parametrize("kind", LOOPS)
def test_a_body_that_swaps_buffers_by_python_state_is_refused(kind, nki_version):
    with pytest.raises(NkiValidationError, match=rf"nl.{kind} \((test_loop_bodies|helpers)\.py:\d+\): iteration 1 of the body "
                                                 r"differs from iteration 0: its step 1 is nisa.tensor_scalar on Vector "
                                                 r"\(test_loop_bodies.py:\d+\) on data tensor #\d+ \(made at "
                                                 r"test_loop_bodies.py:\d+\) \(4, 8\) float32 from byte 0.* carry loop "
                                                 r"state through SBUF/HBM"):
        _kernel(kind, _swapping)(X)


def test_a_python_counter_in_an_immediate_or_an_extra_instruction_is_refused(nki_version):
    def counted_immediate(a, b):
        k = [0]

        def body(i):
            k[0] += 1
            nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=float(k[0]))
        return body

    with pytest.raises(NkiValidationError, match=r"iteration 1 of the body differs from iteration 0: its step 1, "
                                                 r"nisa.tensor_scalar on Vector .* takes operand0=2.0 \(iteration 0: "
                                                 r"1.0\)\. On device"):
        _kernel("fori_loop", counted_immediate)(X)

    def extra_on_the_third(a, b):
        k = [0]

        def body(i):
            nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=1.0)
            if k[0] == 2:
                nisa.tensor_copy(dst=b, src=a)
            k[0] += 1
        return body

    with pytest.raises(NkiValidationError, match=r"iteration 2 of the body differs from iteration 0: it issued 2 steps, "
                                                 r"iteration 0 only 1 \(the extra: nisa.tensor_copy on "):
        _kernel("fori_loop", extra_on_the_third)(X)


@pytest.mark.parametrize("kind", LOOPS)
def test_a_body_that_is_the_same_every_iteration_runs(kind, nki_version):
    """A tile made in the body (new each iteration here, one allocation on device), the index as a runtime
    offset, a Python side effect that changes no instruction, and a nested loop whose trip count differs per
    iteration (one step of the outer body) all run."""
    seen = []

    @nki.jit
    def kernel(x):
        a = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        row = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
        trips = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.memset(dst=b, value=0.0)
        nisa.memset(dst=trips, value=0)

        def body(i):
            t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=t, data=a, op0=nl.add, operand0=1.0)
            nisa.tensor_copy(dst=a, src=t)
            if kind == "fori_loop":     # the index as a runtime offset into x
                nisa.dma_copy(dst=row, src=x.ap(pattern=[[8, 1], [1, 8]], scalar_offset=i, indirect_dim=0))
            seen.append(i)
            bound = nisa.register_alloc(0)
            nisa.register_load(bound, trips)
            nl.fori_loop(0, bound, lambda j: nisa.tensor_scalar(dst=b, data=b, op0=nl.add, operand0=1.0))
            nisa.tensor_scalar(dst=trips, data=trips, op0=nl.add, operand0=1)

        compiled_loop(kind, 3, body)
        out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[0], src=a)
        nisa.dma_copy(dst=out[1], src=b)
        return out

    out = kernel(X)
    np.testing.assert_array_equal(out[0], X + 3)
    np.testing.assert_array_equal(out[1], np.full((4, 8), 0 + 1 + 2, np.float32))   # inner trips 0, 1, 2
    assert len(seen) == 3


@pytest.mark.parametrize("lnc", (1, 2))
def test_tensors_the_body_makes_count_by_allocation_line_on_every_core(lnc, nki_version):
    """At LNC=2 the second core's shared-HBM allocation is the first core's storage (made before its own
    iteration began): still a tensor the body makes. A compute operand offset by the loop index (read through
    its index before the instruction is recorded) counts by its static part."""
    @nki.jit
    def kernel(x):
        acc = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        ones = nl.ndarray((128, 4 * 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        nisa.memset(dst=ones, value=1.0)

        def body(i):
            scratch = nl.ndarray((2, 128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
            core = nl.program_id(0)     # each core its own half: no race
            nisa.dma_copy(dst=scratch[core], src=x)
            t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=scratch[core])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=t, op=nl.add)
            column = ones.ap(pattern=[[32, 128], [1, 8]], offset=0, scalar_offset=i, indirect_dim=1)
            nisa.tensor_tensor(dst=acc, data1=acc, data2=column, op=nl.add)

        nl.fori_loop(0, nisa.register_alloc(3), body)
        out = nl.ndarray((2, 128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[nl.program_id(0)], src=acc)
        return out

    x = np.ones((128, 8), np.float32)
    out = nkisim.run(kernel, x, lnc=lnc).outputs
    out = np.asarray(out[0] if isinstance(out, (list, tuple)) else out)
    for core in range(lnc):
        np.testing.assert_array_equal(out[core], 3 * x + 3)


def test_nl_dynamic_range_bodies_are_checked_too(nki_0_6):
    assert nki_versions.active() == "0.6"
    with pytest.raises(NkiValidationError, match=r"nl.dynamic_range \((test_loop_bodies|helpers)\.py:\d+\): iteration 1 of the "
                                                 r"body differs from iteration 0"):
        _kernel("dynamic_range", _swapping)(X)


@nki.jit
def _per_core_trips(x, n, static):
    """A compiled loop per core: trip count n[core] read at run time, or (static) a Python int per core."""
    core = nl.program_id(0)
    t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if static:
        trips = 3 + 2 * core
    else:
        count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=count, src=n[core])
        trips = nisa.register_alloc(0)
        nisa.register_load(trips, count)
    nl.fori_loop(0, trips, lambda i: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0))
    out = nl.ndarray((2, 4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out[core], src=t)
    return out


def test_lnc2_cores_running_different_dynamic_trip_counts_are_warned_about(nki_version):
    """The LNC page (2.32): different dynamic control flow on the two cores is undefined, likely a runtime error.
    Equal runtime trip counts, and per-core trip counts fixed at trace time (per-core code), raise nothing."""
    x = np.zeros((4, 8), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nkisim.run(_per_core_trips, x, np.full((2, 1, 1), 3, np.int32), False, lnc=2)
        nkisim.run(_per_core_trips, x, np.zeros((2, 1, 1), np.int32), True, lnc=2)
    with pytest.warns(NkiWarning, match=r"nl.fori_loop \((test_loop_bodies|helpers)\.py:\d+\), the 1st compiled loop with runtime "
                                        r"bounds, ran a different number of iterations on the cores of this LNC=2 "
                                        r"launch \(core 0: 3, core 1: 5\).*undefined behaviour"):
        out = nkisim.run(_per_core_trips, x, np.array([[[3]], [[5]]], np.int32), False, lnc=2).outputs
    np.testing.assert_array_equal(np.asarray(out)[1], x + 5)


# ---- a body that runs 0 times is still compiled: its instructions must be valid ----------------------------------
def _into_psum_by_dma(a, b):
    def body(i):
        p = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.dma_copy(dst=p, src=a)         # refused by dma_copy's page: PSUM is no DMA destination
    return body


def _legal_body(a, b):
    def body(i):
        nisa.tensor_scalar(dst=b, data=a, op0=nl.add, operand0=1.0)
        nisa.dma_copy(dst=a, src=b)
    return body


@pytest.mark.parametrize("kind", LOOPS)
def test_a_loop_that_runs_zero_times_still_has_its_body_checked(kind, nki_version):
    """"a single copy of the body is generated and the hardware iterates over it at runtime" (the dynamic-loops
    deep dive): the body is compiled whatever the trip count, so an illegal body fails even when it never runs."""
    with pytest.raises(NkiValidationError, match=rf"dma_copy: dst is in psum.* \[in the body of the nl.{kind} at "
                                                 r"(test_loop_bodies|helpers).py:\d+, which runs 0 times here"):
        _kernel(kind, _into_psum_by_dma, trips=0)(X)
    run = nkisim.run(_kernel(kind, _legal_body, trips=0), X)
    assert np.array_equal(run.outputs, X)                    # a legal body that runs 0 times changes nothing
    assert not [i for i in run.trace.instructions if i.isa == "tensor_scalar"]     # and is not in the trace


def test_a_zero_trip_body_checks_its_nested_loops_and_waits_for_no_other_core():
    """A compiled loop inside a body that is only checked has no bound values (read from memory in that body):
    its own body is checked once; a core_barrier or sendrecv there waits for no one (the loop never runs)."""
    @nki.jit
    def nested(x, n, illegal):
        count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=count, src=n)
        pid = nl.program_id(0)
        mark = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm, name="mark")

        def outer(i):
            inner_count = nisa.scalar_load(count)       # no value while the body is only checked

            def inner(j):
                t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.psum if illegal else nl.sbuf)
                nisa.dma_copy(dst=t, src=x)
                other = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
                nisa.sendrecv(src=t, dst=other, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
            nl.fori_loop(0, inner_count, inner)
            nisa.core_barrier(mark, (0, 1))
        nl.fori_loop(0, nisa.scalar_load(count), outer)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        if pid == 0:
            t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.dma_copy(dst=out, src=t)
        return out

    zero = np.zeros((1, 1), np.int32)
    assert np.array_equal(nkisim.run(nested[2], X, zero, False).outputs, X)
    with pytest.raises(NkiValidationError, match=r"dma_copy: dst is in psum.* which runs 0 times here"):
        nkisim.run(nested[2], X, zero, True)


# ---- the rules for loop body functions (the migration guide to NKI 0.6, "Rules for migrated loops"; the v2.33.0
# nl.fori_loop page: "body_fun – function (i) -> None") -----------------------------------------------------------
def test_a_fori_loop_body_that_returns_a_value_is_refused(nki_version):
    """"The fori_loop body function cannot return a value": a JAX-style carry would be silently dropped."""
    def carry(a, b):
        def body(i):
            nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=1.0)
            return a
        return body
    with pytest.raises(NkiValidationError, match="body_fun returned NkiTensor, but a fori_loop body returns nothing"):
        _kernel("fori_loop", carry)(X)
    # a one-call lambda yields the call's instruction handle: not a value the loop carries
    out = _kernel("fori_loop", lambda a, b: lambda i: nisa.tensor_scalar(dst=a, data=a, op0=nl.add, operand0=1.0))(X)
    np.testing.assert_array_equal(out, X + 4)


@pytest.mark.parametrize("kind", LOOPS)
def test_a_tensor_declared_in_a_body_function_is_refused_after_the_loop(kind, nki_version):
    """"Tensors (nl.ndarray) declared inside a body function cannot be referenced outside of the loop"."""
    made = []

    def keeps_its_tile(a, b):
        def body(i):
            t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=t, data=a, op0=nl.add, operand0=1.0)
            nisa.tensor_copy(dst=a, src=t)
            made.append(t)
        return body

    @nki.jit
    def kernel(x):
        a = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        compiled_loop(kind, 2, keeps_its_tile(a, None))
        nisa.tensor_copy(dst=a, src=made[-1])       # the body's tile, after the loop
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    with pytest.raises(NkiValidationError, match=rf"tensor_copy: src is a tensor allocated at test_loop_bodies.py:\d+, "
                                                 rf"in the body of the nl.{kind} at helpers.py:\d+: a tensor declared "
                                                 "inside a loop body function cannot be referenced outside of the loop"):
        kernel(X)


def test_nki_0_6_warns_that_dynamic_range_and_while_register_loops_are_deprecated(nki_0_6):
    """NKI 0.6.0's release notes: "NKI emits a deprecation warning when it encounters `for i in
    nl.dynamic_range(...)` or `while reg:` loops" (NKI 0.7 removed both)."""
    with pytest.warns(FutureWarning, match=r"nl.dynamic_range is deprecated in NKI 0.6 and removed in NKI 0.7: use "
                                           r"nl.fori_loop"):
        out = _kernel("dynamic_range", lambda a, b: lambda i: nisa.tensor_scalar(dst=a, data=a, op0=nl.add,
                                                                                 operand0=1.0))(X)
    np.testing.assert_array_equal(out, X + 4)

    @nki.jit
    def counts_down(x):
        t = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=count, value=2)
        reg = nisa.register_alloc(0)
        nisa.register_load(reg, count)
        while reg:
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
            nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1)
            nisa.register_load(reg, count)
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.warns(FutureWarning, match=r"`while reg:` is deprecated in NKI 0.6 and removed in NKI 0.7: use "
                                           r"nl.while_loop"):
        np.testing.assert_array_equal(counts_down(X), X + 2)
