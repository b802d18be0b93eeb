"""`nisa.NkiInstruction`: the handle an `nki.isa` call returns, and `depends_on`, a dependency the
kernel adds between two of its instructions.

NKI 0.6 (SDK 2.32, `nki/api/nki/isa/__init__.py`, NkiInstruction): `c.depends_on(b, a)` makes c run after
each producer completes. It "lowers to a hardware semaphore wait" and, being fixed at compile time, "both
instructions must sit at the same dynamic-loop nesting (or the producer in an enclosing scope)".
NKI 0.7 (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.NkiInstruction.html)
adds `kind=`: `dependency.runtime` is that semaphore wait; `dependency.schedule` orders the two for the
compiler's schedulers with no synchronisation ("It constrains instruction issue order; instructions on
different engines may still overlap"); leaving `kind` out keeps the runtime behaviour and is deprecated.

nkisim executes in program order, so a dependency changes no value. The trace carries it to the cost
model: a runtime one as an order edge (`Trace.order_edges`: the consumer starts once the producer has
ended, a semaphore later on another engine), a schedule one as an issue edge (`Trace.issue_edges`: the
consumer starts no earlier than the producer starts). The dynamic-loop rule is checked when the dependency
is added: NKI 0.6's page applies it to every dependency, NKI 0.7's to a runtime one only (its semaphore "fires
unconditionally"; a schedule one emits no synchronisation), so a schedule dependency may leave a dynamic
loop. nkisim runs a dynamic loop's body once per iteration, where the device runs one traced body: a
producer from an earlier iteration is refused whatever the kind, as no traced kernel can name one.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

from . import nki_versions
from .cores import current
from .enums import dependency
from .errors import ABSENT, NkiArgumentError, NkiValidationError, kernel_location, reject_keywords

if TYPE_CHECKING:
    from .cores import Program
    from .trace import Instruction

API = "NkiInstruction.depends_on"


class NkiInstruction:
    """What an `nki.isa` call returns: a handle to the instruction it traced."""

    def __init__(self, instruction: "Instruction", program: "Program") -> None:
        self.instruction = instruction
        self._program = program
        self._iterations = program.loop_iterations     # the dynamic-loop iterations it was issued in

    def depends_on(self, *producers: "NkiInstruction", kind: Any = ABSENT) -> "NkiInstruction":
        """Run this instruction after each producer (see the module docstring); returns self."""
        if not nki_versions.applies("depends-on-kind"):
            reject_keywords(API, nki_versions.release(), kind=kind)
        elif kind is not ABSENT and kind is not None and not isinstance(kind, dependency):
            raise NkiArgumentError(f"{API}: kind must be nki.isa.dependency.runtime or nki.isa.dependency.schedule, "
                                   f"got {type(kind).__name__} {kind!r} ({kernel_location()})")
        program = current(API)
        if self._program is not program:
            raise NkiValidationError(f"{API}: the consumer ({_label(self)}) was issued by another launch or core; a "
                                     f"dependency joins two instructions of the running kernel on one core "
                                     f"({kernel_location()})")
        for position, producer in enumerate(producers, 1):
            self._check_producer(position, producer, program, kind)
        if program.check_only:       # a body run only to check it: its instructions are not in the trace
            return self
        trace = program.launch.trace
        edges = [(program.id, self.instruction.index, p.instruction.index) for p in producers]
        if kind is dependency.schedule:
            trace.issue_edges = (*trace.issue_edges, *edges)
        else:
            trace.order_edges.extend(edges)
        return self

    def _check_producer(self, position: int, producer: Any, program: "Program", kind: Any) -> None:
        def fail(problem: str) -> NoReturn:
            raise NkiValidationError(f"{API}: producer {position} ({_label(producer)}) {problem}; the consumer is "
                                     f"{_label(self)} ({kernel_location()})")

        if not isinstance(producer, NkiInstruction):
            raise NkiArgumentError(f"{API}: producer {position} must be an NkiInstruction (what an nki.isa call "
                                   f"returns), got {type(producer).__name__} ({kernel_location()})")
        if producer._program is not program:
            fail("was issued by another launch or core; a dependency joins two instructions of the running kernel "
                 "on one core")
        if producer.instruction is self.instruction:
            fail("is the consumer itself: an instruction that waits for itself never runs")
        theirs, ours = producer._iterations, self._iterations
        if ours[:len(theirs)] == theirs:
            return      # the same dynamic-loop nesting, or the producer in an enclosing scope
        if len(theirs) > len(ours) and theirs[:len(ours)] == ours:     # out of a dynamic loop
            if kind is dependency.schedule:
                return  # no semaphore: NKI 0.7's page ties the nesting rule to runtime dependencies
            runtime = (" (a runtime dependency; a kind=nki.isa.dependency.schedule one, an issue order without a "
                       "semaphore, may leave a loop)" if nki_versions.applies("depends-on-kind") else "")
            fail("sits inside a dynamic loop (nl.fori_loop / nl.while_loop) that the consumer is outside of; the "
                 f"dependency is fixed at compile time and waits unconditionally{runtime}, so both must sit at the "
                 "same dynamic-loop nesting, or the producer in an enclosing scope")
        fail("was issued in another iteration of a dynamic loop (or in another dynamic loop); on device the "
             "loop body is traced once, so a dependency joins instructions of the same iteration, or a producer "
             "outside the loop")


def _label(handle: Any) -> str:
    if not isinstance(handle, NkiInstruction):
        return type(handle).__name__
    ins = handle.instruction
    named = f" {ins.name!r}" if ins.name else ""
    return f"nisa.{ins.isa}{named} at {ins.source}"
