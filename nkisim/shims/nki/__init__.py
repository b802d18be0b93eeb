"""Import shim: `import nki`, `import nki.isa as nisa`, `import nki.language as nl` resolve to the
emulator after `nkisim.install()` when the Neuron SDK is absent.

`nki.isa` and `nki.language` are registered as aliases of the emulator modules themselves (not
star-import copies), so `nisa.engine is nkisim.emulator.isa.engine` and module-level state is shared.
"""
import sys

from nkisim.emulator import isa, language
from nkisim.emulator.kernel import Kernel, jit, simulate

sys.modules[__name__ + ".isa"] = isa
sys.modules[__name__ + ".language"] = language

__nkisim__ = True  # marks this package as the emulator's shim, not the real SDK
__all__ = ["Kernel", "jit", "simulate", "isa", "language"]
