"""`gc_paused()`: no cyclic garbage collection while a block builds many objects that stay alive.

A launch records an Instruction, its Operands and Regions per instruction, and the scheduler a
task, its dependency list and a slot per instruction: millions of objects at the published
matmul shapes, all alive until the trace or schedule is dropped, and none in a reference cycle.
The cyclic collector would rescan them each time enough new objects accumulate (with 100k
instructions, half of a dry run's time); reference counting still frees everything that dies.
Collection resumes when the outermost block ends.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator


@contextmanager
def gc_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
