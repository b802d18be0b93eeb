"""nkisim.emulator: a strict CPU emulator of NKI 0.6 for trn2.

Modules: `errors` (NkiValidationError, kernel source locations), `dtypes` (NKI dtypes, numpy
storage <-> torch math, rounding), `tensor` (buffers, storages, NkiTensor views), `ops` (operator
and activation identifiers and their math), `runtime` (jit, launches, programs, SBUF footprint,
dry run), `isa` (nki.isa), `language` (nki.language), `trace` (the instruction trace schema).
"""
from .errors import NkiValidationError
from .runtime import SBUF_USABLE_BYTES_PER_PARTITION, Kernel, Run, jit, last_trace, run, simulate
from .trace import Instruction, Trace

__all__ = ["NkiValidationError", "SBUF_USABLE_BYTES_PER_PARTITION", "Kernel", "Run", "jit", "last_trace", "run",
           "simulate", "Instruction", "Trace"]
