"""On trn2, profiling a launch at an LNC other than this process's: in a child process.

A trn2 process launches kernels at one LNC, its NEURON_LOGICAL_NC_CONFIG; "Mismatching the two
will cause a runtime error" (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.jit.html).
So `nkisim.profile(kernel, ..., lnc=n)` with another n runs `python -m nkisim.profile.lnc_child`
with NEURON_LOGICAL_NC_CONFIG=n, which profiles the launch there and hands the summary back.

The kernel travels by module and name when it can be imported. A kernel defined in a notebook
travels as its function's code plus the globals the code names: modules by name, kernels and
functions the same way (recursively), other values pickled.
"""
from __future__ import annotations

import dataclasses
import importlib
import marshal
import os
import pickle
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

import torch

from nkisim.emulator.runner import kernel_function
from nkisim.profile.summary import ProfileSummary


def profile_in_child(kernel: Any, args: tuple, kwargs: dict, lnc: int) -> ProfileSummary:
    """`nkisim.profile(kernel, *args, lnc=lnc, **kwargs)` in a child process at NEURON_LOGICAL_NC_CONFIG=lnc."""
    work = Path(tempfile.mkdtemp(prefix="nki-profile-lnc-"))
    payload, result = work / "payload.pt", work / "summary.pickle"
    to_cpu = lambda v: v.cpu() if isinstance(v, torch.Tensor) else v  # noqa: E731  (device tensors travel via the CPU)
    torch.save({"kernel": _spec(kernel), "args": tuple(to_cpu(a) for a in args),
                "kwargs": {k: to_cpu(v) for k, v in kwargs.items()}, "lnc": lnc}, payload)
    env = dict(os.environ, NEURON_LOGICAL_NC_CONFIG=str(lnc))
    done = subprocess.run([sys.executable, "-m", "nkisim.profile.lnc_child", str(payload), str(result)],
                          env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"profiling {getattr(kernel, '__name__', 'the kernel')} at LNC={lnc} in a child process "
                           f"(NEURON_LOGICAL_NC_CONFIG={lnc}) failed:\n{done.stderr.strip()}")
    summary = pickle.loads(result.read_bytes())
    note = (f"profiled in a child process with NEURON_LOGICAL_NC_CONFIG={lnc}: a trn2 process launches at one LNC "
            f"(this one: {os.environ.get('NEURON_LOGICAL_NC_CONFIG', '2 (default)')})")
    return dataclasses.replace(summary, notes=(*summary.notes, note))


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
    for name_ in _global_names(fn.__code__):
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


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
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
