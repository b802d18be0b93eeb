"""nkisim: run NKI kernels for trn2 without Trainium (strict CPU emulator of NKI 0.7, or 0.6 on request, + trn2 cost model).

    import nkisim; nkisim.install()     # `import nki` now works (unless the Neuron SDK is installed)
    r = nkisim.run(kernel, x)           # r.outputs, r.trace, r.sbuf_peak_bytes

See nkisim/README.md.
"""
from typing import Any

from .active_backend import VERSION as __version__
from .active_backend import Backend, backend, install
from .emulator import (Instruction, NkiArgumentError, NkiDeprecationWarning, NkiInvalidOutputWarning, NkiRaceWarning,
                       NkiSpillWarning, NkiValidationError, NkiWarning, Run, Trace, last_trace, run)
from .limits import SBUF_USABLE_BYTES_PER_PARTITION
from .device_process import run_on_device
from .profile.profiling import estimate, profile, profile_model
from .profile.summary import ProfileSummary
from .kernel_diff import KernelDiff, show_kernel_diff

__all__ = ["install", "backend", "Backend", "run", "Run", "last_trace", "NkiValidationError", "NkiArgumentError",
           "NkiWarning", "NkiRaceWarning", "NkiInvalidOutputWarning", "NkiSpillWarning", "NkiDeprecationWarning",
           "Trace",
           "Instruction", "SBUF_USABLE_BYTES_PER_PARTITION", "run_on_device", "profile", "profile_model", "estimate",
           "ProfileSummary",
           "show_timeline", "show_comparison", "show_roofline"]

_VIEWS = ("show_timeline", "show_comparison", "show_roofline")


def __getattr__(name: str) -> Any:
    """The profile views, imported on first use so `import nkisim` does not load matplotlib."""
    if name in _VIEWS:
        from .profile import views

        return getattr(views, name)
    raise AttributeError(f"module 'nkisim' has no attribute '{name}'")


# NKISIM_REHEARSE_TRN2=1: the stand-ins of the trn2 rehearsal (nkisim/trn2_rehearsal.py).
from . import trn2_rehearsal as _rehearsal  # noqa: E402

if _rehearsal.active():
    _rehearsal.enable()
