"""NKI's compile cache, modelled: a launch that trn2 would serve from a stale compiled kernel fails.

NKI caches compiled kernels by their input arguments (shapes, dtypes and compile-time values), so a
kernel must be a pure function of its arguments: if it depends on global variables or closures over
mutable objects, the cache may return a stale compiled kernel and produce incorrect results
(SDK: nki/get-started/nki-language-guide.rst, "Kernel Caching"). The compiler does not reject such
a read, and neither does nkisim; but nkisim runs the kernel's Python at every launch, so it would
quietly use the new value where trn2 runs the old one.

So nkisim keeps, per kernel function and cache key, a fingerprint of every global and closure
variable holding data that the kernel's code (or a helper it reaches) reads, taken when that key
was first launched (compiled). A later launch with the same key raises `NkiValidationError` if such
a variable changed (mutated in place or rebound) and does not hold its compiled value again. A
launch with a new key is a new compilation: it sees the new value and passes.

Only changes made between launches count. A change a launch makes itself (a helper memoising into
a global dict) happens on trn2 too, while the kernel is compiled; each variable's fingerprint after
the last launch that read it tells the two apart. A value that can be neither pickled nor repr'd has
no fingerprint and is not tracked. The analysis is static: a variable read only on a branch this
specialisation does not take is tracked too.
"""
from __future__ import annotations

import contextlib
import hashlib
import inspect
import pickle
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .errors import NkiValidationError
from .frontend import MISSING, PURITY_PAGE, ExternalRead
from .tensor import NkiTensor


class _Variable:
    """What nkisim knows of one global or closure variable. It keeps the variable's holder (globals
    dict or cell), so the id in its identity cannot be reused while it is known."""

    def __init__(self, holder: Any, fingerprint: bytes | None) -> None:
        self.holder = holder
        self.after_last_launch = fingerprint
        self.outside_changes = 0        # changes made between launches (by the host program)


@dataclass(frozen=True)
class _Compiled:
    """A variable's state when a cache key was compiled."""

    outside_changes: int
    fingerprint: bytes | None


# variable identity -> its record, dropped with the last kernel that reads it (so is a closure cell)
_variables: "weakref.WeakValueDictionary[tuple[int, str], _Variable]" = weakref.WeakValueDictionary()
_kept: "weakref.WeakKeyDictionary[Callable, list[_Variable]]" = weakref.WeakKeyDictionary()
# kernel function -> cache key -> variable identity -> its state when the key was compiled
_compiled: "weakref.WeakKeyDictionary[Callable, dict[tuple, dict[tuple[int, str], _Compiled]]]" = \
    weakref.WeakKeyDictionary()
_signatures: "weakref.WeakKeyDictionary[Callable, inspect.Signature]" = weakref.WeakKeyDictionary()


def fingerprint(value: Any) -> bytes | None:
    """A digest of the value's state: its pickle, else its repr, else None (not tracked)."""
    if value is MISSING:
        return b"<deleted>"
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:                       # unpicklable (e.g. holds a lambda): its repr still shows most edits
        try:
            data = repr(value).encode()
        except Exception:
            return None
    return hashlib.blake2b(data, digest_size=16).digest()


def cache_key(fn: Callable, args: tuple, kwargs: dict, lnc: int) -> tuple:
    """What the compile cache is keyed by: each parameter's shape and dtype (tensors) or value
    (compile-time constants, with its type: 1 and 1.0 compile differently), and the LNC."""
    signature = _signatures.get(fn)
    if signature is None:
        signature = _signatures[fn] = inspect.signature(fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return (lnc,) + tuple((name, _spec(value)) for name, value in bound.arguments.items())


def _spec(value: Any) -> Any:
    if isinstance(value, NkiTensor):
        return "tensor", tuple(value.shape), str(value.dtype)
    if isinstance(value, tuple):
        return tuple(_spec(v) for v in value)
    try:
        hash(value)
        return type(value).__qualname__, value
    except TypeError:
        return type(value).__qualname__, repr(value)


def describe_key(key: tuple) -> str:
    """'x: float32[128, 8], scale: 2.0' for an error message."""
    def one(spec: Any) -> str:
        if isinstance(spec, tuple) and len(spec) == 3 and spec[0] == "tensor":
            return f"{spec[2]}[{', '.join(map(str, spec[1]))}]"
        if isinstance(spec, tuple) and len(spec) == 2 and isinstance(spec[0], str):
            return repr(spec[1])
        return "(" + ", ".join(one(s) for s in spec) + ")"
    return ", ".join(f"{name}: {one(spec)}" for name, spec in key[1:]) + f"; LNC={key[0]}"


@contextlib.contextmanager
def launching(fn: Callable, key: tuple, reads: tuple[ExternalRead, ...]) -> Iterator[None]:
    """Around one launch of `fn` with cache key `key`: raise if a variable it reads changed since `key`
    was compiled; record the compiled state if the launch succeeds (a failed compile is not cached)."""
    variables = [(read, _observe(fn, read)) for read in reads]
    compiled = _compiled.setdefault(fn, {})
    at_start = {read.identity: _Compiled(var.outside_changes, var.after_last_launch) for read, var in variables}
    try:
        if key in compiled:
            _check_unchanged(fn, key, compiled[key], variables)
        yield
        compiled.setdefault(key, at_start)
    finally:
        for read, var in variables:
            var.after_last_launch = fingerprint(read.value())


def _observe(fn: Callable, read: ExternalRead) -> _Variable:
    """The variable's record, counting a change made since the last launch that read it."""
    now = fingerprint(read.value())
    var = _variables.get(read.identity)
    if var is None:
        var = _variables[read.identity] = _Variable(read.holder, now)
    kept = _kept.setdefault(fn, [])
    if var not in kept:
        kept.append(var)
    if now != var.after_last_launch:
        var.outside_changes += 1
        var.after_last_launch = now
    return var


def _check_unchanged(fn: Callable, key: tuple, compiled: dict, variables: list) -> None:
    for read, var in variables:
        then = compiled.get(read.identity)
        if then is None or then.fingerprint is None or var.after_last_launch is None:
            continue          # read since the compile only, or not tracked
        if then.outside_changes != var.outside_changes and var.after_last_launch != then.fingerprint:
            value = read.value()
            what = "now deleted" if value is MISSING else f"a {type(value).__name__}"
            raise NkiValidationError(
                f"NKI kernel caching: kernel '{fn.__name__}' reads {read.kind} '{read.name}' ({what}), which "
                f"changed since this kernel was compiled for the same arguments ({describe_key(key)}); on trn2 the "
                f"cached compiled kernel would run with the old value of '{read.name}' (NKI caches compiled "
                f"kernels by their input arguments' shapes, dtypes and compile-time values, so a kernel must be a "
                f"pure function of its arguments; {PURITY_PAGE}): pass '{read.name}' as a kernel argument, or "
                f"make it a constant (a tuple) that does not change ({read.where})")
