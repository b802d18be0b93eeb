"""Device work in a short-lived process of its own, so the caller never holds NeuronCores.

The Neuron runtime reserves a process's NeuronCores when it starts and keeps them "until the process
reserving that NeuronCore is terminated" (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/neuron-runtime/guides/configuration-guide.html);
its NEURON_RT_* settings are read when the workload starts
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/tools/neuron-explorer/environment-variables.html);
and a process launches kernels at one LNC, its NEURON_LOGICAL_NC_CONFIG ("Mismatching the two will cause
a runtime error", https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.jit.html).
So on trn2 every launch this package makes for a notebook runs in `python -m nkisim.device_child`,
started with the LNC and the variables it needs, which takes the cores, launches, writes its outputs
and exits: a notebook that profiles at LNC=1 and LNC=2 never starts the runtime itself.

`run_on_device(kernel, *args)` is the public form (one launch, outputs returned on the CPU; off trn2
the same launch on the emulator). The kernel travels by module and name when it can be imported. A
kernel defined in a notebook travels as its function's code plus the globals the code names: modules
by name, kernels and functions the same way (recursively), other values pickled.
"""
from __future__ import annotations

import importlib
import marshal
import os
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import torch

from nkisim.active_backend import backend
from nkisim.emulator.runner import kernel_function, launch_of, refuse_shadowed_options

IN_USE = "NeuronCore(s) not available"     # the runtime's message (runtime troubleshooting, "Neuron Core is in use")


class DeviceProcessError(RuntimeError):
    """The launch's own process failed; the message says why and what to do."""


def run_on_device(kernel: Any, *args: Any, lnc: int | None = None, **kwargs: Any) -> Any:
    """One launch of `kernel` (or of `kernel[n]`) where kernels run. On trn2: on the NeuronCores, in a
    short-lived process of its own started with NEURON_LOGICAL_NC_CONFIG=lnc, so this process holds no
    NeuronCore afterwards (a later profile, at any LNC, gets them); the outputs come back on the CPU.
    Elsewhere: the same launch, a plain call on the emulator."""
    refuse_shadowed_options("nkisim.run_on_device", kernel, lnc=lnc)
    kernel, lnc = launch_of("nkisim.run_on_device", kernel, lnc)
    if backend().name != "trn2":
        return (kernel[lnc] if lnc > 1 else kernel)(*args, **kwargs)
    return launch_in_process(kernel, args, kwargs, lnc, launches=1, env={}, outputs=True)


def launch_in_process(kernel: Any, args: tuple, kwargs: dict, lnc: int, launches: int, env: dict[str, str],
                      outputs: bool) -> Any:
    """`kernel[lnc](*args, **kwargs)`, `launches` times, in `python -m nkisim.device_child` with
    NEURON_LOGICAL_NC_CONFIG=lnc and `env` set before it starts; the last launch's outputs (CPU) if
    `outputs`, else None."""
    name = getattr(kernel_function(kernel), "__name__", "kernel")
    with tempfile.TemporaryDirectory(prefix="nki-device-") as work:
        payload, result = Path(work) / "payload.pt", Path(work) / "outputs.pt"
        to_cpu = lambda v: v.cpu() if isinstance(v, torch.Tensor) else v  # noqa: E731  (device tensors travel via the CPU)
        torch.save({"kernel": _spec(kernel), "args": tuple(to_cpu(a) for a in args),
                    "kwargs": {k: to_cpu(v) for k, v in kwargs.items()}, "lnc": lnc, "launches": launches,
                    "outputs": outputs}, payload)
        done = subprocess.run([sys.executable, "-m", "nkisim.device_child", str(payload), str(result)],
                              env={**os.environ, **env, "NEURON_LOGICAL_NC_CONFIG": str(lnc)},
                              capture_output=True, text=True)
        if done.returncode == 0:
            return torch.load(result, weights_only=False)["outputs"] if outputs else None
    error = done.stderr.strip()
    if IN_USE in error:
        raise DeviceProcessError(
            f"{name} at LNC={lnc}: its process got no NeuronCore, another process holds them. A notebook "
            "kernel that put tensors on the device (lesson 06, exercise 6) or any other Python process "
            "using the device keeps its NeuronCores until it ends: shut it down (Kernel > Shut Down "
            f"Kernel) and run this again.\n{next(x for x in error.splitlines() if IN_USE in x)}")
    raise DeviceProcessError(f"{name} at LNC={lnc} in its own process (NEURON_LOGICAL_NC_CONFIG={lnc}) "
                             f"failed:\n{error}")


def _spec(value: Any) -> dict[str, Any]:
    """How to rebuild a kernel, function or module in the child."""
    if isinstance(value, types.ModuleType):
        return {"module": value.__name__}
    name = getattr(value, "__qualname__", getattr(value, "__name__", None))
    module = getattr(value, "__module__", None)
    if module not in (None, "__main__") and name and _importable_as(value, module, name):
        return {"import": module, "name": name}
    is_kernel = not isinstance(value, types.FunctionType)
    fn = kernel_function(value) if is_kernel else value
    if fn.__closure__:
        raise ValueError(f"{fn.__name__}: a kernel that closes over local variables cannot be sent to a child "
                         "process; define it at the top level of a module or notebook cell")
    names: dict[str, Any] = {}
    for name_ in global_names(fn.__code__):
        if name_ in fn.__globals__:
            item = fn.__globals__[name_]
            names[name_] = (_spec(item) if isinstance(item, (types.ModuleType, types.FunctionType))
                            or hasattr(item, "__wrapped__") or is_kernel_object(item) else {"value": item})
    return {"code": marshal.dumps(fn.__code__), "name": fn.__name__, "defaults": fn.__defaults__,
            "globals": names, "jit": is_kernel}


def is_kernel_object(value: Any) -> bool:
    try:
        kernel_function(value)
    except (TypeError, ValueError):
        return False
    return not isinstance(value, types.FunctionType)


def _importable_as(value: Any, module: str, qualname: str) -> bool:
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return False
    return found is value


def global_names(code: types.CodeType) -> set[str]:
    """Every global name a function's code (nested code included) refers to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= global_names(const)
    return names


def rebuild(spec: dict[str, Any]) -> Any:
    if "module" in spec:
        return importlib.import_module(spec["module"])
    if "import" in spec:
        found: Any = importlib.import_module(spec["import"])
        for part in spec["name"].split("."):
            found = getattr(found, part)
        return found
    if "value" in spec:
        return spec["value"]
    namespace = {"__builtins__": __builtins__, "__name__": "__main__"}
    namespace.update({name: rebuild(item) for name, item in spec["globals"].items()})
    fn = types.FunctionType(marshal.loads(spec["code"]), namespace, spec["name"], spec["defaults"])
    if not spec["jit"]:
        return fn
    import nki

    return nki.jit(fn)
