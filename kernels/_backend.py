"""Which NKI runs the kernels, and which torch device their inputs must live on.

With the real Neuron SDK importable (a trn2 instance), `nki` and `torch_neuronx` are the real ones
and tensors must be on the Neuron device. Anywhere else the project's CPU emulator `nkisim`
provides both modules and tensors stay on the CPU. Nothing is printed on import; ask
`kernels.backend_info()` for the one-line answer.
"""
from __future__ import annotations

import importlib.util
import os
import sys

# The torch custom-op namespace of every kernel op (`torch.ops.nki_workshop.gelu_fwd`, ...).
OP_NAMESPACE = "nki_workshop"


def _importable(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def ensure_nki() -> None:
    """Make `import nki` and `import torch_neuronx` work: the real SDK if present, else nkisim."""
    if _importable("nki") and _importable("torch_neuronx"):
        return
    try:
        import nkisim
    except ImportError as err:
        raise ImportError(
            "kernels needs NKI: install the Neuron SDK (trn2) or this repository's `nkisim` emulator "
            "(pip install -e . from the workshop repository)"
        ) from err
    nkisim.install()


def _nkisim_backend_name() -> str | None:
    """nkisim's own answer ('nkisim', 'neuron-sdk-simulator', 'trn2'), or None without nkisim."""
    if not _importable("nkisim"):
        return None
    import nkisim

    return nkisim.backend().name


def runs_on_cpu() -> bool:
    """True when kernels execute on the host (emulator or the SDK's CPU simulator)."""
    name = _nkisim_backend_name()
    if name is not None:
        return name != "trn2"
    return os.environ.get("NKI_SIMULATOR") == "1"


def check_device(kernel: str, **tensors: object) -> None:
    """All tensors on the device the active backend executes on, with a message that says which."""
    on_cpu = runs_on_cpu()
    for name, tensor in tensors.items():
        device = getattr(tensor, "device", None)
        if device is None:
            continue
        kind = device.type
        if on_cpu and kind not in ("cpu", "meta"):
            raise ValueError(
                f"{kernel}: {name} is on device {device}, but the NKI backend here is the CPU "
                "emulator: move it to the CPU (tensor.cpu())"
            )
        if not on_cpu and kind in ("cpu", "cuda"):
            raise ValueError(
                f"{kernel}: {name} is on device {device}; on trn2 the kernels need tensors on the "
                "Neuron device (tensor.to('neuron'))"
            )


def logical_nc_config() -> int:
    """The runtime's LNC, NEURON_LOGICAL_NC_CONFIG (trn2 default 2): kernels launch as kernel[LNC]."""
    return int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2"))


def backend_info() -> str:
    """One line: which NKI backend the kernels use and why."""
    try:
        import nkisim
    except ImportError:
        return "kernels: NKI backend = real Neuron SDK (nkisim not installed)"
    backend = nkisim.backend()
    return f"kernels: NKI backend = {backend.name} ({backend.reason})"
