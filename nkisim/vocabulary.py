"""The instruction-set vocabulary shared by the emulator, the cost model and the profile views.

One table of names: engines, DMA queues and descriptor-generation (dge) modes, and the registry
of instructions. Registering an instruction (the `instruction` decorator on its `nki.isa`
implementation) gives it, in one place:
  * its profiler opcode and the engines it may run on (the emulator's trace record),
  * its cost rule (engine cycles of one traced instruction, used by the trn2 cost model),
  * its timeline colour (used by the profile views),
  * for an instruction between the programs of an LNC=2 launch, its kind of synchronisation
    (`BARRIER` or `EXCHANGE`), which the cost model's scheduler turns into cross-core waits.
See CONTRIBUTING.md, "Adding an instruction".

Engine and queue names are spelled as Neuron Explorer spells them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, TypeVar

# --- engines ------------------------------------------------------------------------------------
TENSOR, VECTOR, SCALAR, GPSIMD, SYNC = "Tensor", "Vector", "Scalar", "GpSimd", "Sync"
ENGINES = (TENSOR, VECTOR, SCALAR, GPSIMD, SYNC)       # compute engines of a NeuronCore-v3
DMA = "DMA"                                           # the engine field of a data-movement instruction
LANES = (*ENGINES, DMA)                               # the lanes a profile summary reports
ENGINE_BY_NISA_NAME = {"tensor": TENSOR, "vector": VECTOR, "scalar": SCALAR, "gpsimd": GPSIMD, "sync": SYNC}

# --- DMA queues and descriptor generation ------------------------------------------------------
NO_QUEUE = "none"       # dge_mode.none: descriptors are built before the kernel runs, no issuing queue
DMA_QUEUE_LANES = {GPSIMD: "DMA/GpSimd", SYNC: "DMA/Sync", SCALAR: "DMA/Scalar", NO_QUEUE: "DMA/static"}


@dataclass(frozen=True)
class DgeMode:
    """A `nisa.dge_mode` member and the queues that may issue its descriptors (the default first)."""

    name: str
    queues: tuple[str, ...]


DGE_MODES = {m.name: m for m in (
    DgeMode("unknown", (GPSIMD,)),          # the compiler's default on these kernels: software DGE
    DgeMode("swdge", (GPSIMD,)),            # software DGE runs on GpSimd
    DgeMode("hwdge", (SYNC, SCALAR)),       # hardware DGE, triggered from Sync or Scalar
    DgeMode("none", (NO_QUEUE,)),
)}


def dma_queue(dge_mode: str, engine: str | None = None) -> str:
    """The queue that issues a DMA with `dge_mode`, triggered from `engine` (None: the mode's default)."""
    mode = DGE_MODES.get(dge_mode)
    if mode is None:
        raise ValueError(f"unknown dge_mode {dge_mode!r}; expected one of {sorted(DGE_MODES)}")
    if engine is None:
        return mode.queues[0]
    if engine not in mode.queues:
        raise ValueError(f"{dge_mode} DMAs are issued from the {' or '.join(mode.queues)} queue, not {engine!r}")
    return engine


def dma_lane(queue: str) -> str:
    """The timeline lane of the transfers a queue issues ("DMA/GpSimd", ..., "DMA/static")."""
    return DMA_QUEUE_LANES.get(queue, f"DMA/{queue}")


# trn2's two hardware DGE instances, one commanded by Scalar's sequencer and one by Sync's, apart from
# the engines' compute pipelines (SDK:nki/guides/architecture/trainium2_arch.rst, "Descriptor Generation
# Engine (DGE)", its figure and Performance Consideration; SDK:nki/deep-dives/nki-dge.rst, hwdge: "Let
# Scalar Engine trigger DGE (can overlap with earlier compute)"); software DGE is GpSimd's own work
HARDWARE_DGE_LANES = {SCALAR: "DGE/Scalar", SYNC: "DGE/Sync"}


def dge_lane(dge_mode: str, queue: str) -> str:
    """The timeline lane where a DMA's descriptors are generated: a hardware DGE instance, or the queue's engine."""
    return HARDWARE_DGE_LANES[queue] if dge_mode == "hwdge" else queue


# --- the instruction registry ---------------------------------------------------------------------
# Synchronisations between the programs of an LNC=2 launch (the `collective` of a registration):
BARRIER = "barrier"      # the k-th one of each participating program completes when all reached theirs
EXCHANGE = "exchange"    # sends its src to one program and receives another's message into dst
COLLECTIVES = (BARRIER, EXCHANGE)

@dataclass(frozen=True)
class InstructionSpec:
    """Everything the emulator, the cost model and the views need to know about one instruction."""

    isa: str                                  # the nki.isa function (the trace's Instruction.isa)
    opcode: str                               # profiler opcode (Instruction.opcode)
    engines: tuple[str, ...]                  # engines it may run on, the default first; (DMA,) for DMA
    cost: Callable[[Any], float] | None       # engine cycles of one traced Instruction; None for DMA
    color: str                                # timeline colour of its opcode
    collective: str | None = None             # BARRIER / EXCHANGE between LNC programs; None otherwise


_SPECS: dict[str, InstructionSpec] = {}
# Pseudo-opcodes the cost model places on timelines besides instructions.
DGE, BARRIER_WAIT, RECEIVE = "DGE", "BARRIER_WAIT", "RECEIVE"
_PSEUDO_COLORS = {
    DGE: "#b0b0b0",            # a DMA's descriptor generation on its issuing queue
    BARRIER_WAIT: "#e0e0e0",   # an engine blocked at a core_barrier until every participant reached it
    RECEIVE: "#a2c4c9",        # the moment an exchange's incoming data has landed in dst (no duration)
}
PSEUDO_OPCODES = tuple(_PSEUDO_COLORS)       # timeline entries that are not instructions
IDLE_OPCODES = (BARRIER_WAIT, RECEIVE)       # ... of those, the ones in which no engine works
F = TypeVar("F", bound=Callable)


def register(spec: InstructionSpec) -> InstructionSpec:
    """Add one instruction to the table; names and colours must agree with what is there."""
    if spec.isa in _SPECS:
        raise ValueError(f"instruction {spec.isa!r} is already registered")
    unknown = [e for e in spec.engines if e not in LANES]
    if not spec.engines or unknown:
        raise ValueError(f"instruction {spec.isa!r}: engines {spec.engines!r} must be among {LANES}")
    if (spec.cost is None) != (spec.engines == (DMA,)):
        raise ValueError(f"instruction {spec.isa!r}: a compute instruction needs a cost rule; DMA has none")
    if spec.collective not in (None, *COLLECTIVES):
        raise ValueError(f"instruction {spec.isa!r}: collective {spec.collective!r} must be None or one of "
                         f"{COLLECTIVES}")
    if spec.collective == EXCHANGE and spec.engines != (DMA,):
        raise ValueError(f"instruction {spec.isa!r}: an exchange moves data, so it runs on (DMA,), not "
                         f"{spec.engines!r}")
    clash = opcode_color(spec.opcode)
    if clash is not None and clash != spec.color:
        raise ValueError(f"instruction {spec.isa!r}: opcode {spec.opcode} is already drawn in {clash}, "
                         f"not {spec.color}")
    _SPECS[spec.isa] = spec
    return spec


def instruction(opcode: str, engines: tuple[str, ...], cost: Callable[[Any], float] | None,
                color: str, collective: str | None = None) -> Callable[[F], F]:
    """Decorator for an `nki.isa` implementation: registers it under its function name."""

    def decorate(fn: F) -> F:
        register(InstructionSpec(fn.__name__, opcode, tuple(engines), cost, color, collective))
        return fn

    return decorate


def unregister(isa: str) -> None:
    """Remove an instruction from the table (tests and experiments that register a temporary one)."""
    spec(isa)
    del _SPECS[isa]


def spec(isa: str) -> InstructionSpec:
    """The registered instruction `isa` (a clear error if nothing registered it)."""
    found = _SPECS.get(isa)
    if found is None:
        raise ValueError(f"instruction {isa!r} is not registered in nkisim.vocabulary "
                         f"(see CONTRIBUTING.md, 'Adding an instruction'); registered: {sorted(_SPECS)}")
    return found


def registered() -> dict[str, InstructionSpec]:
    """A copy of the table, by nki.isa name."""
    return dict(_SPECS)


def opcode_color(opcode: str) -> str | None:
    """Timeline colour of an opcode (or of a pseudo-opcode such as "DGE"); None if unknown."""
    if opcode in _PSEUDO_COLORS:
        return _PSEUDO_COLORS[opcode]
    return next((s.color for s in _SPECS.values() if s.opcode == opcode), None)
