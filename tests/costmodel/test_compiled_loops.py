"""A compiled loop's iterations run one after the other: its body is one copy on the device.

The dynamic-loops deep dive: the compiler "emits a hardware loop instruction on the device. The loop body is not
unrolled; instead, a single copy of the body is generated and the hardware iterates over it at runtime"
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dynamic-loops.html); nki-library's
dynamic flash-attention design spec (092a49d, "Constraints"): "nl.fori_loop inserts scheduling barriers at
iteration boundaries", "No cross-iteration prefetching by the compiler". The emulator runs the body once per
iteration, so the trace marks the boundaries (`Trace.loop_fences`) and the scheduler keeps the iterations apart.
The same tiles in a Python loop, unrolled at trace time, overlap as before."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import nkisim
from nkisim.costmodel import constants as K
from nkisim.costmodel.scheduler import schedule

import nki
import nki.isa as nisa
import nki.language as nl

sys.path.insert(0, str(Path(__file__).parents[1] / "nkisim"))
from helpers import compiled_loop  # noqa: E402  (tests/nkisim/helpers.py: the compiled-loop idioms)

TILES, P, F = 4, 128, 512
ROW = [[F, P], [1, F]]     # one [P, F] tile of a [TILES, P, F] tensor, at a runtime offset on dim 0


def _exp_tile(x, out, i, python: bool) -> None:
    """Load tile i of x, exponentiate it, store it as tile i of out (i: a Python int, or a loop's runtime index)."""
    t = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray((P, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[i] if python else x.ap(pattern=ROW, scalar_offset=i, indirect_dim=0), name="load")
    nisa.activation(dst=u, op=nl.exp, data=t)
    nisa.dma_copy(dst=out[i] if python else out.ap(pattern=ROW, scalar_offset=i, indirect_dim=0), src=u, name="store")


def exp_tiles(loop: str):
    """`_exp_tile` for every tile, in a Python loop or a `nl.fori_loop`; a scale of the input before the loop and
    a second store of the last tile after it (both independent of the loop's work)."""
    @nki.jit
    def kernel(x, y):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        y_out = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
        early = nl.ndarray((P, F), dtype=y.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=early, src=y, name="before")
        if loop == "python":
            for i in range(TILES):
                _exp_tile(x, out, i, python=True)
        else:
            nl.fori_loop(0, TILES, lambda i: _exp_tile(x, out, i, python=False))
        nisa.dma_copy(dst=y_out, src=early, name="after")
        return out, y_out
    return kernel


def count_down(trips: int):
    """A `nl.while_loop` of `trips` iterations, each loading, exponentiating and storing the same tile."""
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        compiled_loop("while_loop", trips, lambda _: _exp_tile(x, out, 0, python=True))
        return out
    return kernel


def _trace(kernel, *shapes, dry_run: bool = True):
    return nkisim.run(kernel, *(np.zeros(s, np.float32) for s in shapes), dry_run=dry_run).trace


def _named(timeline, name):
    return sorted((s for s in timeline.slots if s.name == name and s.opcode == "DMA"), key=lambda s: s.start)


def test_the_trace_marks_each_iteration_of_a_compiled_loop():
    trace = _trace(exp_tiles("fori_loop"), (TILES, P, F), (P, F))
    # "before" is instruction 0; each iteration issues load, activation, store; "after" comes last
    assert trace.loop_fences == tuple((0, 1 + 3 * k) for k in range(TILES + 1))
    assert _trace(exp_tiles("python"), (TILES, P, F), (P, F)).loop_fences == ()


def test_fori_loop_iterations_do_not_overlap():
    timeline = schedule(_trace(exp_tiles("fori_loop"), (TILES, P, F), (P, F)))
    loads, stores = _named(timeline, "load"), _named(timeline, "store")
    assert len(loads) == len(stores) == TILES
    for store, next_load in zip(stores, loads[1:]):
        # the next iteration's descriptors and data wait for this iteration's store, a semaphore later
        assert next_load.start >= store.end + K.SEMAPHORE_LATENCY_S


def test_the_same_tiles_in_a_python_loop_overlap_and_finish_sooner():
    python = schedule(_trace(exp_tiles("python"), (TILES, P, F), (P, F)))
    compiled = schedule(_trace(exp_tiles("fori_loop"), (TILES, P, F), (P, F)))
    loads, stores = _named(python, "load"), _named(python, "store")
    assert loads[1].start < stores[0].end                       # the next tile's load goes ahead
    assert python.total_time < 0.7 * compiled.total_time


def test_work_around_the_loop_stays_outside_it():
    timeline = schedule(_trace(exp_tiles("fori_loop"), (TILES, P, F), (P, F)))
    (before,), (after,) = _named(timeline, "before"), _named(timeline, "after")
    loads, stores = _named(timeline, "load"), _named(timeline, "store")
    assert loads[0].start >= before.end                         # the loop's entry is a boundary
    assert after.start >= stores[-1].end                         # so is its exit


def test_while_loop_iterations_do_not_overlap():
    trace = _trace(count_down(3), (1, P, F), dry_run=False)     # the loop's condition is read from memory
    assert len(trace.loop_fences) == 4
    timeline = schedule(trace)
    loads, stores = _named(timeline, "load"), _named(timeline, "store")
    assert len(loads) == 3
    for store, next_load in zip(stores, loads[1:]):
        assert next_load.start >= store.end


def test_a_trace_recorded_before_loop_fences_schedules_as_it_did():
    trace = _trace(exp_tiles("fori_loop"), (TILES, P, F), (P, F))
    fenced = schedule(trace).total_time
    trace.loop_fences = ()          # what a trace pickled before the field reads (the class default)
    assert schedule(trace).total_time == pytest.approx(schedule(_trace(exp_tiles("python"), (TILES, P, F),
                                                                       (P, F))).total_time)
    assert schedule(trace).total_time < fenced
