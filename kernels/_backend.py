"""Which NKI runs the kernels, and which torch device their inputs must live on.

With the real Neuron SDK importable (a trn2 instance), `nki` and `torch_neuronx` are the real ones
and tensors must be on the Neuron device. Anywhere else the project's CPU emulator `nkisim`
provides both modules and tensors stay on the CPU. Nothing is printed on import; ask
`kernels.backend_info()` for the one-line answer.

On a trn2 machine with the SDK's `nki` but without `torch_neuronx` (TorchNeuron ships separately,
from Neuron SDK 2.33: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html)
the raw kernels import and run; only the torch ops say, when called, what to install.
"""
from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any, Callable, Iterable

# The torch custom-op namespace of every kernel op (`torch.ops.nki_workshop.gelu_fwd`, ...).
OP_NAMESPACE = "nki_workshop"
from .limits import KernelInputError, check_kind


def _importable(module: str) -> bool:
    return module in sys.modules or importlib.util.find_spec(module) is not None


def ensure_nki() -> None:
    """Make `import nki` work (and `import torch_neuronx` without the SDK): the real SDK if present,
    else nkisim."""
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


def nki_op(name: str, mutates_args: str | Iterable[str] = ()) -> Callable[[Callable], Any]:
    """`torch_neuronx.nki_op(name, mutates_args=...)` when torch_neuronx is importable; otherwise a
    decorator whose op raises a clear error when called, so the raw kernels stay usable."""
    if _importable("torch_neuronx"):
        from torch_neuronx import nki_op as real_nki_op

        return real_nki_op(name, mutates_args=mutates_args)

    def unavailable(wrapper: Callable) -> Callable:
        def op(*args: Any, **kwargs: Any) -> Any:
            raise ImportError(
                f"{name}: the kernels' PyTorch ops need torch_neuronx (TorchNeuron, Neuron SDK 2.33+, "
                "pip install torch-neuronx==2.14.* from https://pip.repos.neuron.amazonaws.com); "
                "the raw NKI kernels (kernels.gelu_fwd, ...) work without it"
            )

        op.__name__ = wrapper.__name__
        op.__doc__ = wrapper.__doc__
        return op

    return unavailable


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
    """All tensors on one device the active backend can run: the CPU (and meta) for the emulator;
    on trn2 the Neuron device, or the CPU (the emulator then runs the kernel, see `launch`)."""
    on_cpu = runs_on_cpu()
    kinds = {}
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
        if not on_cpu and kind not in ("cpu", "meta", "neuron"):
            raise ValueError(
                f"{kernel}: {name} is on device {device}; on trn2 the kernels take tensors on the "
                "Neuron device (tensor.to('neuron')) or, to run on the emulator, on the CPU"
            )
        kinds[name] = device
    if len({d.type for d in kinds.values()}) > 1:   # CPU with meta would run a dry run: uninitialised output
        listed = ", ".join(f"{name} on {device}" for name, device in kinds.items())
        raise ValueError(f"{kernel}: tensors on different devices ({listed}); put them all on one device")


def check_tensors(function: str, **values: object) -> None:
    """Each value is a torch.Tensor; for a NumPy array or a list the error says how to convert it."""
    import torch

    for name, value in values.items():
        array_like = hasattr(value, "__array__") or isinstance(value, (list, tuple))
        hint = f" (convert it with torch.as_tensor({name}))" if array_like else ""
        check_kind(function, name, value, torch.Tensor, "a torch.Tensor", hint)


def on_neuron_device(*tensors: object) -> bool:
    """True when any argument is a tensor on the Neuron device."""
    return any(getattr(getattr(t, "device", None), "type", None) == "neuron" for t in tensors)


def launch(kernel: Any, lnc: int, *args: Any) -> Any:
    """`kernel[lnc](*args)` where the tensors live. Without a device everything runs on nkisim. On
    trn2, tensors on the Neuron device run on Trainium and CPU tensors on nkisim (the notebooks'
    CPU path; without nkisim, as in a hub copy, they go to the SDK as they are)."""
    if runs_on_cpu() or on_neuron_device(*args) or not _importable("nkisim"):
        return kernel[lnc](*args)
    import nkisim

    return nkisim.run(kernel, *args, lnc=lnc).outputs


def logical_nc_config() -> int:
    """The runtime's LNC, NEURON_LOGICAL_NC_CONFIG (trn2 default 2): kernels launch as kernel[LNC]."""
    value = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2")
    try:
        lnc = int(value)
    except ValueError:
        raise KernelInputError(
            f"NEURON_LOGICAL_NC_CONFIG={value!r} is not an integer; trn2 supports LNC 1 or 2"
        ) from None
    return lnc


def backend_info() -> str:
    """One line: which NKI backend the kernels use and why."""
    try:
        import nkisim
    except ImportError:
        return "kernels: NKI backend = real Neuron SDK (nkisim not installed)"
    backend = nkisim.backend()
    return f"kernels: NKI backend = {backend.name} ({backend.reason})"
