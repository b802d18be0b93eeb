"""Virtual registers, NKI 0.7's scalars, and the dynamic loops built on them.

`nisa.register_alloc/move/load/store` and `nisa.VirtualRegister`:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.register_alloc.html
(and .register_move / .register_load / .register_store / .VirtualRegister pages);
`nl.dynamic_range`, `nl.fori_loop`, `nl.while_loop`:
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.language.fori_loop.html
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dynamic-loops.html

A register holds one 32-bit value of one program (physical core): an integer, or a float of a
float tile ("u8, u16, u32, i8, i16, i32, and fp32", NKI 0.6 language guide; NKI 0.7's register_load
page allows any NKI dtype up to 32 bits). Its value exists only on device, so the kernel cannot
read it in Python: comparisons, `int()` and arithmetic on a register raise an error naming the
device-side alternatives. Documented forms that do read it: a bare `while reg:` (NKI 0.6's parser
front end only; NKI 0.7 removed it for `nl.while_loop`), `nl.dynamic_range` (NKI 0.6 only) and
`nl.fori_loop` / `nl.while_loop` bounds and conditions. Bounds and offsets need an integer value.
Other emulator modules read a register with `value_of` (e.g. an access pattern's scalar_offset).

`nisa.NkiScalar` (NKI 0.7, "the future replacement for VirtualRegister"; tracer front end only) is an
integer computed on device, nl.int32 or nl.int64 as the 1x1 tile `nisa.scalar_load` read it from: `+ - *`
with ints or scalars of the same dtype give new scalars (wrapping at the scalar's width, never widened),
comparisons of int32 scalars are traced but their result cannot be used (of int64 ones, rejected), and a
scalar bounds `nl.fori_loop` (int32 only) or offsets an access pattern (int32 only on SBUF / PSUM); a
`fori_loop` whose bounds are not registers hands its body an NkiScalar (v2.33.0 nki.language.fori_loop page)
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.NkiScalar.html,
.../nki.isa.scalar_load.html, https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-scalar.html).

The emulator runs a dynamic loop by running its body once per iteration, so the trace holds every
iteration the hardware would execute; a loop that runs 0 times runs its body once only to check it (the
device compiles the body whatever the trip count: `_checking_only`). Loop bounds are read once, when the loop starts (the loop is
one hardware instruction with its bounds as operands). A `while_loop` that has not ended after
`MAX_DYNAMIC_ITERATIONS` iterations is reported as not terminating (an emulator guard, not a
hardware limit). A dry run computes no values, so a register loaded from memory there has no value:
a loop bound or condition read from it is an error that says to run on real inputs.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import Any, Callable, Iterator, NoReturn

import numpy as np
import torch

from . import dtypes, nki_versions
from .errors import NkiDeprecationWarning, NkiTypeError, NkiValidationError, kernel_location
from ..costmodel import costs
from ..vocabulary import SYNC, instruction
from .cores import current
from .issue import Issue, NkiInstruction
from .loop_bodies import LoopBody
from .tensor import PSUM, NkiTensor

MAX_DYNAMIC_ITERATIONS = 1_000_000
_FROM_MEMORY_IN_DRY_RUN = object()      # a register_load's value in a dry run: known only on device


def _wrap(value: int, bits: int = 32) -> int:
    """The signed value a `bits`-wide register holds."""
    return (int(value) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))


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
        """`while reg:` loops while the register is nonzero (NKI 0.6's parser front end only)."""
        if not nki_versions.applies("while-register"):
            raise NkiTypeError(
                f"a VirtualRegister used as a Python condition (`while reg:` / `if reg:`): "
                f"{nki_versions.unavailable('while-register')} ({kernel_location()})")
        _not_in_no_reorder("while reg:")
        _deprecated("`while reg:`", "while-register")
        return integer_value_of(self, "while reg") != 0

    def scalar_offset_value(self) -> int:
        """The value an access pattern's scalar_offset reads (views.py)."""
        return integer_value_of(self, "scalar_offset")

    def _device_only(self, *_: Any) -> NoReturn:
        dynamic_range = nki_versions.applies("nki.language.dynamic_range")
        loops = "nl.dynamic_range / nl.fori_loop" if dynamic_range else "nl.fori_loop"
        raise NkiTypeError(
            "a VirtualRegister's value exists only on device; it cannot be used in Python expressions, int() or "
            f"range(). Use it as an {loops} bound, an access pattern scalar_offset, or write it to memory with "
            f"nisa.register_store ({kernel_location()})")

    __int__ = __index__ = __float__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _device_only
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __floordiv__ = __mod__ = _device_only
    __hash__ = object.__hash__


def value_of(reg: "VirtualRegister | NkiScalar", use: str) -> Any:
    """The register's (or scalar's) current value; `use` names the reader in the error for an unset one."""
    if isinstance(reg, NkiScalar):
        reg._usable(use)
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


def integer_value_of(reg: "VirtualRegister | NkiScalar", use: str) -> int:
    """The value as a loop bound, condition or offset reads it: an integer."""
    value = value_of(reg, use)
    if isinstance(value, float):
        raise NkiValidationError(f"{use}: the register holds the float {value!r} (loaded from a float tile); loop "
                                 f"bounds, conditions and offsets are integers ({kernel_location()})")
    return value


def _register(c: Any, role: str, reg: Any) -> VirtualRegister:
    if not isinstance(reg, VirtualRegister):
        c.fail(f"{role} must be a VirtualRegister from nisa.register_alloc(), got {type(reg).__name__} {reg!r}")
    return reg


def _set(c: Any, reg: VirtualRegister, value: int | float) -> None:
    if reg.frozen:
        c.fail("the register is read-only (a loop's induction register)")
    reg._value = value if isinstance(value, float) else _wrap(value)


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


_GUIDE_REGISTER_DTYPES = tuple(d for d in dtypes.INTS if d != dtypes.bool_) + (dtypes.float32,)


def _memory_tensor(c: Issue, role: str, t: Any, holder: str) -> NkiTensor:
    """`t` as a tensor in HBM or SBUF, never PSUM: "Load a scalar value from memory (HBM or SBUF)" / "... into
    memory (HBM/SBUF)" (the register_load and register_store pages), "A 1x1 tensor in SBUF or HBM" (scalar_load
    and scalar_store): https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/
    nki.isa.register_load.html and .../nki.isa.scalar_load.html."""
    t = c.tensor(role, t, on_chip=False)
    if t.buffer is PSUM:
        c.fail(f"{role} is in psum; {holder} moves a value from or to memory in HBM or SBUF only (copy the PSUM "
               f"value to SBUF with nisa.tensor_copy first)")
    return t


def _scalar_tensor(c: Issue, role: str, t: Any) -> NkiTensor:
    t = _memory_tensor(c, role, t, "a register")
    if t.size != 1:
        c.fail(f"{role} must hold exactly one element (shape [1] or [1, 1]), got shape {t.shape}")
    allowed = dtypes.SUPPORTED if nki_versions.applies("register-any-dtype") else _GUIDE_REGISTER_DTYPES
    if t.dtype not in allowed:
        listed = ", ".join(d.name for d in allowed)
        c.fail(f"{role} dtype {t.dtype.name}: a register holds one 32-bit value of {listed} "
               f"(NKI {nki_versions.release()})")
    return t


def _element(t: NkiTensor) -> int | float:
    """The one element of a register-sized tile, as the register holds it."""
    value = t.arr.reshape(-1)[0]
    return float(value) if t.dtype in dtypes.FLOATS else int(value)


@instruction("REGISTER_LOAD", engines=(SYNC,), cost=costs.per_element_cycles, color="#999999")
def register_load(dst: VirtualRegister, src: NkiTensor) -> NkiInstruction:
    """dst = the one integer element of src (HBM or SBUF)."""
    c = Issue("register_load", None)
    dst, src = _register(c, "dst", dst), _scalar_tensor(c, "src", src)
    ins = c.record(SYNC, [("src", src)], [], {"dtype": src.dtype.name}, epp=1)
    c.race_check([src], [])
    if c.prog.compute:
        _set(c, dst, _element(src))
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
        dst.arr.reshape(-1)[0] = _as_element(value, dst.dtype)
    race()
    return ins


def _as_element(value: int | float, dtype: np.dtype) -> Any:
    """A register's value written to a one-element tile: an integer wraps to the tile's width, a float
    is cast as the engines cast (round to nearest even; into an integer tile: RNE, saturate)."""
    if isinstance(value, float):
        cell = np.empty(1, dtype)
        dtypes.store(cell, torch.tensor([value], dtype=torch.float32))
        return cell[0]
    return np.array(value, np.int64).astype(dtype)


# --- dynamic loops (nki.language) ----------------------------------------------------------------
def _bound(api: str, x: Any, read: bool = True) -> int | None:
    """The loop bound's value, checked; None without `read` (a loop in a body run only to check it)."""
    if isinstance(x, NkiScalar) and x.dtype == dtypes.int64:
        raise NkiValidationError(f"{api}: an nl.int64 NkiScalar cannot bound the loop: a bound must be 32-bit, the "
                                 f"loop's compare-and-branch has no 64-bit form (nki.language.fori_loop page); load the "
                                 f"bound from an nl.int32 tile ({kernel_location()})")
    if isinstance(x, (VirtualRegister, NkiScalar)):
        return integer_value_of(x, api) if read else None
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        kinds = "ints, VirtualRegisters or NkiScalars" if nki_versions.applies("nki.isa.NkiScalar") else \
            "ints or VirtualRegisters"
        raise NkiValidationError(f"{api}: bounds must be {kinds}, got {type(x).__name__} {x!r} "
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


def _loop_body(api: str) -> LoopBody:
    """The record of one dynamic loop's iterations (loop_bodies.py); the enclosing loop's body counts the loop
    as one step."""
    prog = current(api)
    where = kernel_location()
    if prog.loop_bodies:
        prog.loop_bodies[-1].note_loop(api, where)
    return LoopBody(api, where)


@contextlib.contextmanager
def _iteration(api: str, body: LoopBody) -> Iterator[None]:
    """One iteration of a dynamic loop: the instructions issued in it carry it (`Program.loop_iterations`, read
    off the running loops), so that `NkiInstruction.depends_on` can tell whether two instructions sit at the same
    loop nesting, and `body` compares them with the first iteration's (the device runs one copy of the body).
    Its start and its end are fences for the cost model (`Trace.loop_fences`)."""
    prog = current(api)
    prog.loop_bodies.append(body)
    prog.loop_fences.append(prog.count)
    body.start_iteration()
    try:
        yield
    finally:
        prog.loop_bodies.pop()
    prog.loop_fences.append(prog.count)
    body.end_iteration()
    if api in BODY_FUNCTION_LOOPS:
        for storage in body.own:
            storage.scope_ended = f"the body of the {api} at {body.where}"


# The loops whose body is a function: "Tensors (nl.ndarray) declared inside a body function cannot be referenced
# outside of the loop" (the 0.6 migration guide's rules for migrated loops; Issue.tensor refuses such a reference).
BODY_FUNCTION_LOOPS = ("nl.fori_loop", "nl.while_loop")


def _ran(body: LoopBody, *bounds: Any) -> None:
    """A finished compiled loop: its trip count, kept when a bound is a runtime value (loop_bodies,
    `divergent_control_flow`, compares the cores of an LNC=2 launch); none for a loop in a body run only to check it."""
    if not current(body.api).check_only and any(isinstance(b, (VirtualRegister, NkiScalar)) for b in bounds):
        current(body.api).dynamic_trips.append((body.api, body.where, body.iteration))


def _runtime_index(as_scalar: bool, frozen: bool = True) -> "NkiScalar | VirtualRegister":
    """A loop index (a while_loop's writable condition register: not `frozen`) whose value exists only on
    device: what a body run only to check it gets."""
    if as_scalar:
        return NkiScalar(_FROM_MEMORY_IN_DRY_RUN)
    reg = VirtualRegister(frozen=frozen)
    reg._value = _FROM_MEMORY_IN_DRY_RUN
    return reg


@contextlib.contextmanager
def _checking_only(api: str, where: str) -> Iterator[None]:
    """A compiled loop's body run once only to check it, for a loop that runs 0 times here (or sits in such a
    body): on device the body is compiled whatever the trip count ("a single copy of the body is generated and
    the hardware iterates over it at runtime", the dynamic-loops deep dive), so its instructions must be valid.
    While `Program.check_only` is set, instructions are validated but compute, trace and record nothing; the body
    gets a runtime index (`_runtime_index`: as in a dry run, a scalar offset from it reads index 0)."""
    prog = current(api)
    accumulator = prog.vector_accumulator_undefined     # the Vector accumulator's state the body's checks change
    prog.check_only += 1
    try:
        with _iteration(api, LoopBody(api, where)):
            yield
    except NkiValidationError as err:
        err.args = (f"{err} [in the body of the {api} at {where}, which runs 0 times here: on device the body is "
                    f"compiled whatever its trip count]",)
        raise
    finally:
        prog.check_only -= 1
        prog.vector_accumulator_undefined = accumulator


def dynamic_range(start: Any, stop: Any = None, step: int = 1) -> Iterator[VirtualRegister]:
    """`nl.dynamic_range` (NKI 0.6; NKI 0.7 removed it for nl.fori_loop): a hardware loop; bounds may
    be registers, the loop variable is a read-only register."""
    _not_in_no_reorder("nl.dynamic_range")
    _deprecated("nl.dynamic_range", "nki.language.dynamic_range")
    api = "nl.dynamic_range"
    lo, hi = (0, start) if stop is None else (start, stop)
    return _iterations(api, _indices(api, lo, hi, step), (start, stop))


def _deprecated(construct: str, row: str) -> None:
    """NKI 0.6.0's release notes: "NKI emits a deprecation warning when it encounters `for i in
    nl.dynamic_range(...)` or `while reg:` loops" (the versions without them refuse them instead)."""
    warnings.warn(NkiDeprecationWarning(f"{construct} is deprecated in NKI 0.6 and {nki_versions.unavailable(row)} "
                                        f"({kernel_location()})"), stacklevel=3)


def _indices(api: str, lower: Any, upper: Any, step: Any) -> range:
    """The loop's indices, its bounds checked; empty in a body run only to check it (its bounds have no value)."""
    read = not current(api).check_only
    return range(_bound(api, lower, read) or 0, _bound(api, upper, read) or 0, _step(api, step))


def _iterations(api: str, indices: range, bounds: tuple) -> Iterator[VirtualRegister]:
    """The loop's iterations; when there are none, one on a runtime index, checked only."""
    body = _loop_body(api)
    if not indices:
        with _checking_only(api, body.where):
            yield _runtime_index(False)
    for i in indices:
        with _iteration(api, body):
            yield VirtualRegister(i, frozen=True)
    _ran(body, *bounds)


def fori_loop(lower: Any, upper: Any, body_fun: Callable[[Any], None], step: int = 1) -> None:
    """`nl.fori_loop`: body_fun(i) for i in [lower, upper) by step. Under NKI 0.7 i is an NkiScalar unless
    a bound is a VirtualRegister, then (and always under NKI 0.6) a read-only register."""
    _not_in_no_reorder("nl.fori_loop")
    if not callable(body_fun):
        raise NkiValidationError(f"nl.fori_loop: body_fun must be callable, got {body_fun!r} ({kernel_location()})")
    as_scalar = nki_versions.applies("fori-loop-scalar-index") and not any(
        isinstance(bound, VirtualRegister) for bound in (lower, upper))
    indices = _indices("nl.fori_loop", lower, upper, step)
    body = _loop_body("nl.fori_loop")
    for i in indices:
        with _iteration("nl.fori_loop", body):
            _no_result(body_fun(NkiScalar(i) if as_scalar else VirtualRegister(i, frozen=True)))
    if not indices:
        with _checking_only("nl.fori_loop", body.where):
            _no_result(body_fun(_runtime_index(as_scalar)))
    _ran(body, lower, upper)


def _no_result(result: Any) -> None:
    """A fori_loop body returns nothing: "body_fun – function (i) -> None" (nl.fori_loop, 2.33); "The fori_loop
    body function cannot return a value" (the 0.6 migration guide's rules for migrated loops), such as a carried
    value (JAX's fori_loop returns one). The handle of an nki.isa call is what a one-call lambda body yields."""
    if result is not None and not isinstance(result, NkiInstruction):
        raise NkiValidationError(
            f"nl.fori_loop: body_fun returned {type(result).__name__}, but a fori_loop body returns nothing (body_fun: "
            "(i) -> None); to keep a value across iterations or after the loop, write it to a tensor allocated "
            f"before the loop ({kernel_location()})")


def while_loop(init: VirtualRegister, body_fun: Callable[[VirtualRegister], VirtualRegister]) -> None:
    """`nl.while_loop`: r = init; while r != 0: r = body_fun(r) (the body gets a copy of r)."""
    _not_in_no_reorder("nl.while_loop")
    if not isinstance(init, VirtualRegister):
        raise NkiValidationError(f"nl.while_loop: init must be a VirtualRegister, got {type(init).__name__} "
                                 f"({kernel_location()})")
    r = init
    body = _loop_body("nl.while_loop")
    checking = current("nl.while_loop").check_only    # in a body run only to check it: no condition value
    for _ in range(MAX_DYNAMIC_ITERATIONS):
        if checking or integer_value_of(r, "nl.while_loop") == 0:
            if body.iteration == 0:
                with _checking_only("nl.while_loop", body.where):
                    body_fun(_runtime_index(False, frozen=False))
            _ran(body, init)
            return
        with _iteration("nl.while_loop", body):
            r = body_fun(VirtualRegister(value_of(r, "nl.while_loop")))
        if not isinstance(r, VirtualRegister):
            raise NkiValidationError(f"nl.while_loop: body_fun must return the next condition register, got "
                                     f"{type(r).__name__} ({kernel_location()})")
    raise NkiValidationError(f"nl.while_loop: still looping after {MAX_DYNAMIC_ITERATIONS} iterations; the condition "
                             f"register never became 0 (emulator guard against a non-terminating loop) "
                             f"({kernel_location()})")


# --- NkiScalar (NKI 0.7) -----------------------------------------------------------------------
_SCALAR_DTYPES = (dtypes.int32, dtypes.int64)


class NkiScalar:
    """`nisa.NkiScalar` (NKI 0.7): one int32 or int64 computed on device. Arithmetic makes new scalars of
    the same width; the value never reaches Python (no bool, int or range)."""

    __slots__ = ("_value", "dtype", "is_comparison", "program")

    def __init__(self, state: Any, dtype: Any = None, is_comparison: bool = False) -> None:
        self.dtype = dtypes.int32 if dtype is None else dtype
        self._value = state if state is _FROM_MEMORY_IN_DRY_RUN else _wrap(state, 8 * self.dtype.itemsize)
        self.is_comparison = is_comparison
        self.program = current("nisa.", "NkiScalar").id

    def __repr__(self) -> str:
        return f"NkiScalar(<device value>, dtype={self.dtype.name})"

    def _usable(self, use: str) -> None:
        if self.is_comparison:
            raise NkiValidationError(
                f"{use}: an NkiScalar comparison is traced but its result cannot be used (nki.isa.NkiScalar: "
                f"'Traced, but the result cannot be used') ({kernel_location()})")

    def _combine(self, other: Any, fn: Callable[[int, int], int], symbol: str, reflected: bool = False) -> "NkiScalar":
        self._usable(f"NkiScalar {symbol}")
        if isinstance(other, NkiScalar):
            other._usable(f"NkiScalar {symbol}")
            if other.program != self.program:
                raise NkiValidationError(f"NkiScalar {symbol}: the scalars belong to different programs; scalars "
                                         f"are per core ({kernel_location()})")
            if other.dtype != self.dtype:
                raise NkiValidationError(f"NkiScalar {symbol}: an {self.dtype.name} and an {other.dtype.name} scalar; "
                                         f"the operands' dtypes must match (a scalar's width is fixed when it is "
                                         f"loaded: nki.isa.NkiScalar page) ({kernel_location()})")
            b = other._value
        elif isinstance(other, (int, np.integer)) and not isinstance(other, bool):
            b = int(other)
        else:
            raise NkiValidationError(f"NkiScalar {symbol}: the other operand must be a Python int or an NkiScalar, "
                                     f"got {type(other).__name__} {other!r} ({kernel_location()})")
        a = self._value
        if a is _FROM_MEMORY_IN_DRY_RUN or b is _FROM_MEMORY_IN_DRY_RUN:
            return NkiScalar(_FROM_MEMORY_IN_DRY_RUN, self.dtype)
        return NkiScalar(fn(b, a) if reflected else fn(a, b), self.dtype)

    __add__ = lambda self, o: self._combine(o, int.__add__, "+")
    __radd__ = lambda self, o: self._combine(o, int.__add__, "+", True)
    __sub__ = lambda self, o: self._combine(o, int.__sub__, "-")
    __rsub__ = lambda self, o: self._combine(o, int.__sub__, "-", True)
    __mul__ = lambda self, o: self._combine(o, int.__mul__, "*")
    __rmul__ = lambda self, o: self._combine(o, int.__mul__, "*", True)

    def __neg__(self) -> "NkiScalar":
        return self._combine(0, lambda a, b: -a, "unary -")

    def _compare(self, other: Any, symbol: str) -> "NkiScalar":
        if self.dtype == dtypes.int64:
            raise NkiValidationError(f"NkiScalar {symbol}: comparisons of nl.int64 scalars are rejected at compile "
                                     f"time (at 64 bits only +, - and * exist: nki.isa.NkiScalar page) "
                                     f"({kernel_location()})")
        result = self._combine(other, lambda a, b: 0, symbol)
        result.is_comparison = True
        return result

    __lt__ = lambda self, o: self._compare(o, "<")
    __le__ = lambda self, o: self._compare(o, "<=")
    __gt__ = lambda self, o: self._compare(o, ">")
    __ge__ = lambda self, o: self._compare(o, ">=")
    __eq__ = lambda self, o: self._compare(o, "==")
    __ne__ = lambda self, o: self._compare(o, "!=")
    __hash__ = object.__hash__

    def _device_only(self, *_: Any) -> NoReturn:
        raise NkiValidationError(
            "an NkiScalar's value exists only on device; it cannot be a Python condition, int(), range() or an "
            "index. Use it as an nl.fori_loop bound, an access pattern scalar_offset, or store it with "
            f"nisa.scalar_store ({kernel_location()})")

    __bool__ = __int__ = __index__ = __float__ = _device_only

    def scalar_offset_value(self) -> int:
        """The value an access pattern's scalar_offset reads (views.py)."""
        return integer_value_of(self, "scalar_offset")


def _scalar_tile(c: Issue, role: str, t: Any) -> NkiTensor:
    t = _memory_tensor(c, role, t, "a scalar")
    if t.size != 1:
        c.fail(f"{role} must be a 1x1 tile, got shape {t.shape}")
    if t.dtype not in _SCALAR_DTYPES:
        c.fail(f"{role} dtype {t.dtype.name}: a scalar is nl.int32 or nl.int64 (unsigned dtypes are not accepted; use "
               f"the signed dtype of the same width: nki.isa.scalar_load page)")
    return t


@instruction("SCALAR_LOAD", engines=(SYNC,), cost=costs.per_element_cycles, color="#8c8c8c")
def scalar_load(src: NkiTensor) -> NkiScalar:
    """An NkiScalar holding the one int32 or int64 element of src (SBUF or HBM), of src's dtype."""
    c = Issue("scalar_load", None)
    src = _scalar_tile(c, "src", src)
    c.record(SYNC, [("src", src)], [], {"dtype": src.dtype.name}, epp=1)
    c.race_check([src], [])
    return NkiScalar(int(src.arr.reshape(-1)[0]) if c.prog.compute else _FROM_MEMORY_IN_DRY_RUN, src.dtype)


@instruction("SCALAR_STORE", engines=(SYNC,), cost=costs.per_element_cycles, color="#c4c4c4")
def scalar_store(dst: NkiTensor, value: NkiScalar) -> None:
    """dst (a 1x1 tile of the scalar's dtype, SBUF or HBM) = the scalar's value."""
    c = Issue("scalar_store", None)
    dst = _scalar_tile(c, "dst", dst)
    if not isinstance(value, NkiScalar):
        c.fail(f"value must be an NkiScalar, got {type(value).__name__} {value!r}; write a compile-time constant "
               f"into a tile with nisa.memset")
    if value.dtype != dst.dtype:
        c.fail(f"dst dtype {dst.dtype.name} for an {value.dtype.name} scalar; scalar_store writes a scalar into a 1x1 "
               f"tile of its own width (nki.isa.scalar_store page)")
    stored = value_of(value, "scalar_store")
    c.record(SYNC, [], [("dst", dst)], {"dtype": dst.dtype.name}, epp=1)
    race = c.race_check([], [dst])
    if c.prog.compute:
        dst.arr.reshape(-1)[0] = stored
    race()


__all__ = ["VirtualRegister", "register_alloc", "register_move", "register_load", "register_store", "value_of",
           "integer_value_of", "dynamic_range", "fori_loop", "while_loop", "NkiScalar", "scalar_load",
           "scalar_store"]
