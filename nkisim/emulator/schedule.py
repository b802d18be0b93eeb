"""`kernel.with_schedule(edges)`: dependency edges between named instructions for the compiler's
scheduler (SDK:nki/guides/how-to-scheduling-apis.rst, "Adding dependency edges").

Each edge is a pair `(later, earlier)`: the instruction named `later` runs after the one named
`earlier` (a name or a list of names). The page says the compiler "will collect the data from the
with_schedule call, check that it makes sense"; nkisim checks the form when the edges are given and,
at each launch, that every name is the `name=` of an instruction the kernel issued. The emulator
executes instructions in program order anyway, so edges change no value; the trace records them
(`Trace.order_edges`, between every instruction so named in a program) for the cost model."""
from __future__ import annotations

from typing import Any

from .errors import NkiValidationError
from .trace import Trace

Edges = tuple[tuple[str, tuple[str, ...]], ...]


def parse_edges(kernel_name: str, edges: Any, where: str) -> Edges:
    """The edges as (later, (earlier, ...)) pairs, or an error naming the malformed entry."""
    form = "a list of pairs (name, name or list of names)"
    if not isinstance(edges, (list, tuple)):
        raise NkiValidationError(f"{kernel_name}.with_schedule: edges must be {form}, got {type(edges).__name__} "
                                 f"({where})")
    parsed = []
    for edge in edges:
        earlier = edge[1] if isinstance(edge, (list, tuple)) and len(edge) == 2 else None
        earlier = (earlier,) if isinstance(earlier, str) else earlier
        if (not isinstance(earlier, (list, tuple)) or not isinstance(edge[0], str)
                or not all(isinstance(n, str) for n in earlier)):
            raise NkiValidationError(f"{kernel_name}.with_schedule: edge {edge!r} is not {form} ({where})")
        parsed.append((edge[0], tuple(earlier)))
    return tuple(parsed)


def apply_edges(kernel_name: str, edges: Edges, trace: Trace, where: str) -> None:
    """Check that every name in `edges` names an instruction of the launch's trace, then record the
    edges in it: within each program, every instruction named `later` follows every one named `earlier`."""
    issued = {ins.name for ins in trace if ins.name is not None}
    for later, earlier in edges:
        unknown = [n for n in (later, *earlier) if n not in issued]
        if unknown:
            raise NkiValidationError(
                f"{kernel_name}.with_schedule: edge ({later!r}, {list(earlier)!r}) names {unknown[0]!r}, which no "
                f"instruction of the kernel has as its name= (named: {', '.join(sorted(issued)) or 'none'}) ({where})")
    for later, earlier in edges:
        for after in (ins for ins in trace if ins.name == later):
            trace.order_edges.extend((after.program_id, after.index, before.index) for before in trace
                                     if before.name in earlier and before.program_id == after.program_id
                                     and before is not after)
