"""The process of one device job (see nkisim/device_process.py): started with NEURON_LOGICAL_NC_CONFIG
and the NEURON_RT_* variables the job needs, it launches the kernel and writes the outputs back.

    python -m nkisim.device_child PAYLOAD RESULT
"""
from __future__ import annotations

import sys
from typing import Any

import torch

from nkisim.active_backend import install
from nkisim.device_process import rebuild


def _to_device(value: Any) -> Any:
    """TorchNeuron runs what is moved to `neuron`
    (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html)."""
    return value.to("neuron") if isinstance(value, torch.Tensor) else value


def _to_cpu(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_to_cpu(v) for v in value)
    return value.cpu() if isinstance(value, torch.Tensor) else value


def main(payload: str, result: str) -> int:
    install()
    job = torch.load(payload, weights_only=False)
    kernel, lnc = rebuild(job["kernel"]), job["lnc"]
    launcher = kernel[lnc] if lnc > 1 else kernel
    args = tuple(_to_device(a) for a in job["args"])
    kwargs = {k: _to_device(v) for k, v in job["kwargs"].items()}
    outputs = None
    for _ in range(job["launches"]):
        outputs = launcher(*args, **kwargs)
    torch.save({"outputs": _to_cpu(outputs) if job["outputs"] else None}, result)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
