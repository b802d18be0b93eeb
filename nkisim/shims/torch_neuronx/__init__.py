"""Import shim: `from torch_neuronx import nki_op, nki` after `nkisim.install()` (no Neuron SDK)."""
import nki  # noqa: F401  (the emulator's shim, re-exported like torch_neuronx.nki)

from nkisim.torch_bridge import nki_op

__nkisim__ = True
__all__ = ["nki", "nki_op"]
