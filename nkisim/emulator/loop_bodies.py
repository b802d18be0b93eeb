"""A dynamic loop's body is one copy on device: every iteration must issue the same instructions.

`nl.fori_loop` and `nl.while_loop` (and NKI 0.6's `nl.dynamic_range`) are compiled loops: the kernel's
Python builds the body once and the hardware runs that one copy each iteration ("a single copy of the
body is generated and the hardware iterates over it at runtime", the dynamic-loops deep dive; "carry any
other loop state through SBUF/HBM", the v2.33.0 nki.language.fori_loop page). nkisim runs the body's
Python once per iteration, so a body whose instructions depend on Python state that changes between
iterations (a counter, a flag that swaps two buffers, a list it appends to) would compute something no
device runs. `LoopBody` records what each iteration issues and refuses an iteration that differs from
the first (every iteration of the first `CHECK_ALL`, then every `CHECK_EVERY`-th): the same instructions
(isa, engine, kernel line, the plain values among the call's arguments: immediates, ops, flags) on the
same operands (tensors made before the loop by identity, tensors the body makes by their allocation line;
views by shape, dtype and static offset and strides; a runtime-indexed view by its static part, before
its index is read). A nested dynamic loop counts as one step of its parent's body (its trip count may
depend on the parent's index); it checks its own iterations.

At LNC=2 the two cores must also run the same dynamic control flow: "the Neuron SDK assumes that when
running a kernel on multiple cores, the program on each core is 'the same' ... if you use dynamic control
flow, and this control-flow is different on the different cores, then the behavior is undefined, and you
will likely receive an error at runtime" (the 2.32 LNC page, nki/get-started/about/lnc). Each program
records the trip count of every compiled loop whose bounds are runtime values (`Program.dynamic_trips`);
`divergent_control_flow` names the first loop the two cores ran a different number of times (nkisim warns:
the page says "likely", not always).
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

from .errors import NkiValidationError
from .tensor import NkiTensor

CHECK_ALL, CHECK_EVERY = 8, 8
_BODYS = "made in the body"            # a tensor the running iteration allocated: known by its allocation line


class LoopBody:
    """One dynamic loop's iterations, as instruction signatures."""

    def __init__(self, api: str, where: str) -> None:
        self.api, self.where = api, where
        self.first: list[tuple] | None = None
        self.current: list[tuple] = []
        self.made: set[int] = set()     # the storages the running iteration allocated (cores.Program.allocate)
        self.own: list = []             # those of them no inner body function made: they end with this call
        self.iteration = 0
        self.checking = True
        self.inferred: dict[tuple[str, int], Any] = {}   # choices the compiler makes once for the one copy, at iteration 0
        self.calls: dict[str, int] = {}                  # this iteration's calls so far, per kernel line

    def start_iteration(self) -> None:
        self.current = []
        self.made = set()
        self.own = []
        self.calls = {}
        # every iteration up to CHECK_ALL, then every CHECK_EVERY-th: a body that changes with Python state shows
        # it at once (a swap, a counter) or at a chosen iteration, and a long loop need not pay for every one
        self.checking = self.iteration < CHECK_ALL or self.iteration % CHECK_EVERY == 0

    def note(self, isa: str, lane: str, where: str, reads: list, writes: list, arguments: dict) -> None:
        """One instruction: its operands and the plain values among its call's arguments (immediates, ops)."""
        operands = tuple((role, self._operand(t)) for role, t in (*reads, *writes))
        immediates = tuple((k, _plain(v)) for k, v in arguments.items()
                           if k != "name" and not isinstance(v, NkiTensor))
        self.current.append((f"nisa.{isa} on {lane}", where, operands, immediates))

    def inferred_once(self, where: str, value: Any) -> Any:
        """What iteration 0 chose for this call (the k-th at kernel line `where` in the iteration) where the
        compiler decides at compile time (nc_matmul's accumulate=None): the body's one copy has one choice."""
        k = self.calls.get(where, 0)
        self.calls[where] = k + 1
        return self.inferred.setdefault((where, k), value)

    def note_loop(self, api: str, where: str) -> None:
        if self.checking:
            self.current.append((api, where, (), ()))

    def end_iteration(self) -> None:
        """Compare the finished iteration with the first; raise at the first difference."""
        if self.first is None:
            self.first = self.current
        elif self.checking and self.current != self.first:
            self._refuse()
        self.iteration += 1

    def _operand(self, t: Any) -> tuple:
        if not isinstance(t, NkiTensor):
            return (type(t).__name__,)
        st = t.storage
        who = _BODYS if st.id in self.made else st.id
        ind = t.indirection
        if ind is not None:
            index = self._operand(ind.index) if isinstance(ind.index, NkiTensor) else ("a runtime scalar",)
            return (who, st.source, st.buffer, t.arr.dtype, t.shape, ind.kind, index, ind.scale, ind.pattern,
                    ind.offset)
        return (who, st.source, st.buffer, t.arr.dtype, t.shape, t.byte_offset, t.arr.strides)

    def _refuse(self) -> None:
        first, now = self.first, self.current
        k = next((k for k, (a, b) in enumerate(zip(first, now)) if a != b), min(len(first), len(now)))
        if k < len(first) and k < len(now) and first[k][:3] == now[k][:3]:    # the same operands: an argument differs
            was = dict(first[k][3])
            args = ", ".join(f"{name}={value} (iteration 0: {was.get(name)})" for name, value in now[k][3]
                             if was.get(name) != value)
            what = f"its step {k + 1}, {_describe(now[k])}, takes {args}"
        elif k < len(first) and k < len(now):
            what = f"its step {k + 1} is {_describe(now[k])}, where iteration 0's was {_describe(first[k])}"
        elif k < len(first):
            what = f"it issued {len(now)} steps, iteration 0 issued {len(first)} (next: {_describe(first[k])})"
        else:
            what = f"it issued {len(now)} steps, iteration 0 only {len(first)} (the extra: {_describe(now[k])})"
        raise NkiValidationError(
            f"{self.api} ({self.where}): iteration {self.iteration} of the body differs from iteration 0: {what}. "
            f"On device the body is one copy that the hardware runs every iteration (its Python runs once), so it "
            f"cannot depend on Python state that changes between iterations (a counter, a flag choosing a buffer); "
            f"carry loop state through SBUF/HBM, or use a Python for loop, unrolled at trace time")


def _plain(v: Any) -> Any:
    """A call argument as the body's code has it: numbers and names by value, ops by name, runtime values
    (registers, scalars) and tensors by kind only."""
    if isinstance(v, (bool, int, float, str, type(None), enum.Enum, np.number)):
        return repr(v) if isinstance(v, (float, np.floating)) else v     # repr: a NaN immediate equals itself
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    if callable(v) and hasattr(v, "__qualname__"):
        return v.__qualname__
    return type(v).__name__


def _describe(step: tuple) -> str:
    what, where, operands, _ = step
    if not operands:
        return f"{what} ({where})"
    return f"{what} ({where}) on " + ", ".join(f"{role} {_describe_operand(op)}" for role, op in operands)


def _describe_operand(op: tuple) -> str:
    if len(op) == 1:
        return op[0]
    who, source, _, dtype, shape, at = op[:6]
    text = (f"a tensor made in the body at {source}" if who == _BODYS else f"tensor #{who} (made at {source})") + \
        f" {shape} {dtype}"
    return text + (f" from byte {at}" if isinstance(at, int) else " (runtime-indexed)")


def divergent_control_flow(trips: list[list[tuple[str, str, int]]]) -> str | None:
    """The first compiled loop with runtime bounds that the programs of one launch ran a different number of
    times, at the same place in their sequences of such loops (None if there is none)."""
    for k, runs in enumerate(zip(*trips)):
        if len({(api, where) for api, where, _ in runs}) > 1:
            return None         # the cores' loops differ by static (per-core) code from here: nothing to compare
        counts = [n for _, _, n in runs]
        if len(set(counts)) > 1:
            api, where, _ = runs[0]
            ran = ", ".join(f"core {pid}: {n}" for pid, n in enumerate(counts))
            return (f"{api} ({where}), the {_ordinal(k + 1)} compiled loop with runtime bounds, ran a different number "
                    f"of iterations on the cores of this LNC={len(trips)} launch ({ran}): the Neuron SDK assumes both "
                    f"cores run the same dynamic control flow, and different dynamic control flow is undefined "
                    f"behaviour, likely a runtime error (the LNC page); give both cores the same trip counts, e.g. "
                    f"split the work evenly and pad, or loop to the larger count and mask the rest")
    return None


def _ordinal(n: int) -> str:
    return f"{n}{'th' if 10 <= n % 100 < 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(n % 10, 'th')}"
