"""The trn2 rehearsal: with NKISIM_REHEARSE_TRN2=1 the repository behaves, as far as notebooks,
exercises, checkers and benchmarks can tell, as on a trn2 instance with the Neuron SDK 2.33. Nothing
runs on Trainium: nkisim stands in for the SDK, the device, the runtime and Neuron Explorer, so the
hardware path's own code (device branches, profile()'s capture flow) runs in CI against the documented
behaviour of the real pieces (nkisim/rehearsal_runtime.py lists those rules with their pages).

- `backend()` reports "trn2" (its reason says REHEARSAL); `import nki` is nkisim's shim.
- torch has a `neuron` device, as TorchNeuron adds it (nkisim/rehearsal_device.py: a tensor there is a
  `NeuronTensor`, a CPU tensor underneath; `torch.neuron`; autocast). `torch.compile(backend="neuron")`, the
  default backend here, compiles with aot_eager; a kernel an op launches is traced through with fake tensors, and is a device
  run when the compiled graph runs. The first tensor put on `neuron` or the first device launch starts the
  process's runtime, which reserves its NeuronCores (rehearsal_runtime.start).
- A device launch (`kernel(...)`, `kernel[n](...)`): under NKI 0.7 its degree must be the compiler's
  (NCC_EVRF066, as in the emulator), and its NEFF must match the LNC the process's runtime started with
  (NEURON_LOGICAL_NC_CONFIG, default 2 on trn2:
  https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-features/logical-neuroncore-config.html);
  it takes NumPy arrays or tensors on `neuron` (TorchNeuron runs what is moved to `neuron`), goes
  through rehearsal_runtime.execute (NEFF cache, debug directory, profile capture), leaves
  `nkisim.last_trace()` as it was, and returns tensors on `neuron`.
- `neuron-explorer` (nkisim/neuron_explorer_standin.py) is installed in the instance's
  /opt/aws/neuron/bin, which goes on PATH, only when the instance has aws-neuronx-tools; it answers
  `view --output-format summary-json` from the captured NTFF. profile() labels the result
  REHEARSAL_SOURCE; it has no timeline, as a hardware summary has none.
"""
from __future__ import annotations

import contextvars
import dataclasses
import functools
import json
import os
import stat
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor
from torch.utils._pytree import tree_map

from nkisim import rehearsal_device
from nkisim import rehearsal_runtime as runtime
from nkisim.active_backend import REHEARSAL_ENV as ENV
from nkisim.active_backend import rehearsing as active
from nkisim.emulator import nki_versions
from nkisim.emulator.kernel import compiler_lnc_mismatch
from nkisim.neuron_explorer_standin import LOG_ENV
from nkisim.rehearsal_runtime import REHEARSAL_NOTE, DeviceLaunchError

REHEARSAL_SOURCE = "trn2 rehearsal: cost model (estimate), not measured"
NEURON = rehearsal_device.NEURON
_enabled = False


def enable() -> None:
    """Install the stand-ins (idempotent): the `neuron` device, the device launch, neuron-explorer.
    `import nkisim` calls it when NKISIM_REHEARSE_TRN2 is set."""
    global _enabled
    if _enabled:
        return
    rehearsal_device.register()
    torch.compile = _compile_with_neuron_backend(torch.compile)
    from nkisim.emulator import kernel as emulated

    emulated.DEVICE_LAUNCH = device_launch
    _put_explorer_on_path()
    _enabled = True


def label(summary: Any) -> Any:
    """A summary parsed on the hardware branch, relabelled when it came from the stand-ins."""
    if not active():
        return summary
    return dataclasses.replace(summary, source=REHEARSAL_SOURCE, notes=(*summary.notes, REHEARSAL_NOTE))


def _compile_with_neuron_backend(compile_fn: Any) -> Any:
    """torch.compile, which registers the `neuron` backend (aot_eager underneath) on its first call:
    importing torch._dynamo at enable() would cost every rehearsed process seconds. As on a Neuron device,
    `neuron` is the backend when none is given ("Explicitly set, or auto-selected when running on a Neuron
    device", TORCH_COMPILE_PAGE), and it rejects dynamic=True when it compiles (the same page)."""
    @functools.wraps(compile_fn)
    def compile_(model: Any = None, **kwargs: Any) -> Any:
        from torch._dynamo import list_backends, register_backend

        if NEURON not in list_backends(exclude_tags=()):
            register_backend(name=NEURON)(_neuron_backend)
        kwargs.setdefault("backend", NEURON)
        if kwargs["backend"] == NEURON and kwargs.get("dynamic") is True:
            kwargs["backend"] = _refuse_dynamic_shapes
        return compile_fn(model, **kwargs)

    return compile_


TORCH_COMPILE_PAGE = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/compile/reference-torch-compile.html"


def _neuron_backend(gm: Any, example_inputs: Any, mode: str | None = None, options: dict | None = None) -> Any:
    """The `neuron` backend: "Only 'default' applies. Other modes log a warning and fall back to default"; options
    "Accepts a dict or None, but only a few keys are read internally" (TORCH_COMPILE_PAGE)."""
    from torch._dynamo import lookup_backend

    if mode not in (None, "default"):
        warnings.warn(f"torch.compile(backend='neuron'): mode={mode!r} has no effect, compiling in the default mode "
                      f"({TORCH_COMPILE_PAGE}) [trn2 rehearsal]", stacklevel=2)
    return _on_device(lookup_backend("aot_eager")(gm, example_inputs))


def _refuse_dynamic_shapes(gm: Any, example_inputs: Any, **_: Any) -> Any:
    raise DeviceLaunchError(
        "torch.compile(backend='neuron', dynamic=True): the neuron backend rejects dynamic=True; leave dynamic unset "
        f"or False, and shapes that vary between steps recompile per new shape ({TORCH_COMPILE_PAGE}) [trn2 rehearsal]")


# Set while a graph compiled for `neuron` runs: AOT autograd unwraps each NeuronTensor, so the graph's ops see the
# device tensors' CPU data, and a kernel launched there is a device run of that data.
_IN_DEVICE_GRAPH: contextvars.ContextVar[bool] = contextvars.ContextVar("nkisim_in_device_graph", default=False)


def _on_device(compiled: Any) -> Any:
    """The compiled graph, run with _IN_DEVICE_GRAPH set."""
    @functools.wraps(compiled)
    def run(*args: Any) -> Any:
        token = _IN_DEVICE_GRAPH.set(True)
        try:
            return compiled(*args)
        finally:
            _IN_DEVICE_GRAPH.reset(token)

    return run


# ---- device launches --------------------------------------------------------------------------
def device_launch(kernel: Any, lnc: int, args: tuple, kwargs: dict) -> Any:
    """`kernel[lnc](*args, **kwargs)` as on the device: see the module docstring."""
    name = kernel.fn.__name__
    started = runtime.start()
    mismatch = nki_versions.applies("lnc-degree-check") and compiler_lnc_mismatch(kernel.fn, lnc)
    if mismatch:          # the kernel is compiled first (NKI 0.7), at the compiler's LNC
        raise DeviceLaunchError(f"{mismatch} [trn2 rehearsal]")
    if lnc != started.lnc:
        raise DeviceLaunchError(
            f"{name}: launched as kernel[{lnc}] in a process whose runtime started at NEURON_LOGICAL_NC_CONFIG="
            f"{started.lnc}{'' if started.lnc_set else ' (unset: the trn2 default)'}; on trn2 the launch degree "
            "must equal it, one LNC per process, read when the runtime starts [trn2 rehearsal]")
    if any(isinstance(v, FakeTensor) for v in (*args, *kwargs.values())):
        # torch.compile propagating shapes through an op whose body launches the kernel (the TorchNeuron pages:
        # a registered kernel op runs "in eager mode and with torch.compile"): the kernel is traced, not run
        from nkisim.emulator.kernel import launch
        return launch(kernel, args, kwargs, lnc, dry_run=True).outputs
    if _IN_DEVICE_GRAPH.get():
        return runtime.execute(kernel, lnc, args, kwargs)
    for i, value in enumerate((*args, *kwargs.values())):
        if isinstance(value, torch.Tensor) and value.device.type not in (NEURON, "meta"):
            raise DeviceLaunchError(
                f"{name}: argument {i} is a torch tensor on {value.device}; a kernel launched on trn2 takes "
                "tensors on the Neuron device (tensor.to('neuron')) or NumPy arrays; to emulate it on the "
                "CPU use nkisim.run [trn2 rehearsal]")
    on_host = rehearsal_device.inner
    outputs = runtime.execute(kernel, lnc, tree_map(on_host, args), tree_map(on_host, kwargs))
    return tree_map(lambda v: rehearsal_device.wrap(v) if isinstance(v, torch.Tensor) else v, outputs)


# ---- the neuron-explorer stand-in -----------------------------------------------------------
def _put_explorer_on_path() -> None:
    """The stand-in in the instance's /opt/aws/neuron/bin, on PATH, where aws-neuronx-tools is installed."""
    root = runtime.instance_dir()
    os.environ.setdefault(LOG_ENV, str(root / "neuron-explorer.log"))
    if not runtime.has_neuron_tools():
        return
    bin_dir = root / "opt" / "aws" / "neuron" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    script = bin_dir / "neuron-explorer"
    standin = Path(__file__).with_name("neuron_explorer_standin.py")   # run as a file: no torch import
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{standin}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    if str(bin_dir) not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = os.pathsep.join([str(bin_dir), os.environ.get("PATH", "")])


def recorded_commands() -> list[list[str]]:
    """Every neuron-explorer command line the stand-in received in this rehearsal, in order."""
    log = os.environ.get(LOG_ENV)
    if log is None or not Path(log).exists():
        return []
    return [json.loads(line) for line in Path(log).read_text().splitlines()]
