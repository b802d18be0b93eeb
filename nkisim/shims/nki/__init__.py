"""Import shim: `import nki`, `import nki.isa as nisa`, `import nki.language as nl` resolve to the
emulator after `nkisim.install()` when the Neuron SDK is absent.

`nki.isa` and `nki.language` are registered as aliases of the emulator modules themselves (not
star-import copies), so `nisa.engine is nkisim.emulator.isa.engine` and module-level state is shared.
"""
import sys
import types

from nkisim.emulator import compiler as _compiler, coverage, isa, language, typing
from nkisim.emulator.kernel import Kernel, jit, simulate

dtype = language.DType          # `nki.dtype`, the type of nl.float32 & co. (used in annotations)
collectives = types.ModuleType(__name__ + ".collectives", "nki.collectives: multi-rank collectives (not emulated)")
collectives.__getattr__ = coverage.stand_in("nki.collectives")
# `nki.compiler` (NKI 0.7): its names are served under NKI 0.7 only (rows of nki_versions.TABLE)
compiler = types.ModuleType(__name__ + ".compiler", "nki.compiler: per-kernel configuration for nki.jit (NKI 0.7)")
compiler.__getattr__ = coverage.stand_in("nki.compiler", {name: getattr(_compiler, name) for name in _compiler.__all__})
# `nki.isa.constants`: nki-library imports the nisa enums from there
constants = types.ModuleType(__name__ + ".isa.constants", "the nki.isa enums")
for _enum in ("engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode", "dma_engine", "nc_version"):
    setattr(constants, _enum, getattr(isa, _enum))

isa.constants = constants
sys.modules[__name__ + ".isa"] = isa
sys.modules[__name__ + ".isa.constants"] = constants
sys.modules[__name__ + ".language"] = language
sys.modules[__name__ + ".typing"] = typing
sys.modules[__name__ + ".collectives"] = collectives
sys.modules[__name__ + ".compiler"] = compiler

__nkisim__ = True  # marks this package as the emulator's shim, not the real SDK
__all__ = ["Kernel", "jit", "simulate", "isa", "language", "typing", "collectives", "compiler", "dtype"]
