"""Virtual registers, NKI 0.7 scalars and dynamic loops (registers.py): the forms the NKI docs define
(nki.isa.register_*, nl.fori_loop, nl.while_loop in both versions; nl.dynamic_range and `while reg:`
in NKI 0.6 only, `nki_0_6`; nisa.NkiScalar / scalar_load / scalar_store in NKI 0.7)."""
import re

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator import nki_versions

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


@pytest.mark.usefixtures("nki_0_6")
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


def test_fori_loop_register_bounds_and_step(nki_version):
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


def test_while_loop_docs_example(nki_version):
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


@pytest.mark.usefixtures("nki_0_6")
def test_bare_while_on_a_register():
    assert bare_while(np.zeros(1, np.float32))[0, 0] == 0


def _fails(body, match):
    @nki.jit
    def k(x):
        body()
    with pytest.raises(NkiValidationError, match=match) as info:
        k(np.zeros(1, np.float32))
    assert re.search(LINE, str(info.value)), str(info.value)
    return info.value


def test_register_values_are_device_only(nki_version):
    _fails(lambda: int(nisa.register_alloc(3)), "exists only on device")
    _fails(lambda: nisa.register_alloc(3) == 3, "exists only on device")
    # "converting it with int() / range() raises TypeError" (the VirtualRegister page, tracer front end); the
    # message names only loops the emulated version has
    error = _fails(lambda: range(nisa.register_alloc(3)), "exists only on device")
    assert isinstance(error, TypeError)
    assert ("nl.dynamic_range" in str(error)) == (nki_version == nki_versions.V06), str(error)


@pytest.mark.usefixtures("nki_0_7")
def test_a_register_as_a_python_condition_is_a_type_error():
    def condition():
        if nisa.register_alloc(1):
            pass
    assert isinstance(_fails(condition, "VirtualRegister used as a Python condition"), TypeError)


@pytest.mark.usefixtures("nki_0_6")
def test_unset_register_and_bad_step_in_dynamic_range():
    _fails(lambda: list(nl.dynamic_range(nisa.register_alloc())), "never set")
    _fails(lambda: list(nl.dynamic_range(0, 4, nisa.register_alloc(1))), "step must be a compile-time positive int")


def test_unset_register_bad_step_and_wide_load(nki_version):
    _fails(lambda: nl.fori_loop(0, nisa.register_alloc(), lambda i: None), "never set")
    _fails(lambda: nl.fori_loop(0, 4, lambda i: None, step=nisa.register_alloc(1)),
           "step must be a compile-time positive int")

    def wide_load():
        nisa.register_load(nisa.register_alloc(), nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.sbuf))
    _fails(wide_load, "exactly one element")


@pytest.mark.usefixtures("nki_0_6")
def test_loop_induction_register_is_read_only():
    def write_i():
        for i in nl.dynamic_range(2):
            nisa.register_move(i, 5)
    _fails(write_i, "read-only")


def test_while_loop_body_must_return_a_register():
    _fails(lambda: nl.while_loop(nisa.register_alloc(1), lambda r: None), "must return the next condition register")


@pytest.mark.usefixtures("nki_0_6")
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


@pytest.mark.usefixtures("nki_0_6")
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


def test_fori_loop_docs_example_with_the_induction_register_as_scalar_offset(nki_version):
    data = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    got = fori_copy_prefix(data, np.array([[5]], np.int32))
    assert got.tolist() == [[1, 2, 3, 4, 5, 0, 0, 0]]


# --- registers hold the language guide's types, fp32 included ------------------------------------
@nki.jit
def register_round_trip(x, dtype):
    """A value through a register: register_load from a `dtype` tile, register_store into fp32."""
    out = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    cell = nl.ndarray((1, 1), dtype=dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=cell, src=x)
    reg = nisa.register_alloc()
    nisa.register_load(reg, cell)
    back = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.register_store(back, reg)
    nisa.dma_copy(dst=out, src=back)
    return out


def test_a_register_holds_an_fp32_value(nki_version):
    # "Each register is 32-bit and supports ... u8, u16, u32, i8, i16, i32, and fp32" (NKI 0.6 language guide)
    assert register_round_trip(np.array([[2.75]], np.float32), nl.float32)[0, 0] == 2.75


def test_a_float_register_is_not_a_loop_bound(nki_version):
    def float_bound():
        t = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=2.5)
        reg = nisa.register_alloc()
        nisa.register_load(reg, t)
        nl.fori_loop(0, reg, lambda i: None)
    _fails(float_bound, "holds the float 2.5.*loop bounds, conditions and offsets are integers")


def test_register_dtypes_per_version():
    x = np.array([[1.5]], np.float32)
    with nki_versions.emulating("0.6"):          # the 0.6 guide's list (u8 ... i32, fp32): no bf16
        with pytest.raises(NkiValidationError, match="register_load: src dtype bfloat16: a register holds one "
                                                     "32-bit value of int8"):
            register_round_trip(x, nl.bfloat16)
    with nki_versions.emulating("0.7"):          # 0.7's register_load page: any NKI dtype up to 32 bits
        assert register_round_trip(x, nl.bfloat16)[0, 0] == 1.5


# --- NKI 0.7 removed `while reg:` and nl.dynamic_range (corpus: test_rule_corpus.py) ------------------
def test_while_on_a_register_names_its_replacement_under_0_7():
    with nki_versions.emulating("0.7"):
        _fails(lambda: bool(nisa.register_alloc(1)), "removed in NKI 0.7: use nl.while_loop")


# --- NkiScalar (NKI 0.7) ------------------------------------------------------------------------
@nki.jit
def scalar_arithmetic(index):
    """The scalar deep dive's pattern: i = scalar_load(tile); i = i * 4 + 1; scalar_store."""
    tile = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=index)
    i = nisa.scalar_load(tile)
    i = 1 + i * 4 - 3 * (-i) + i - i
    result = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.scalar_store(result, i)
    out = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=result)
    return out


def test_scalar_arithmetic_is_computed_on_device_and_wraps_at_32_bits():
    assert scalar_arithmetic(np.array([[5]], np.int32))[0, 0] == 1 + 5 * 4 + 3 * 5
    big = np.array([[100000]], np.int32)
    expected = (1 + 100000 * 7 + 2**31) % 2**32 - 2**31          # "arithmetic that outgrows 32 bits wraps"
    assert scalar_arithmetic(big)[0, 0] == expected


@nki.jit
def scalar_bounded_copy(data, count):
    """nl.fori_loop bounded by an NkiScalar expression; the induction register as scalar_offset."""
    n = data.shape[1]
    out = nl.ndarray((1, n), dtype=data.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=nl.zeros((1, n), dtype=nl.float32, buffer=nl.sbuf))
    c = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=c, src=count)
    temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

    def body(i):
        nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1))
        nisa.dma_copy(dst=out.ap([[1, 1], [1, 1]], scalar_offset=i, indirect_dim=1), src=temp)
    nl.fori_loop(0, nisa.scalar_load(c) + 1, body)
    return out


def test_a_scalar_bounds_a_fori_loop():
    data = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    assert scalar_bounded_copy(data, np.array([[3]], np.int32)).tolist() == [[1, 2, 3, 4, 0, 0, 0, 0]]


@nki.jit
def scalar_offset_row(x, row):
    out = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.shared_hbm)
    r = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=r, src=row)
    t = nl.ndarray((1, 8), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.ap([[8, 1], [1, 8]], scalar_offset=nisa.scalar_load(r) * 2, indirect_dim=0))
    nisa.dma_copy(dst=out, src=t)
    return out


def test_a_scalar_is_an_access_pattern_offset():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    assert np.array_equal(scalar_offset_row(x, np.array([[3]], np.int32)), x[6:7])


def test_a_scalar_has_no_python_value():
    def as_condition():
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        if nisa.scalar_load(t):
            pass
    _fails(as_condition, "NkiScalar's value exists only on device")

    def scalar_from_a_float_tile():
        nisa.scalar_load(nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf))
    _fails(scalar_from_a_float_tile, "scalar_load: src dtype float32: a scalar is nl.int32")

    # "A 1x1 tensor in SBUF or HBM" (the scalar_load and scalar_store pages)
    def scalar_from_psum():
        nisa.scalar_load(nl.zeros((1, 1), dtype=nl.int32, buffer=nl.psum))
    _fails(scalar_from_psum, "scalar_load: src is in psum; a scalar moves a value from or to memory in HBM or SBUF")

    def scalar_into_psum():
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        nisa.scalar_store(nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.psum), nisa.scalar_load(t))
    _fails(scalar_into_psum, "scalar_store: dst is in psum")

    def store_a_comparison():
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1)
        nl.fori_loop(0, nisa.scalar_load(t) < 4, lambda i: None)
    _fails(store_a_comparison, "comparison is traced but its result cannot be used")


def test_a_scalar_bound_loaded_in_a_dry_run_is_unknown():
    with pytest.raises(NkiValidationError, match="nl.fori_loop: the register was loaded from memory in a dry run"):
        nkisim.run(scalar_bounded_copy, np.zeros((1, 8), np.float32), np.array([[3]], np.int32), dry_run=True)


def test_scalars_are_not_in_nki_0_6():
    with nki_versions.emulating("0.6"):
        assert not hasattr(nisa, "scalar_load") and not hasattr(nisa, "NkiScalar")
        with pytest.raises(NkiValidationError, match="nki.isa.scalar_load is not in NKI 0.6.0"):
            scalar_arithmetic(np.array([[5]], np.int32))


@nki.jit
def through_one_dim_sbuf(n):
    """out = n through a register, with a one-element, one-dim SBUF tensor at each end."""
    out = nl.ndarray((1,), dtype=nl.int32, buffer=nl.shared_hbm)
    n_sb = nl.ones([1], dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=n_sb, src=n)
    reg = nisa.register_alloc()
    nisa.register_load(reg, n_sb)
    back = nl.ndarray([1], dtype=nl.int32, buffer=nl.sbuf)
    nisa.register_store(back, reg)
    nisa.dma_copy(dst=out, src=back)
    return out


def test_a_one_element_one_dim_sbuf_tensor_is_a_register_source_and_destination(nki_version):
    # 2.32 and v2.33.0 nki.isa.register_load / register_store pages: the tensor holds "exactly one element
    # (shape [1] or [1, 1])", and their examples allocate nl.ones([1], dtype=nl.int32, buffer=nl.sbuf)
    assert nkisim.run(through_one_dim_sbuf, np.array([41], np.int32)).outputs.tolist() == [41]


def test_fill_helpers_name_themselves_in_errors():
    def kernel(x):
        nl.ones((0, 4), dtype=nl.float32, buffer=nl.sbuf)
    with pytest.raises(NkiValidationError, match=r"^nl\.ones: shape must be a tuple of positive"):
        nki.jit(kernel)(np.zeros((1, 1), np.float32))
