"""The trn2 rehearsal: with NKISIM_REHEARSE_TRN2=1 the repository behaves, as far as notebooks,
exercises, checkers and benchmarks can tell, as on a trn2 instance with the Neuron SDK. Nothing runs
on Trainium: nkisim stands in for the SDK, the device and Neuron Explorer, so the hardware path's
own code (device branches, profile()'s Neuron Explorer flow) runs in CI.

- `backend()` reports "trn2" (its reason says REHEARSAL); `import nki` is nkisim's shim.
- torch has a `neuron` device, as TorchNeuron adds it, through the PrivateUse1 extension
  (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html);
  a tensor there is a `NeuronTensor`, a CPU tensor underneath. `torch.compile(backend="neuron")`
  compiles with aot_eager.
- A device launch (`kernel(...)`, `kernel[n](...)`): its degree must equal the process's
  NEURON_LOGICAL_NC_CONFIG, "Mismatching the two will cause a runtime error"
  (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.31.0/nki/api/generated/nki.jit.html), default 2
  on trn2 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-features/logical-neuroncore-config.html);
  it takes NumPy arrays or tensors on `neuron` (TorchNeuron runs what is moved to `neuron`), runs on
  the emulator, leaves `nkisim.last_trace()` as it was, and returns tensors on `neuron`. With
  NEURON_FRAMEWORK_DEBUG=1 (profile() sets it for its launch) it leaves a stand-in NEFF in the
  working directory, as the compiler does
  (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/guides/use-neuron-profile.html);
  such a launch exists for its NEFF, so the stand-in makes it a dry run (outputs not computed),
  which keeps the rehearsal of profiles at published shapes fast.
- `neuron-explorer` on PATH is a stand-in for the `capture` and `view --output-format summary-json`
  commands of that page: it records every command line (`recorded_commands()`) and answers `view`
  with the cost model's estimate of the launch in summary-json form. profile() labels the result
  REHEARSAL_SOURCE; it has no timeline, as a hardware summary has none.
"""
from __future__ import annotations

import dataclasses
import json
import os
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch.utils._pytree import tree_map

from nkisim.active_backend import REHEARSAL_ENV as ENV
from nkisim.active_backend import rehearsing as active
from nkisim.neuron_explorer_standin import LOG_ENV

REHEARSAL_SOURCE = "trn2 rehearsal: cost model (estimate), not measured"
REHEARSAL_NOTE = ("trn2 rehearsal (NKISIM_REHEARSE_TRN2=1): synthesised from the trn2 cost model by the "
                  "neuron-explorer stand-in; nothing ran on Trainium")
NEURON = "neuron"
_enabled = False


def process_lnc() -> int:
    """The LNC every device launch of this process must use: NEURON_LOGICAL_NC_CONFIG, trn2 default 2."""
    return int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2"))


def enable() -> None:
    """Install the stand-ins (idempotent): the `neuron` device, the device launch, neuron-explorer.
    `import nkisim` calls it when NKISIM_REHEARSE_TRN2 is set."""
    global _enabled
    if _enabled:
        return
    _register_neuron_device()
    from nkisim.emulator import kernel as emulated

    emulated.DEVICE_LAUNCH = device_launch
    _put_explorer_on_path()
    _enabled = True


def label(summary: Any) -> Any:
    """A summary parsed on the hardware branch, relabelled when it came from the stand-ins."""
    if not active():
        return summary
    return dataclasses.replace(summary, source=REHEARSAL_SOURCE, notes=(*summary.notes, REHEARSAL_NOTE))


# ---- the `neuron` device ----------------------------------------------------------------------
class NeuronTensor(torch.Tensor):
    """A tensor on the rehearsal's `neuron` device: reports device neuron:0, computes on its CPU `inner`."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> "NeuronTensor":
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(), dtype=inner.dtype,
            device=torch.device(NEURON, 0), requires_grad=inner.requires_grad)

    def __init__(self, inner: torch.Tensor) -> None:
        self.inner = inner

    def __repr__(self) -> str:
        return f"{self.inner!r} (on neuron:0, trn2 rehearsal)"

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors: dict, meta: Any, outer_size: Any, outer_stride: Any) -> "NeuronTensor":
        return NeuronTensor(inner_tensors["inner"])

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        custom = _custom_op(func)
        if custom is not None and not _tracing(args, kwargs):   # eager: the op's wrapper sees device tensors
            return custom(*args, **kwargs)
        if func not in _CROSS_DEVICE:
            _same_device(func, args, kwargs)
        device = kwargs.get("device")
        to_cpu = func is torch.ops.aten._to_copy.default and device is not None and torch.device(device).type == "cpu"
        if device is not None and torch.device(device).type == NEURON:
            kwargs = dict(kwargs, device=torch.device("cpu"))
        out = func(*tree_map(_inner, args), **tree_map(_inner, kwargs))
        return out if to_cpu else tree_map(_wrap, out)


_CROSS_DEVICE = (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default)


def _same_device(func: Any, args: tuple, kwargs: dict) -> None:
    """As on a real device: no CPU tensor (beyond a 0-d scalar) in an op on `neuron` tensors."""
    flat = [*args, *kwargs.values()]
    for value in flat:
        if isinstance(value, (list, tuple)):
            flat.extend(value)
        elif isinstance(value, torch.Tensor) and not isinstance(value, NeuronTensor) and value.dim() > 0:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"neuron:0 and {value.device}! (in {func}) [trn2 rehearsal]")


def _tracing(args: tuple, kwargs: dict) -> bool:
    """True under torch.compile's tracing: the tensors inside are fake or functional, not data (a
    compiled graph runs on the inner CPU tensors, so its kernel ops run on the emulator)."""
    inner = [_inner(v) for v in (*args, *kwargs.values()) if isinstance(v, torch.Tensor)]
    return any(type(t) is not torch.Tensor for t in inner)


def _inner(value: Any) -> Any:
    return value.inner if isinstance(value, NeuronTensor) else value


def _wrap(value: Any) -> Any:
    if isinstance(value, torch.Tensor) and not isinstance(value, NeuronTensor):
        return NeuronTensor(value)
    return value


def _custom_op(func: Any) -> Any:
    """The Python implementation of a torch.library custom op (an nki_op), or None for built-in ops."""
    from torch._library.custom_ops import OPDEFS

    name = getattr(getattr(func, "_schema", None), "name", "")
    opdef = OPDEFS.get(name) if "::" in name and not name.startswith(("aten::", "prim::")) else None
    return None if opdef is None else opdef._init_fn


def _register_neuron_device() -> None:
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    if torch._C._get_privateuse1_backend_name() != NEURON:
        _setup_privateuseone_for_python_backend(rename=NEURON)
    lib = torch.library.Library("aten", "IMPL")   # factories on device="neuron"
    lib.impl("empty.memory_format", _empty, "PrivateUse1")
    lib.impl("empty_strided", _empty_strided, "PrivateUse1")
    _LIBRARIES.append(lib)

    from torch._dynamo import lookup_backend, register_backend

    register_backend(name=NEURON)(lambda gm, example_inputs: lookup_backend("aot_eager")(gm, example_inputs))


_LIBRARIES: list = []   # keeps the registrations alive


def _empty(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
           memory_format: Any = None) -> NeuronTensor:
    return NeuronTensor(torch.empty(size, dtype=dtype, memory_format=memory_format))


def _empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                   pin_memory: Any = None) -> NeuronTensor:
    return NeuronTensor(torch.empty_strided(size, stride, dtype=dtype))


# ---- device launches --------------------------------------------------------------------------
class DeviceLaunchError(RuntimeError):
    """What the Neuron runtime would refuse."""


def device_launch(kernel: Any, lnc: int, args: tuple, kwargs: dict) -> Any:
    """`kernel[lnc](*args, **kwargs)` as on the device: see the module docstring."""
    from nkisim.emulator import cores
    from nkisim.emulator.kernel import launch

    name = kernel.fn.__name__
    if lnc != process_lnc():
        raise DeviceLaunchError(
            f"{name}: launched as kernel[{lnc}] in a process whose NEURON_LOGICAL_NC_CONFIG is {process_lnc()}"
            f"{'' if 'NEURON_LOGICAL_NC_CONFIG' in os.environ else ' (unset: the trn2 default)'}; on trn2 the "
            "launch degree must equal it, one LNC per process [trn2 rehearsal]")
    for i, value in enumerate((*args, *kwargs.values())):
        if isinstance(value, torch.Tensor) and value.device.type not in (NEURON, "meta"):
            raise DeviceLaunchError(
                f"{name}: argument {i} is a torch tensor on {value.device}; a kernel launched on trn2 takes "
                "tensors on the Neuron device (tensor.to('neuron')) or NumPy arrays; to emulate it on the "
                "CPU use nkisim.run [trn2 rehearsal]")
    for_neff = os.environ.get("NEURON_FRAMEWORK_DEBUG") == "1"
    before = cores.last_trace()
    result = launch(kernel, tree_map(_inner, args), tree_map(_inner, kwargs), lnc, dry_run=for_neff)
    cores.set_last_trace(before)       # a device run leaves no emulator trace
    if for_neff:
        _write_neff(name, lnc, result)
    return tree_map(lambda v: _wrap(v) if isinstance(v, torch.Tensor) else v, result.outputs)


def _write_neff(name: str, lnc: int, result: Any) -> Path:
    """The stand-in NEFF: what the launch was, and the cost model's summary of it."""
    from nkisim.profile.summary import estimate

    summary = estimate(result.trace, result.sbuf_peak_bytes or None)
    neff = Path.cwd() / f"neff_{name}_rehearsal.neff"
    neff.write_text(json.dumps({"rehearsal": REHEARSAL_NOTE, "kernel": name, "lnc": lnc,
                                "summary_json": {name: summary_json_fields(summary)}}))
    return neff


def summary_json_fields(summary: Any) -> dict[str, Any]:
    """A ProfileSummary as the fields of a `neuron-explorer view --output-format summary-json` summary."""
    fields: dict[str, Any] = {"kernel_name": summary.kernel, "total_time": summary.total_time,
                              "dma_active_time": summary.dma_active_time,
                              "hbm_read_bytes": summary.hbm_read_bytes, "hbm_write_bytes": summary.hbm_write_bytes,
                              "dma_transfer_count": summary.dma_transfer_count,
                              "dma_transfer_total_bytes": summary.dma_transfer_total_bytes,
                              "mbu_estimated_percent": summary.mbu_estimated_percent, "rehearsal": REHEARSAL_NOTE}
    for engine, active_time in summary.engine_active_time.items():
        fields[f"{engine.lower()}_engine_active_time"] = active_time
        fields[f"{engine.lower()}_engine_instruction_count"] = sum(
            n for (e, _), n in summary.instruction_counts.items() if e == engine)
    activates = sum(n for (_, op), n in summary.instruction_counts.items() if op == "ACTIVATE")
    if activates:
        fields["activate_instruction_count"] = activates
        fields["activate_instruction_time"] = summary.opcode_time("ACTIVATE")
    return fields


# ---- the neuron-explorer stand-in -----------------------------------------------------------
def _put_explorer_on_path() -> None:
    log = os.environ.get(LOG_ENV)
    if log is None:
        log = str(Path(tempfile.mkdtemp(prefix="nkisim-rehearsal-")) / "commands.log")
        os.environ[LOG_ENV] = log
    bin_dir = Path(log).parent / "bin"
    bin_dir.mkdir(exist_ok=True)
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
