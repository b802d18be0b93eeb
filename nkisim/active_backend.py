"""Which NKI is active, and `install()`: make `import nki` work without the Neuron SDK.

Backends:
  "trn2"                 the Neuron SDK's `nki` is installed and a Neuron device is present;
  "neuron-sdk-simulator" the Neuron SDK's `nki` is installed but there is no device (its CPU
                         simulator runs the kernels; it defaults to trn3 unless
                         NEURON_PLATFORM_TARGET_OVERRIDE=trn2);
  "nkisim"               no Neuron SDK: `import nki` resolves to this project's emulator (trn2).
A real SDK is an `nki` package with `isa` and `language` submodules; the empty PyPI placeholder
and this project's own import shims (nkisim/shims) do not count.

nkisim emulates NKI 0.7.0 (Neuron SDK 2.33) by default; `NKI_COMPILER_FRONTEND=custom`, the documented
switch back to the previous front end on 2.33, or `install(nki="0.6")` selects NKI 0.6.0 (SDK 2.32)
(`nkisim.emulator.nki_versions`).
"""
from __future__ import annotations

import glob
import importlib
import importlib.metadata
import importlib.machinery
import os
import platform
import sys
from dataclasses import dataclass, field

from .arguments import check_kind
from .emulator import nki_versions

SHIM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shims")
VERSION = "0.1.0"


GENERATIONS = {"gen2": "trn1", "gen3": "trn2", "gen4": "trn3"}   # NEURON_PLATFORM_TARGET_OVERRIDE's other names


@dataclass
class Backend:
    name: str                      # "nkisim" | "neuron-sdk-simulator" | "trn2"
    reason: str
    versions: dict[str, str] = field(default_factory=dict)
    target: str = "trn2"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def real_sdk_dir() -> str | None:
    """Directory of a real Neuron SDK `nki` package on sys.path (ignoring our shim), or None."""
    path = [p for p in sys.path if os.path.abspath(p or ".") != SHIM_DIR]
    spec = importlib.machinery.PathFinder.find_spec("nki", path)
    if spec is None or not spec.submodule_search_locations:
        return None
    pkg = list(spec.submodule_search_locations)[0]
    has = lambda sub: os.path.exists(os.path.join(pkg, sub)) or os.path.exists(os.path.join(pkg, sub + ".py"))
    return pkg if has("isa") and has("language") else None


REHEARSAL_ENV = "NKISIM_REHEARSE_TRN2"


def rehearsing() -> bool:
    """True when NKISIM_REHEARSE_TRN2 asks for the trn2 rehearsal (nkisim/trn2_rehearsal.py)."""
    return os.environ.get(REHEARSAL_ENV, "") not in ("", "0")


def device_beside() -> bool:
    """True when kernels launched directly go to a device (the real SDK, or the trn2 rehearsal), so
    nkisim only runs beside it."""
    return real_sdk_dir() is not None or rehearsing()


def backend() -> Backend:
    """Report the active NKI backend and why, without installing anything."""
    import ml_dtypes
    import numpy
    import torch

    versions = {"python": platform.python_version(), "nkisim": VERSION, "torch": torch.__version__,
                "numpy": numpy.__version__, "ml_dtypes": ml_dtypes.__version__}
    if rehearsing():
        return Backend("trn2", f"REHEARSAL ({REHEARSAL_ENV}=1): nkisim stands in for the Neuron SDK, a trn2 "
                               "device and Neuron Explorer; nothing runs on Trainium",
                       {**versions, "nki": "nkisim shim (rehearsal stand-in)"})
    if real_sdk_dir() is None:
        placeholder = importlib.machinery.PathFinder.find_spec(
            "nki", [p for p in sys.path if os.path.abspath(p or ".") != SHIM_DIR]) is not None
        why = ("the installed `nki` package is the empty PyPI placeholder" if placeholder
               else "the Neuron SDK (`nki`) is not installed")
        version = nki_versions.active()
        frontend = (f", selected by {nki_versions.FRONTEND_ENV}={nki_versions.CUSTOM_FRONTEND}"
                    if os.environ.get(nki_versions.FRONTEND_ENV, "").strip() == nki_versions.CUSTOM_FRONTEND
                    and version == nki_versions.V06 else "")
        versions["nki"] = f"{nki_versions.release(version)} (emulated)"
        return Backend("nkisim", f"{why}, so `import nki` runs on nkisim, the project's CPU emulator of NKI "
                                 f"{nki_versions.release(version)} (Neuron SDK {nki_versions.SDK[version]}{frontend}) "
                                 f"for trn2", versions)
    versions["nki"] = _version("nki")
    versions["neuronx-cc"] = _version("neuronx-cc")
    if glob.glob("/dev/neuron*"):
        return Backend("trn2", "the Neuron SDK is installed and a Neuron device is present: kernels run on "
                               "Trainium", versions)
    # the simulator's target: the override (gen3 is trn2), else the chip it detects, else trn3 (the NKI CPU
    # Simulator guide's Target Platform table); no chip here
    override = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "").strip()
    target = GENERATIONS.get(override, override) or "trn3"
    why = f"NEURON_PLATFORM_TARGET_OVERRIDE={override}" if override else "its default without a Neuron device"
    return Backend("neuron-sdk-simulator", f"the Neuron SDK is installed but no Neuron device was found: kernels "
                                           f"run on its CPU simulator, target {target} ({why})", versions,
                   target=target)


def install(verbose: bool = False, nki: str | None = None) -> Backend:
    """Put the emulator's `nki` / `torch_neuronx` shims on sys.path unless the Neuron SDK is installed.

    `nki` selects the emulated NKI: "0.7" (Neuron SDK 2.33) or "0.6" (SDK 2.32); None takes
    `NKI_COMPILER_FRONTEND` (`custom`: 0.6, unset: 0.7). Idempotent; prints only when `verbose`."""
    check_kind("nkisim.install", "verbose", verbose, bool, "True or False")
    nki_versions.select(nki)
    b = backend()
    if b.name != "nkisim" and not rehearsing():   # rehearsing, the shim stands in for the SDK
        if verbose:
            print(f"nkisim.install(): nothing to do, {b.reason}.")
        return b
    if SHIM_DIR not in sys.path:
        sys.path.insert(0, SHIM_DIR)
        importlib.invalidate_caches()
    for mod in ("nki", "torch_neuronx"):   # drop placeholders imported before install()
        loaded = sys.modules.get(mod)
        if loaded is not None and not getattr(loaded, "__nkisim__", False):
            del sys.modules[mod]
    if verbose:
        print(f"nkisim.install(): {b.reason}.")
    return b
