"""The `nki.isa` enums (engine, dge_mode, oob_mode, reduce_cmd, nc_version, and NKI 0.7's dependency) and the engine aliases (`nisa.vector_engine`, ...), shared by every
instruction module. Member names match the `nkisim.vocabulary` tables (a test keeps them so)."""
from __future__ import annotations

import enum
import functools


class NkiEnum(enum.Enum):
    def __repr__(self) -> str:
        return f"nisa.{type(self).__name__}.{self.name}"

    __str__ = __repr__


class engine(NkiEnum):
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


class dge_mode(NkiEnum):
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(NkiEnum):
    error = 0
    skip = 1


class dependency(NkiEnum):
    """What `NkiInstruction.depends_on(..., kind=)` adds (NKI 0.7): a hardware semaphore wait (runtime)
    or an order for the compiler's schedulers only (schedule)."""

    runtime = 1
    schedule = 2


class reduce_cmd(NkiEnum):
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


@functools.total_ordering
class nc_version(NkiEnum):
    """Ordered by generation, the members' values (gen2 Trn1/Inf2, gen3 Trn2, gen4 Trn3:
    SDK:nki/api/nki/isa/__init__.py, nc_version), so that `nisa.get_nc_version() >= nisa.nc_version.gen3`
    works: nki-library's kernels (attention, qkv, mlp, moe) branch on it so."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, nc_version):
            return NotImplemented
        return self.value < other.value


# module-level engine aliases (nki.isa reference: tensor_engine, vector_engine, ...)
tensor_engine, vector_engine, scalar_engine = engine.tensor, engine.vector, engine.scalar
gpsimd_engine, unknown_engine = engine.gpsimd, engine.unknown


def get_nc_version() -> nc_version:
    """The emulated target: trn2 = NeuronCore-v3 = gen3."""
    return nc_version.gen3
