"""nkisim: run NKI 0.6 kernels for trn2 without Trainium (strict CPU emulator + trn2 cost model).

    import nkisim; nkisim.install()     # `import nki` now works (unless the Neuron SDK is installed)
    r = nkisim.run(kernel, x)           # r.outputs, r.trace, r.sbuf_peak_bytes

See nkisim/README.md.
"""
from .backend import VERSION as __version__
from .backend import Backend, backend, install
from .emulator import (SBUF_USABLE_BYTES_PER_PARTITION, Instruction, NkiValidationError, Run, Trace, last_trace,
                       run)

__all__ = ["install", "backend", "Backend", "run", "Run", "last_trace", "NkiValidationError", "Trace",
           "Instruction", "SBUF_USABLE_BYTES_PER_PARTITION"]

# trn2 cost model and profile views (nkisim/costmodel, nkisim/views.py, nkisim/profiling.py).
from .costmodel.summary import ProfileSummary  # noqa: E402
from .profiling import estimate, profile  # noqa: E402
from .views import show_comparison, show_roofline, show_timeline  # noqa: E402

__all__ += ["profile", "estimate", "ProfileSummary", "show_timeline", "show_comparison", "show_roofline"]
