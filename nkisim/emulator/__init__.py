"""nkisim.emulator: a strict CPU emulator of NKI 0.7 (0.6 on request: `nki_versions`) for trn2.

Modules, lowest first: `errors` (NkiValidationError, kernel source locations), `trace` (the
instruction trace schema), `dtypes` (NKI dtypes, numpy storage <-> torch math, rounding),
`tensor` (buffers, storages, NkiTensor views), `ops` (operator and activation identifiers and their
math), `cores` (per-core state of a running launch, SBUF live ranges), `allocation` (spill or fail
over the usable SBUF), `enums` and `issue` (what
every instruction shares: nisa enums, operand validation, the trace record), `isa` (nki.isa),
`language` (nki.language), `kernel` (nki.jit, launches, arguments), `runner` (`run`, and foreign
SDK kernels).
"""
from . import isa, language  # noqa: F401  (registers the instructions in nkisim.vocabulary)
from .cores import last_trace
from .errors import (NkiArgumentError, NkiDeprecationWarning, NkiInvalidOutputWarning, NkiRaceWarning, NkiSpillWarning,
                     NkiValidationError, NkiWarning)
from .kernel import Kernel, Run, jit, simulate
from .runner import run
from .trace import Instruction, Trace

__all__ = ["NkiValidationError", "NkiArgumentError", "NkiWarning", "NkiRaceWarning", "NkiInvalidOutputWarning",
           "NkiSpillWarning", "NkiDeprecationWarning", "Kernel", "Run", "jit", "last_trace", "run", "simulate",
           "Instruction", "Trace"]
