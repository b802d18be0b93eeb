"""Validation errors that point at the kernel line, not at the emulator.

Every check in the emulator raises `NkiValidationError` (an `AssertionError`, like the official
simulator's assertions) whose text names the instruction, the operand, the offending value and the
limit, and ends with the kernel source location, e.g.
``tensor_tensor: data1 partition dimension 256 exceeds maximum 128 (my_kernel.py:14)``.
"""
from __future__ import annotations

import functools
import os
import sys
from types import TracebackType

# Frames from files under this directory are emulator internals; the first frame outside it is
# the kernel (or the user code that launched it).
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class NkiValidationError(AssertionError):
    """A kernel broke a rule the real NKI toolchain enforces (hardware or language constraint)."""


class NkiWarning(UserWarning):
    """Legal on the real toolchain, but the result is not what the kernel probably meant."""


class NkiInvalidOutputWarning(NkiWarning):
    """An instruction's input is outside the documented valid range: the hardware output is invalid."""


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
