"""Virtual registers and the dynamic loops built on them.

`nisa.register_alloc/move/load/store` and `nisa.VirtualRegister`:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.register_alloc.html
(and .register_move / .register_load / .register_store / .VirtualRegister pages);
`nl.dynamic_range`, `nl.fori_loop`, `nl.while_loop`:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.language.fori_loop.html
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dynamic-loops.html

A register holds one 32-bit integer of one program (physical core). Its value exists only on
device, so the kernel cannot read it in Python: comparisons, `int()` and arithmetic on a register
raise an error naming the device-side alternatives. Two documented forms do read it: a bare
`while reg:` (the parser front-end's register-conditioned loop, loops while the value is
nonzero) and `nl.dynamic_range` / `nl.fori_loop` / `nl.while_loop` bounds and conditions.
Other emulator modules read a register with `value_of` (e.g. an access pattern's scalar_offset).

The emulator runs a dynamic loop by running its body once per iteration, so the trace holds every
iteration the hardware would execute. Loop bounds are read once, when the loop starts (the loop is
one hardware instruction with its bounds as operands). A `while_loop` that has not ended after
`MAX_DYNAMIC_ITERATIONS` iterations is reported as not terminating (an emulator guard, not a
hardware limit). A dry run computes no values, so a register loaded from memory there has no value:
a loop bound or condition read from it is an error that says to run on real inputs.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, NoReturn

import numpy as np

from . import dtypes
from .errors import NkiValidationError, kernel_location
from ..costmodel import costs
from ..vocabulary import SYNC, instruction
from .cores import current
from .issue import Issue, NkiInstruction
from .tensor import PSUM, NkiTensor

MAX_DYNAMIC_ITERATIONS = 1_000_000
_FROM_MEMORY_IN_DRY_RUN = object()      # a register_load's value in a dry run: known only on device
_INT32 = 1 << 32


def _wrap(value: int) -> int:
    """A 32-bit register's signed value."""
    return (int(value) + (1 << 31)) % _INT32 - (1 << 31)


class VirtualRegister:
    """`nisa.VirtualRegister`: one 32-bit integer register of the running program."""

    __slots__ = ("_value", "frozen", "program")

    def __init__(self, state: int | None = None, frozen: bool = False) -> None:
        self._value = None if state is None else _wrap(state)
        self.frozen = frozen
        self.program = current("nisa.", "VirtualRegister").id

    def __repr__(self) -> str:
        return "VirtualRegister(<device value>)"

    def __bool__(self) -> bool:
        """`while reg:` loops while the register is nonzero (parser front-end form)."""
        _not_in_no_reorder("while reg:")
        return value_of(self, "while reg") != 0

    def scalar_offset_value(self) -> int:
        """The value an access pattern's scalar_offset reads (views.py)."""
        return value_of(self, "scalar_offset")

    def _device_only(self, *_: Any) -> NoReturn:
        raise NkiValidationError(
            "a VirtualRegister's value exists only on device; it cannot be used in Python expressions, int() or "
            "range(). Use it as an nl.dynamic_range / nl.fori_loop bound, an access pattern scalar_offset, or write "
            f"it to memory with nisa.register_store ({kernel_location()})")

    __int__ = __index__ = __float__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _device_only
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __mod__ = _device_only
    __hash__ = object.__hash__


def value_of(reg: VirtualRegister, use: str) -> int:
    """The register's current value; `use` names the reader in the error for an unset register."""
    if reg.program != current("nisa.", "VirtualRegister").id:
        raise NkiValidationError(f"{use}: the register belongs to program {reg.program}; registers are per core "
                                 f"({kernel_location()})")
    if reg._value is None:
        raise NkiValidationError(f"{use}: the register was allocated without a value and never set (use "
                                 f"register_alloc(x), register_move or register_load first) ({kernel_location()})")
    if reg._value is _FROM_MEMORY_IN_DRY_RUN:
        raise NkiValidationError(
            f"{use}: the register was loaded from memory in a dry run, which computes no values, so the control "
            f"flow it decides is unknown; run the kernel on real inputs (nkisim.run, then nkisim.estimate(run.trace) "
            f"for the cost model) ({kernel_location()})")
    return reg._value


def _register(c: Any, role: str, reg: Any) -> VirtualRegister:
    if not isinstance(reg, VirtualRegister):
        c.fail(f"{role} must be a VirtualRegister from nisa.register_alloc(), got {type(reg).__name__} {reg!r}")
    return reg


def _set(c: Any, reg: VirtualRegister, value: int) -> None:
    if reg.frozen:
        c.fail("the register is read-only (a loop's induction register)")
    reg._value = _wrap(value)


def _immediate(c: Any, role: str, x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        c.fail(f"{role} must be a compile-time int or a VirtualRegister, got {type(x).__name__} {x!r}")
    if not -(1 << 31) <= x < 1 << 32:
        c.fail(f"{role}={x} does not fit in a 32-bit register")
    return int(x)


class _Unrecorded:
    """Error reporting for register operations that touch no memory (no trace record)."""

    def __init__(self, api: str) -> None:
        current("nisa.", api)
        self.api = api

    def fail(self, msg: str) -> NoReturn:
        raise NkiValidationError(f"{self.api}: {msg} ({kernel_location()})")


def register_alloc(x: int | None = None) -> VirtualRegister:
    """A new register, set to the int `x` or left unset (None)."""
    c = _Unrecorded("register_alloc")
    return VirtualRegister(None if x is None else _immediate(c, "x", x))


def register_move(dst: VirtualRegister, src: Any) -> None:
    """dst = src (a compile-time int or another register)."""
    c = _Unrecorded("register_move")
    dst = _register(c, "dst", dst)
    value = value_of(src, "register_move") if isinstance(src, VirtualRegister) else _immediate(c, "src", src)
    _set(c, dst, value)


def _scalar_tensor(c: Issue, role: str, t: Any) -> NkiTensor:
    t = c.tensor(role, t, on_chip=False)
    if t.buffer is PSUM:
        # "Load a scalar value from memory (HBM or SBUF)" / "... into memory (HBM/SBUF)": the register_load and
        # register_store reference pages (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/
        # generated/nki.isa.register_load.html)
        c.fail(f"{role} is in psum; a register moves a value from or to memory in HBM or SBUF only (copy the PSUM "
               f"value to SBUF with nisa.tensor_copy first)")
    if t.size != 1:
        c.fail(f"{role} must hold exactly one element (shape [1] or [1, 1]), got shape {t.shape}")
    if t.dtype not in dtypes.INTS or t.dtype.itemsize > 4 or t.dtype == dtypes.bool_:
        c.fail(f"{role} dtype {t.dtype.name}: a register holds a 32-bit integer, so {role} must be an integer dtype "
               f"of at most 32 bits")
    return t


@instruction("REGISTER_LOAD", engines=(SYNC,), cost=costs.per_element_cycles, color="#999999")
def register_load(dst: VirtualRegister, src: NkiTensor) -> NkiInstruction:
    """dst = the one integer element of src (HBM or SBUF)."""
    c = Issue("register_load", None)
    dst, src = _register(c, "dst", dst), _scalar_tensor(c, "src", src)
    ins = c.record(SYNC, [("src", src)], [], {"dtype": src.dtype.name}, epp=1)
    c.race_check([src], [])
    if c.prog.compute:
        _set(c, dst, int(src.arr.reshape(-1)[0]))
    else:
        _set(c, dst, 0)
        dst._value = _FROM_MEMORY_IN_DRY_RUN
    return ins


@instruction("REGISTER_STORE", engines=(SYNC,), cost=costs.per_element_cycles, color="#b7b7b7")
def register_store(dst: NkiTensor, src: VirtualRegister) -> NkiInstruction:
    """dst (one integer element, HBM or SBUF) = the register's value, wrapped to dst's width."""
    c = Issue("register_store", None)
    dst, src = _scalar_tensor(c, "dst", dst), _register(c, "src", src)
    value = value_of(src, "register_store")
    ins = c.record(SYNC, [], [("dst", dst)], {"dtype": dst.dtype.name}, epp=1)
    race = c.race_check([], [dst])
    if c.prog.compute:
        dst.arr.reshape(-1)[0] = np.array(value, np.int64).astype(dst.dtype)
    race()
    return ins


# --- dynamic loops (nki.language) ----------------------------------------------------------------
def _bound(api: str, x: Any) -> int:
    if isinstance(x, VirtualRegister):
        return value_of(x, api)
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise NkiValidationError(f"{api}: bounds must be ints or VirtualRegisters, got {type(x).__name__} {x!r} "
                                 f"({kernel_location()})")
    return int(x)


def _not_in_no_reorder(api: str) -> None:
    """Dynamic loops cannot sit inside an `nl.no_reorder()` block (SDK:nki/api nki.language.no_reorder;
    SDK:nki/deep-dives/nki-dynamic-loops.rst, "Interaction with no_reorder"; NKI 0.6 migration guide)."""
    if current(api).no_reorder_depth:
        raise NkiValidationError(
            f"{api}: a register-based dynamic loop is not supported inside an nl.no_reorder() block (the block "
            f"covers the functions called under it too); put the no_reorder block inside the loop body "
            f"({kernel_location()})")


def _step(api: str, step: Any) -> int:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step <= 0:
        raise NkiValidationError(f"{api}: step must be a compile-time positive int (the hardware loop encodes it as "
                                 f"an immediate), got {type(step).__name__} {step!r} ({kernel_location()})")
    return int(step)


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> Iterator[VirtualRegister]:
    """`nl.dynamic_range`: a hardware loop; bounds may be registers, the loop variable is a
    read-only register."""
    _not_in_no_reorder("nl.dynamic_range")
    lo, hi = (0, _bound("nl.dynamic_range", start)) if stop is None else (
        _bound("nl.dynamic_range", start), _bound("nl.dynamic_range", stop))
    return (VirtualRegister(i, frozen=True) for i in range(lo, hi, _step("nl.dynamic_range", step)))


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[VirtualRegister], None], step: int = 1) -> None:
    """`nl.fori_loop`: body_fun(i) for i in [lower, upper) by step, i a read-only register."""
    _not_in_no_reorder("nl.fori_loop")
    if not callable(body_fun):
        raise NkiValidationError(f"nl.fori_loop: body_fun must be callable, got {body_fun!r} ({kernel_location()})")
    for i in range(_bound("nl.fori_loop", lower), _bound("nl.fori_loop", upper), _step("nl.fori_loop", step)):
        body_fun(VirtualRegister(i, frozen=True))


def while_loop(init: VirtualRegister, body_fun: Callable[[VirtualRegister], VirtualRegister]) -> None:
    """`nl.while_loop`: r = init; while r != 0: r = body_fun(r) (the body gets a copy of r)."""
    _not_in_no_reorder("nl.while_loop")
    if not isinstance(init, VirtualRegister):
        raise NkiValidationError(f"nl.while_loop: init must be a VirtualRegister, got {type(init).__name__} "
                                 f"({kernel_location()})")
    r = init
    for _ in range(MAX_DYNAMIC_ITERATIONS):
        if value_of(r, "nl.while_loop") == 0:
            return
        r = body_fun(VirtualRegister(value_of(r, "nl.while_loop")))
        if not isinstance(r, VirtualRegister):
            raise NkiValidationError(f"nl.while_loop: body_fun must return the next condition register, got "
                                     f"{type(r).__name__} ({kernel_location()})")
    raise NkiValidationError(f"nl.while_loop: still looping after {MAX_DYNAMIC_ITERATIONS} iterations; the condition "
                             f"register never became 0 (emulator guard against a non-terminating loop) "
                             f"({kernel_location()})")


__all__ = ["VirtualRegister", "register_alloc", "register_move", "register_load", "register_store", "value_of",
           "dynamic_range", "fori_loop", "while_loop"]
