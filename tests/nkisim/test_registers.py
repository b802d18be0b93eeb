"""Virtual registers and dynamic loops (registers.py): the forms the NKI 0.6 docs define
(nki.isa.register_*, nl.dynamic_range, nl.fori_loop, nl.while_loop, `while reg:`)."""
import re

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError

LINE = r"\(test_registers\.py:\d+\)$"


@nki.jit
def add_n_times(x, n):
    """out = x + n, with n read at run time into a register and used as a dynamic trip count."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    n_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    trips = nisa.register_alloc()
    nisa.register_load(trips, n_sb)
    for _ in nl.dynamic_range(trips):
        nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_dynamic_range_trip_count_from_a_register_runs_every_iteration():
    x = np.zeros((4, 8), np.float32)
    r = nkisim.run(add_n_times, x, np.array([[5]], np.int32))
    assert np.all(r.outputs == 5)
    assert sum(i.isa == "tensor_scalar" for i in r.trace.instructions) == 5   # the trace holds each iteration
    assert np.all(add_n_times(x, np.array([[0]], np.int32)) == 0)


@nki.jit
def fori_store_indices(x):
    """fori_loop with register bounds and step; the body stores each i with register_store."""
    out = nl.ndarray((1, 16), dtype=nl.int32, buffer=nl.shared_hbm)
    row = nl.ndarray((1, 16), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=row, value=-1)
    lo, hi = nisa.register_alloc(2), nisa.register_alloc(0)
    nisa.register_move(hi, 11)

    def body(i):
        cell = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.register_store(cell, i)
        nisa.dma_copy(dst=out[0:1, 0:1], src=cell)          # last write wins: the final i
        nisa.tensor_copy(dst=row[0:1, 0:1], src=cell)
    nl.fori_loop(lo, hi, body, step=3)
    nisa.dma_copy(dst=out[0:1, 1:16], src=row[0:1, 1:16])
    return out


def test_fori_loop_register_bounds_and_step():
    got = fori_store_indices(np.zeros(1, np.float32))
    assert got[0, 0] == 8 and np.all(got[0, 1:] == -1)        # i = 2, 5, 8


@nki.jit
def count_down(x, count):
    """The while_loop docs example: acc += val while the count register is nonzero."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    val = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=val, src=x)
    acc = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=acc, value=0.0)
    count_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count_sb, src=count)
    one = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=one, value=1)
    reg = nisa.register_alloc()
    nisa.register_load(reg, count_sb)

    def body(r):
        nisa.tensor_tensor(dst=acc, data1=acc, data2=val, op=nl.add)
        nisa.tensor_tensor(dst=count_sb, data1=count_sb, data2=one, op=nl.subtract)
        nisa.register_load(r, count_sb)
        return r
    nl.while_loop(reg, body)
    nisa.dma_copy(dst=out, src=acc)
    return out


def test_while_loop_docs_example():
    got = count_down(np.array([[2.5]], np.float32), np.array([[4]], np.int32))
    assert got[0, 0] == 10.0
    assert count_down(np.array([[2.5]], np.float32), np.array([[0]], np.int32))[0, 0] == 0.0   # a true while


@nki.jit
def bare_while(x):
    """The deep dive's `while reg:` form: loop until a flag loaded from SBUF is 0."""
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    flag = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=flag, value=3)
    reg = nisa.register_alloc(1)
    while reg:
        nisa.tensor_scalar(dst=flag, data=flag, op0=nl.subtract, operand0=1)
        nisa.register_load(reg, flag)
    nisa.register_store(out, reg)
    return out


def test_bare_while_on_a_register():
    assert bare_while(np.zeros(1, np.float32))[0, 0] == 0


def _fails(body, match):
    @nki.jit
    def k(x):
        body()
    with pytest.raises(NkiValidationError, match=match) as info:
        k(np.zeros(1, np.float32))
    assert re.search(LINE, str(info.value)), str(info.value)


def test_register_values_are_device_only():
    _fails(lambda: int(nisa.register_alloc(3)), "exists only on device")
    _fails(lambda: nisa.register_alloc(3) == 3, "exists only on device")


def test_unset_register_and_bad_step_and_float_load():
    _fails(lambda: list(nl.dynamic_range(nisa.register_alloc())), "never set")
    _fails(lambda: list(nl.dynamic_range(0, 4, nisa.register_alloc(1))), "step must be a compile-time positive int")

    def float_load():
        t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.register_load(nisa.register_alloc(), t)
    _fails(float_load, "register_load: src dtype float32")

    def wide_load():
        nisa.register_load(nisa.register_alloc(), nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf))
    _fails(wide_load, "exactly one element")


def test_loop_induction_register_is_read_only():
    def write_i():
        for i in nl.dynamic_range(2):
            nisa.register_move(i, 5)
    _fails(write_i, "read-only")


def test_while_loop_body_must_return_a_register():
    _fails(lambda: nl.while_loop(nisa.register_alloc(1), lambda r: None), "must return the next condition register")


def test_a_loop_bound_loaded_in_a_dry_run_is_unknown():
    with pytest.raises(NkiValidationError, match="nl.dynamic_range: the register was loaded from memory in a dry "
                                                 "run") as info:
        nkisim.run(add_n_times, np.zeros((4, 8), np.float32), np.array([[5]], np.int32), dry_run=True)
    assert re.search(LINE, str(info.value))


@nki.jit
def dynamic_row_tiles(x, stop):
    """The dynamic-loops deep dive's example: a register-bounded loop stepping 128 rows, the loop
    register as the access pattern's scalar_offset (rows i..i+127)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    stop_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=stop_sb, src=stop)
    start, end = nisa.register_alloc(0), nisa.register_alloc()
    nisa.register_load(end, stop_sb)
    for i in nl.dynamic_range(start, end, 128):
        tile = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x.ap([[64, 128], [1, 64]], scalar_offset=i))
        nisa.tensor_scalar(dst=tile, data=tile, op0=nl.add, operand0=2.0)
        nisa.dma_copy(dst=out.ap([[64, 128], [1, 64]], scalar_offset=i), src=tile)
    return out


def test_a_loop_register_as_scalar_offset_addresses_row_tiles():
    x = np.arange(512 * 64, dtype=np.float32).reshape(512, 64)
    got = dynamic_row_tiles(x, np.array([[384]], np.int32))
    assert np.array_equal(got[:384], x[:384] + 2)           # three tiles: i = 0, 128, 256
    assert np.all(np.isnan(got[384:]))                      # never written


@nki.jit
def fori_copy_prefix(data, ub):
    """The nl.fori_loop docs example: copy data[0, i] for i < ub, one element per iteration."""
    n = data.shape[1]
    output = nl.ndarray((1, n), dtype=data.dtype, buffer=nl.shared_hbm)
    ub_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=ub_sb, src=ub)
    ub_reg = nisa.register_alloc()
    nisa.register_load(ub_reg, ub_sb)
    zeros = nl.zeros((1, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=output, src=zeros)
    temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.dma_copy(dst=output.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)
    nl.fori_loop(0, ub_reg, body)
    return output


def test_fori_loop_docs_example_with_the_induction_register_as_scalar_offset():
    data = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    got = fori_copy_prefix(data, np.array([[5]], np.int32))
    assert got.tolist() == [[1, 2, 3, 4, 5, 0, 0, 0]]
