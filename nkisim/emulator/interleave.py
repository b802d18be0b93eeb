"""Run the programs of one LNC=2 launch so that they can wait for each other.

Each program runs its kernel body in its own thread, but only one thread runs at a time: a
program keeps the turn until it finishes or must wait for the other program (a `core_barrier`
the other has not reached, a `sendrecv` message not yet sent); then the turn passes to a program
that can make progress. Without waits this is exactly the old order (program 0 to its end, then
program 1), so kernels without collectives behave and trace as before, and results never depend
on thread timing.

When no unfinished program can make progress the launch is deadlocked: instead of hanging, the
launch fails with an error naming what each program waits for, at which kernel line. LNC=1
launches do not come here (no threads, no cost).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import NkiValidationError


class _Aborted(BaseException):
    """Unwinds a waiting program's thread after another program failed (not a user error)."""


@dataclass
class _Slot:
    program: Any
    state: str = "ready"                          # ready | waiting | done
    ready: Callable[[], bool] | None = None       # what a waiting program waits for
    waits_for: str = ""                           # e.g. "nisa.core_barrier (k.py:12) for program 1"
    result: Any = None


@dataclass
class Interleaver:
    """The turn-taking of one launch's programs. `activate(program)` makes a program current."""

    activate: Callable[[Any], None]
    slots: list[_Slot] = field(default_factory=list)
    turn: int = 0
    error: BaseException | None = None
    cond: threading.Condition = field(default_factory=threading.Condition)

    def run(self, programs: list[Any], body: Callable[[Any], Any], first: int = 0) -> list[Any]:
        """Run body(program) for every program, `first` taking the first turn; return their results in
        program order."""
        self.slots = [_Slot(p) for p in programs]
        self.turn = first
        threads = [threading.Thread(target=self._main, args=(i, body), name=f"nki-program-{i}", daemon=True)
                   for i in range(len(programs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.activate(None)
        if self.error is not None:
            raise self.error
        return [s.result for s in self.slots]

    def _main(self, i: int, body: Callable[[Any], Any]) -> None:
        slot = self.slots[i]
        try:
            self._await_turn(i)
            slot.result = body(slot.program)
        except _Aborted:
            return
        except BaseException as err:        # reported by run() in the launching thread
            with self.cond:
                if self.error is None:
                    self.error = err
        with self.cond:
            slot.state = "done"
            self._pass_turn()

    def _await_turn(self, i: int) -> None:
        with self.cond:
            while self.turn != i and self.error is None:
                self.cond.wait()
            if self.error is not None:
                raise _Aborted
        self.activate(self.slots[i].program)

    def wait(self, program: Any, ready: Callable[[], bool], waits_for: str) -> None:
        """Called by the running program: return once `ready()` holds, letting others run meanwhile."""
        i = next(k for k, s in enumerate(self.slots) if s.program is program)
        with self.cond:
            if ready():
                return
            slot = self.slots[i]
            slot.state, slot.ready, slot.waits_for = "waiting", ready, waits_for
            self._pass_turn()
        self._await_turn(i)
        slot.state, slot.ready = "ready", None

    def _pass_turn(self) -> None:
        """Give the turn to the next program that can progress (lock held); detect deadlock."""
        n = len(self.slots)
        if self.error is None:
            for k in range(1, n + 1):
                j = (self.turn + k) % n
                s = self.slots[j]
                if s.state == "ready" or (s.state == "waiting" and s.ready()):
                    self.turn = j
                    self.cond.notify_all()
                    return
            if any(s.state == "waiting" for s in self.slots):
                self.error = NkiValidationError(
                    "deadlock between the LNC programs: " + "; ".join(
                        f"program {s.program.id} waits in {s.waits_for}" if s.state == "waiting"
                        else f"program {s.program.id} has ended its kernel" for s in self.slots)
                    + "; no program can continue (each collective needs the matching call on the other core)")
        self.cond.notify_all()
