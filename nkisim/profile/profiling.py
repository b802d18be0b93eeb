"""`profile(kernel, *args)`: one entry point for both worlds.

- On a trn2 instance with the Neuron SDK (`nkisim.backend().name == "trn2"`): a real profile via the
  documented Neuron Explorer flow (SDK:nki/guides/use-neuron-profile.rst), parsed from its
  summary-json into a ProfileSummary with source "trn2 hardware (measured)".
- Everywhere else: `nkisim.run(..., dry_run=True)` records the instruction trace and the trn2 cost
  model turns it into a ProfileSummary with source "trn2 cost model (estimate)".
"""
from __future__ import annotations

import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from nkisim import trn2_rehearsal
from nkisim.active_backend import backend
from nkisim.emulator.runner import launch_of, run
from nkisim.profile.summary import ProfileSummary, estimate

__all__ = ["estimate", "profile", "profile_model"]


def profile(kernel: Any, *args: Any, lnc: int | None = None, **kwargs: Any) -> ProfileSummary:
    """Profile one launch of `kernel` (or of a launch `kernel[n]`, at its LNC; else `lnc`, default 1):
    measured on trn2 hardware, else a cost-model estimate."""
    kernel, lnc = launch_of("nkisim.profile", kernel, lnc)
    if backend().name == "trn2":
        if lnc != device_lnc():
            from nkisim.profile.lnc_process import profile_in_child

            return profile_in_child(kernel, args, kwargs, lnc)
        return _profile_on_trn2(kernel, args, kwargs, lnc)
    return profile_model(kernel, *args, lnc=lnc, **kwargs)


def profile_model(kernel: Any, *args: Any, lnc: int | None = None, **kwargs: Any) -> ProfileSummary:
    """The trn2 cost model's profile of one launch, with its instruction timeline, on every backend
    (nkisim.run(..., dry_run=True) records the trace; a hardware summary has no timeline)."""
    kernel, lnc = launch_of("nkisim.profile_model", kernel, lnc)
    result = run(kernel, *args, lnc=lnc, dry_run=True, **kwargs)
    return estimate(result.trace, result.sbuf_peak_bytes or None)


def device_lnc() -> int:
    """The LNC of this process's device launches: NEURON_LOGICAL_NC_CONFIG, 2 by default on trn2
    (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-features/logical-neuroncore-config.html)."""
    return int(os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2"))


def _on_device(value: Any) -> Any:
    """A CPU torch tensor copied to the Neuron device (TorchNeuron runs what is moved to `neuron`:
    https://awsdocs-neuron.readthedocs-hosted.com/en/latest/release-notes/components/torchneuron.html)."""
    import torch

    if isinstance(value, torch.Tensor) and value.device.type == "cpu":
        return value.to("neuron")
    return value


def _profile_on_trn2(kernel: Any, args: tuple, kwargs: dict, lnc: int) -> ProfileSummary:
    """The documented flow, in three steps. Not runnable without a Trainium device.

    1. NEURON_FRAMEWORK_DEBUG=1 and one run of the kernel: the compiler leaves the NEFF in the
       working directory.
    2. `neuron-explorer capture -n <neff> -s profile.ntff --profile-nth-exec=2` (the 2nd execution
       avoids warm-up) writes profile_exec_2.ntff.
    3. `neuron-explorer view -n <neff> -s profile_exec_2.ntff --output-format summary-json` prints
       the Summary table as JSON, which ProfileSummary.from_explorer_json parses.
    """
    workdir = Path(tempfile.mkdtemp(prefix="nki-profile-"))
    debug = os.environ.get("NEURON_FRAMEWORK_DEBUG")
    os.environ["NEURON_FRAMEWORK_DEBUG"] = "1"   # for this launch only: later launches stay as they were
    started = time.time()
    cwd = os.getcwd()
    try:
        os.chdir(workdir)
        (kernel[lnc] if lnc > 1 else kernel)(*(_on_device(a) for a in args),
                                             **{k: _on_device(v) for k, v in kwargs.items()})
    finally:
        os.chdir(cwd)
        if debug is None:
            del os.environ["NEURON_FRAMEWORK_DEBUG"]
        else:
            os.environ["NEURON_FRAMEWORK_DEBUG"] = debug
    neffs = sorted((p for p in workdir.rglob("*.neff") if p.stat().st_mtime >= started),
                   key=lambda p: p.stat().st_mtime)
    if not neffs:
        raise RuntimeError(f"no NEFF written under {workdir}: is NEURON_FRAMEWORK_DEBUG honoured by this SDK?")
    neff = neffs[-1]
    ntff = workdir / "profile.ntff"
    subprocess.run(["neuron-explorer", "capture", "-n", str(neff), "-s", str(ntff), "--profile-nth-exec=2"],
                   check=True, cwd=workdir)
    shown = subprocess.run(["neuron-explorer", "view", "-n", str(neff), "-s", str(workdir / "profile_exec_2.ntff"),
                            "--output-format", "summary-json"], check=True, cwd=workdir,
                           capture_output=True, text=True)
    name = getattr(kernel, "__name__", getattr(getattr(kernel, "fn", None), "__name__", "kernel"))
    return trn2_rehearsal.label(ProfileSummary.from_explorer_json(shown.stdout, kernel=name, lnc=lnc))
