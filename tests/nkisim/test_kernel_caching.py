"""Kernels that read global or closure state: legal, but a cached compilation must not go stale.

NKI caches compiled kernels by their arguments' shapes, dtypes and compile-time values (language
guide, "Kernel Caching"). Reading a global dict of constants compiles and runs (AWS's nki-library
does it); changing what a kernel read between two launches with the same arguments is where trn2
would run the old compiled kernel, so nkisim raises there. The failing cases are in
`test_rule_corpus.py`; these are the launches that must pass, and where the line between them is.
"""
from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkisim import NkiRaceWarning, NkiValidationError
from nkisim.emulator import compile_cache

STALE = "changed since this kernel was compiled for the same arguments"
# A module-level table of constants read by a helper, the way nki-library's output projection does.
_SCALE_FOR_ROWS = {128: 2.0, 64: 4.0}


def _scale(rows: int) -> float:
    return _SCALE_FOR_ROWS[rows]


@nki.jit
def scaled_copy(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=_scale(x.shape[0]))
    nisa.dma_copy(dst=out, src=t)
    return out


def _x(rows: int, cols: int = 8) -> np.ndarray:
    return np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)


@pytest.fixture
def table():
    saved = dict(_SCALE_FOR_ROWS)
    yield _SCALE_FOR_ROWS
    _SCALE_FOR_ROWS.clear()
    _SCALE_FOR_ROWS.update(saved)


def test_a_kernel_reading_a_constant_global_dict_runs_and_computes(table):
    for _ in range(2):                          # the second launch is a cache hit with the same value
        assert np.array_equal(scaled_copy(_x(128)), _x(128) * 2.0)
    assert np.array_equal(scaled_copy(_x(64)), _x(64) * 4.0)


def test_a_change_then_the_same_arguments_is_stale_and_names_the_read(table):
    scaled_copy(_x(128))
    table[128] = 3.0
    with pytest.raises(NkiValidationError, match=STALE) as info:
        scaled_copy(_x(128))
    message = str(info.value)
    assert "global '_SCALE_FOR_ROWS' (a dict)" in message and "x: float32[128, 8]; LNC=1" in message
    assert message.endswith(f"(test_kernel_caching.py:{_scale.__code__.co_firstlineno + 1})")


def test_a_change_then_new_shapes_is_a_new_compilation_with_the_new_value(table):
    scaled_copy(_x(128))
    table[128] = 3.0
    assert np.array_equal(scaled_copy(_x(128, cols=4)), _x(128, cols=4) * 3.0)    # new key: compiles
    assert np.array_equal(scaled_copy(_x(128, cols=4)), _x(128, cols=4) * 3.0)    # and is cached
    with pytest.raises(NkiValidationError, match=STALE):                          # the old key is stale
        scaled_copy(_x(128))


def test_a_value_changed_back_is_not_stale(table):
    scaled_copy(_x(128))
    table[128] = 3.0
    scaled_copy(_x(128, cols=2))
    table[128] = 2.0
    assert np.array_equal(scaled_copy(_x(128)), _x(128) * 2.0)


def test_the_lnc_and_compile_time_arguments_are_part_of_the_key():
    factor = [2.0]

    @nki.jit
    def k(x, bias):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor[0], op1=nl.add, operand1=bias)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = _x(128)
    k(x, 1.0)
    factor[0] = 5.0
    assert np.array_equal(k(x, 0.0), x * 5.0)          # another compile-time value: a new compilation
    assert np.array_equal(k(x, bias=0.0), x * 5.0)     # the same key, given by keyword
    with pytest.warns(NkiRaceWarning):                # both programs copy all rows (equal values)
        assert np.array_equal(k[2](x, 1.0), x * 5.0 + 1)   # LNC=2 compiles separately
    with pytest.raises(NkiValidationError, match=f"closure variable 'factor' \\(a list\\), which {STALE}"):
        k(x, 1.0)


def test_changes_a_launch_makes_itself_are_not_stale():
    """A helper that memoises into a global dict changes it during the launch, on trn2 too."""
    memo: dict[str, int] = {}

    def width(cols: int) -> int:
        if str(cols) not in memo:
            memo[str(cols)] = cols
        return memo[str(cols)]

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((x.shape[0], width(x.shape[1])), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    for cols in (8, 4, 8, 2, 4):
        assert np.array_equal(k(_x(128, cols)), _x(128, cols))
    assert memo == {"8": 8, "4": 4, "2": 2}


def test_a_failed_launch_is_not_cached():
    cols = {"n": 4}

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((x.shape[0], cols["n"]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    with pytest.raises(NkiValidationError) as info:
        k(_x(128))
    assert STALE not in str(info.value)
    cols["n"] = 8
    assert np.array_equal(k(_x(128)), _x(128))


class _Opaque:
    def __reduce__(self):
        raise TypeError("not picklable")

    def __repr__(self):
        raise RuntimeError("no repr")


def test_values_that_cannot_be_pickled_are_fingerprinted_by_repr_or_not_tracked():
    unpicklable = [lambda: 0]
    before = compile_cache.fingerprint(unpicklable)
    unpicklable.append(1)
    assert before is not None and compile_cache.fingerprint(unpicklable) != before
    assert compile_cache.fingerprint(_Opaque()) is None

    holder = [_Opaque()]

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if len(holder) == 1:
            nisa.dma_copy(dst=out, src=x)
        return out

    k(_x(128))
    holder[0] = _Opaque()
    assert np.array_equal(k(_x(128)), _x(128))      # untracked: nkisim cannot tell, so it does not refuse
