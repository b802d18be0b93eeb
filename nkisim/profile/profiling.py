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

from nkisim.active_backend import backend
from nkisim.emulator.runner import run
from nkisim.profile.summary import ProfileSummary, estimate

__all__ = ["estimate", "profile"]


def profile(kernel: Any, *args: Any, lnc: int = 1, **kwargs: Any) -> ProfileSummary:
    """Profile one launch of `kernel`: measured on trn2 hardware, else a cost-model estimate."""
    if backend().name == "trn2":
        return _profile_on_trn2(kernel, args, kwargs, lnc)
    result = run(kernel, *args, lnc=lnc, dry_run=True, **kwargs)
    return estimate(result.trace, result.sbuf_peak_bytes or None)


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
    os.environ["NEURON_FRAMEWORK_DEBUG"] = "1"
    started = time.time()
    cwd = os.getcwd()
    try:
        os.chdir(workdir)
        (kernel[lnc] if lnc > 1 else kernel)(*args, **kwargs)
    finally:
        os.chdir(cwd)
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
    return ProfileSummary.from_explorer_json(shown.stdout, kernel=name, lnc=lnc)
