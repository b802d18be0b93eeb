"""nkisim, under the name nki-library's simulation mode imports.

nki-library's harness (test/utils/simulation_setup.py) imports `nki_cpu_simulator.nki` and its submodules,
aliases them to `nki`, `nki.isa`, `nki.language`, ..., and runs a kernel as
`nki.cpu_simulate(kernel)[lnc](**inputs)`. Here those names are nkisim's modules, and a launch at an LNC is
`nki.simulate(kernel[lnc])`. Used by tools/nkilib_simulation.py only; no workshop code imports it.
"""
from __future__ import annotations

import os
import sys
import types
from typing import Any, Callable

import nkisim.active_backend

nkisim.active_backend.install()

import nki as _nki  # noqa: E402  (nkisim's, after install())
import nki.compiler  # noqa: E402,F401
import nki.isa  # noqa: E402,F401
import nki.isa.constants  # noqa: E402,F401
import nki.language  # noqa: E402,F401
import nki.typing  # noqa: E402,F401
from nkisim.emulator.kernel import Kernel  # noqa: E402

EMULATED_GENERATION = "gen3"   # trn2, the only NeuronCore nkisim emulates


class _Launches:
    """`cpu_simulate(kernel)`: indexed by the LNC, as nki-library's harness calls it, or called at LNC 1."""

    def __init__(self, kernel: Any):
        self._kernel = kernel if isinstance(kernel, Kernel) else _nki.jit(kernel)

    def __getitem__(self, lnc: int) -> Callable:
        _check_generation()
        return _nki.simulate(self._kernel[lnc])

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _check_generation()
        return _nki.simulate(self._kernel)(*args, **kwargs)


def _check_generation() -> None:
    # the harness names the test's NeuronCore generation in NKI_NC_VERSION before each run
    wanted = os.environ.get("NKI_NC_VERSION", EMULATED_GENERATION)
    if wanted != EMULATED_GENERATION:
        raise RuntimeError(f"this test targets NeuronCore {wanted}; nkisim emulates trn2 ({EMULATED_GENERATION}) "
                           f"only")


def cpu_simulate(kernel: Any) -> _Launches:
    return _Launches(kernel)


def _forwarding(name: str, target: types.ModuleType | None) -> types.ModuleType:
    """A module registered as `name` whose attributes are `target`'s (or an empty one, for names nkisim lacks)."""
    module = types.ModuleType(name, target.__doc__ if target else None)
    if target is not None:
        module.__dict__.update({k: v for k, v in vars(target).items() if not k.startswith("__")})
        module.__getattr__ = lambda attr: getattr(target, attr)
    sys.modules[name] = module
    return module


nki = _forwarding(__name__ + ".nki", _nki)
nki.cpu_simulate = cpu_simulate
for _sub, _target in {
    "isa": _nki.isa,
    "isa.constants": sys.modules["nki.isa.constants"],
    "language": _nki.language,
    "language.dtypes": _nki.language,    # NKI 0.7 keeps its dtypes in nki.language
    "compiler": _nki.compiler,
    "typing": _nki.typing,
    "tensor": None,                      # imported by the harness, unused in simulation
    "builtin": None,
}.items():
    _parent, _, _leaf = f"{nki.__name__}.{_sub}".rpartition(".")
    # the submodule is its parent's attribute too, as an import makes it: `import a.b.c as m` reads a.b, then .c
    setattr(sys.modules[_parent], _leaf, _forwarding(f"{nki.__name__}.{_sub}", _target))
