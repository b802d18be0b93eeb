"""Import shim: `import nki`, `import nki.isa as nisa`, `import nki.language as nl` resolve to the
emulator after `nkisim.install()` when the Neuron SDK is absent.

`nki.isa` and `nki.language` are views of the emulator modules (not star-import copies): a name is
read from the emulator module each time, so `nisa.engine is nkisim.emulator.isa.engine` and module-level
state is shared, and an assignment reaches the emulator module. A view serves the names of the API
reference (`nkisim.api_surface`) only: the emulator's own imports and helpers (`nl.np`, `nisa.costs`,
`nl.PSUM`) are not NKI's, so a kernel reaching them gets Python's AttributeError, as on the device.
"""
import sys as _sys
import types as _types
from typing import Any as _Any

from nkisim import api_surface as _api_surface
from nkisim.emulator import compiler as _compiler, coverage as _coverage, isa as _isa, language as _language
from nkisim.emulator import nki_versions as _nki_versions, typing
from nkisim.emulator.kernel import jit, simulate


class _ApiView(_types.ModuleType):
    """The module `name` as kernels see it: `impl`'s documented names (and `extra`), read through."""

    def __init__(self, name: str, impl: _types.ModuleType, extra: tuple[str, ...] = ()):
        super().__init__(name, impl.__doc__)
        names = frozenset(_api_surface.DOCUMENTED[name]) | frozenset(extra)
        object.__setattr__(self, "_impl", impl)
        object.__setattr__(self, "_names", names)

    def _serves(self, attr: str) -> bool:
        qualified = f"{self.__name__}.{attr}"
        return (attr in self._names or (attr.startswith("__") and attr != "__all__") or qualified in _nki_versions.ROWS
                or qualified in _coverage.REMOVED or qualified in _coverage.NOT_EMULATED)

    def __getattr__(self, attr: str) -> _Any:
        if attr in ("_impl", "_names"):     # not set yet: a half-built view
            raise AttributeError(attr)
        if attr == "__all__":         # `from nki.language import *`: the names this NKI version has
            return sorted(n for n in self._names if f"{self.__name__}.{n}" not in _nki_versions.ROWS
                          or _nki_versions.applies(f"{self.__name__}.{n}"))
        if not self._serves(attr):
            raise AttributeError(f"module {self.__name__!r} has no attribute {attr!r}")
        return getattr(self._impl, attr)

    def __setattr__(self, attr: str, value: _Any) -> None:
        setattr(self._impl, attr, value)

    def __delattr__(self, attr: str) -> None:
        delattr(self._impl, attr)

    def __dir__(self) -> list[str]:
        return sorted(self._names)


# named as the SDK's modules, also when this package is imported as nkisim.shims.nki
isa = _ApiView("nki.isa", _isa, extra=("constants",))
language = _ApiView("nki.language", _language)

dtype = _language.DType         # `nki.dtype`, the type of nl.float32 & co. (used in annotations)
collectives = _types.ModuleType(__name__ + ".collectives", "nki.collectives: multi-rank collectives (not emulated)")
collectives.__getattr__ = _coverage.stand_in("nki.collectives")
# `nki.compiler` (NKI 0.7): its names are served under NKI 0.7 only (rows of nki_versions.TABLE)
compiler = _types.ModuleType(__name__ + ".compiler", "nki.compiler: per-kernel configuration for nki.jit (NKI 0.7)")
compiler.__getattr__ = _coverage.stand_in("nki.compiler",
                                          {name: getattr(_compiler, name) for name in _compiler.__all__})
# `nki.isa.constants`: nki-library imports the nisa enums from there
_constants = _types.ModuleType(__name__ + ".isa.constants", "the nki.isa enums")
for _enum in ("engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode", "dma_engine", "nc_version"):
    setattr(_constants, _enum, getattr(_isa, _enum))

_isa.constants = _constants
_sys.modules[__name__ + ".isa"] = isa
_sys.modules[__name__ + ".isa.constants"] = _constants
_sys.modules[__name__ + ".language"] = language
_sys.modules[__name__ + ".typing"] = typing
_sys.modules[__name__ + ".collectives"] = collectives
_sys.modules[__name__ + ".compiler"] = compiler

__nkisim__ = True  # marks this package as the emulator's shim, not the real SDK
__all__ = ["jit", "simulate", "isa", "language", "typing", "collectives", "compiler", "dtype"]
