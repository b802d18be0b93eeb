"""Validation errors that point at the kernel line, not at the emulator.

Every check in the emulator raises `NkiValidationError` (an `AssertionError`, like the official
simulator's assertions) whose text names the instruction, the operand, the offending value and the
limit, and ends with the kernel source location, e.g.
``tensor_tensor: data1 partition dimension 256 exceeds maximum 128 (my_kernel.py:14)``.
"""
from __future__ import annotations

import functools
import inspect
import os
import re
import sys
from types import TracebackType
from typing import Callable

# Frames from files under this directory are emulator internals; the first frame outside it is
# the kernel (or the user code that launched it).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class NkiValidationError(AssertionError):
    """A kernel broke a rule the real NKI toolchain enforces (hardware or language constraint)."""


class NkiRemovedApiError(NkiValidationError, AttributeError):
    """A name the emulated NKI release does not have: removed by it or an earlier release, or added by a
    later one (an AttributeError too, so `hasattr` stays False)."""


class NkiArgumentError(NkiValidationError, TypeError):
    """A call with arguments the API does not take: unknown keyword (NKI 0.2.0 validates keyword
    arguments: SDK:release-notes/components/nki.rst), missing or surplus arguments."""


class NkiTypeError(NkiValidationError, TypeError):
    """A value used where its type cannot be: a VirtualRegister in Python control flow (`if` / `while`) or in
    `int()` / `range()`, whose value is not known while the kernel is traced ("raises ``TypeError``": the
    VirtualRegister reference, SDK:nki/api/nki/isa/__init__.py, of the tracer front end; nkisim also raises it
    for arithmetic and comparisons on a register, and under NKI 0.6)."""


class NkiValueError(NkiValidationError, ValueError):
    """A value an API rejects with ValueError on its reference page (a tile-grid shape with a nonpositive entry or
    too few tile dims: the nki.language.alloc_tiles page's "Raises")."""


class NkiGridIndexError(NkiValidationError, IndexError):
    """A tile-grid coordinate out of range (an IndexError too, so `for tile in grid` stops at the end)."""


class NkiWarning(UserWarning):
    """Legal on the real toolchain, but the result is not what the kernel probably meant."""


class NkiDeprecationWarning(FutureWarning):
    """The emulated NKI version deprecates this construct, and its toolchain warns (shown by default, as a
    FutureWarning is: it is meant for the kernel's author)."""


class NkiRaceWarning(NkiWarning):
    """With LNC=2 both programs wrote the same shared HBM elements (with equal values)."""


class NkiInvalidOutputWarning(NkiWarning):
    """An instruction's input is outside the documented valid range: the hardware output is invalid."""


class NkiSpillWarning(NkiWarning):
    """The program's live SBUF allocations exceed the usable SBUF: the compiler would spill some to HBM
    (slower, extra DMA traffic) rather than fail (nkisim/README.md, "SBUF allocation model")."""


class _Absent:
    """The default of a keyword that only some NKI versions have: tells 'not passed' from any value."""

    def __repr__(self) -> str:
        return "<not passed>"


ABSENT = _Absent()


def reject_keywords(api: str, release: str, **given: object) -> None:
    """Raise `NkiArgumentError` for the first of `given` that was passed (not ABSENT): a keyword the
    emulated NKI `release` does not have, reported as Python reports an unknown keyword."""
    for key, value in given.items():
        if value is not ABSENT:
            raise NkiArgumentError(f"{api}: got an unexpected keyword argument '{key}' (NKI {release} has no such "
                                   f"parameter; NKI 0.7 adds it) ({kernel_location()})")


def _is_internal(filename: str) -> bool:
    return filename.startswith(PACKAGE_DIR)


def kernel_location() -> str:
    """'file.py:LINE' of the innermost caller frame that is not emulator code."""
    frame = sys._getframe(1)
    while frame is not None and _is_internal(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return "<unknown>:0"
    return f"{_basename(frame.f_code.co_filename)}:{frame.f_lineno}"


@functools.cache
def _basename(filename: str) -> str:
    return os.path.basename(filename)


_BINDING = re.compile(r"^(\w+)\(\) (got an unexpected keyword argument .*|missing \d+ required .*|takes .*"
                      r"positional argument.*|got multiple values for argument .*|got some positional-only .*)$")
# Python exceptions a user mistake can raise inside the emulator where no rule checks it first.
_RAW = (TypeError, ValueError, IndexError, KeyError, AttributeError, ZeroDivisionError, OverflowError)


def user_error(err: BaseException, api_of: Callable[[str], tuple[str, Callable] | None]) -> NkiValidationError | None:
    """The NKI error for a raw Python exception a kernel caused, or None if it is not one.

    - A call of an NKI API with arguments it does not take raises Python's binding TypeError in the
      kernel's own frame: it becomes `NkiArgumentError` naming the API, its parameters and the line.
    - Any other raw exception from inside nkisim is a user mistake no rule caught: it becomes an
      `NkiValidationError` naming the API that raised it and the kernel line that called it.
    `api_of(name)` gives the public name ("nisa.activation") and the function of an NKI API, or None."""
    if isinstance(err, NkiValidationError) or not isinstance(err, _RAW):
        return None
    frames = []
    tb = err.__traceback__
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    user = [f for f in frames if not _is_internal(f.tb_frame.f_code.co_filename)]
    if not user:
        return None
    where = f"{_basename(user[-1].tb_frame.f_code.co_filename)}:{user[-1].tb_lineno}"
    binding = _BINDING.match(str(err)) if isinstance(err, TypeError) else None
    if binding and frames[-1] is user[-1] and api_of(binding.group(1)):
        api, fn = api_of(binding.group(1))
        return NkiArgumentError(f"{api}: {binding.group(2)} (its parameters: {_parameters(fn)}) ({where})")
    if frames[-1] is user[-1]:
        return None                  # raised by the kernel's own Python code, not by nkisim
    inner = frames[frames.index(user[-1]) + 1].tb_frame.f_code.co_name
    api = (api_of(inner) or (inner,))[0]
    return NkiValidationError(
        f"{api}: invalid argument, {type(err).__name__}: {err} (no specific nkisim rule covers this input) ({where})")


def _parameters(fn: Callable) -> str:
    try:
        return ", ".join(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return "see its documentation"


def strip_internal_frames(tb: TracebackType | None) -> TracebackType | None:
    """The same traceback without emulator frames, so the kernel line is what the user sees."""
    return strip_frames_under(tb, PACKAGE_DIR)


def strip_frames_under(tb: TracebackType | None, directory: str) -> TracebackType | None:
    """The same traceback without the frames of files under `directory` (ending in a separator)."""
    kept = []
    while tb is not None:
        if not tb.tb_frame.f_code.co_filename.startswith(directory):
            kept.append(tb)
        tb = tb.tb_next
    for outer, inner in zip(kept, kept[1:]):
        outer.tb_next = inner
    if kept:
        kept[-1].tb_next = None
        return kept[0]
    return None
