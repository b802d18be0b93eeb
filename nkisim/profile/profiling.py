"""`profile(kernel, *args)`: one entry point for both worlds.

- On a trn2 instance with the Neuron SDK (`nkisim.backend().name == "trn2"`): a device profile captured
  the way the Neuron SDK 2.33 documents it, labelled "trn2 hardware (measured)". Every profile runs in
  a short-lived process of its own (nkisim/device_process.py), started with
    NEURON_LOGICAL_NC_CONFIG=<lnc>                 the launch's LNC, one per process;
    NEURON_RT_INSPECT_ENABLE=1                     environment-variable capture, "Required for all
    NEURON_RT_INSPECT_DEVICE_PROFILE=1             environment-variable-based capture"; device traces,
                                                   "first execution per NEFF per core";
    NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP=1  skip the first execution (warm-up), profile the 2nd;
    NEURON_RT_INSPECT_OUTPUT_DIR=<fresh folder>    where the runtime writes the NTFF;
    TORCH_NEURONX_NEFF_CACHE_DIR=<NEFF cache>      "When set, cached NEFFs are automatically available in
                                                   the profile output directory" (kept if already set);
    NEURON_RT_NUM_CORES=1                          reserve only the core it runs on (NEURON_RT_VISIBLE_CORES,
                                                   when the caller set it, wins);
  all set before it starts, as the runtime reads them when the workload starts
  (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/tools/neuron-explorer/environment-variables.html,
  https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/tools/neuron-explorer/how-to-profile-workload.html).
  It launches the kernel twice and exits, releasing its NeuronCores. Then
  `neuron-explorer view -d <output> --output-format summary-json` (aws-neuronx-tools) prints the
  summary, which ProfileSummary.from_explorer_json parses. The calling process never starts the Neuron
  runtime, so a notebook can profile at LNC=1 and LNC=2 in turn.
- Everywhere else: `nkisim.run(..., dry_run=True)` records the instruction trace and the trn2 cost
  model turns it into a ProfileSummary with source "trn2 cost model (estimate)".
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from nkisim import trn2_rehearsal
from nkisim.active_backend import backend
from nkisim.device_process import launch_in_process
from nkisim.emulator.runner import kernel_function, launch_of, refuse_shadowed_options, run_launch
from nkisim.profile.summary import ProfileSummary, estimate

__all__ = ["estimate", "profile", "profile_model"]

EXPLORER_TROUBLESHOOTING = ("https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/tools/neuron-explorer/"
                            "troubleshooting.html")
CAPTURE_ENV = {"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_DEVICE_PROFILE": "1",
               "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP": "1"}
# The profile process runs on one (logical) NeuronCore: reserving only that one leaves no idle initialised core
# to write an empty NTFF ("set NEURON_RT_NUM_CORES to match the number of cores actually used",
# EXPLORER_TROUBLESHOOTING)
ONE_CORE = {"NEURON_RT_NUM_CORES": "1"}


def profile(kernel: Any, *args: Any, lnc: int | None = None, **kwargs: Any) -> ProfileSummary:
    """Profile one launch of `kernel` (or of a launch `kernel[n]`, at its LNC; else `lnc`, by default an
    unbracketed launch's, see `runner.launch_of`): measured on trn2 hardware, else a cost-model estimate."""
    refuse_shadowed_options("nkisim.profile", kernel, lnc=lnc)
    kernel, lnc = launch_of("nkisim.profile", kernel, lnc)
    if backend().name == "trn2":
        return _profile_on_trn2(kernel, args, kwargs, lnc)
    return model_of_launch(kernel, args, kwargs, lnc)


def profile_model(kernel: Any, *args: Any, lnc: int | None = None, **kwargs: Any) -> ProfileSummary:
    """The trn2 cost model's profile of one launch, with its instruction timeline, on every backend
    (nkisim.run(..., dry_run=True) records the trace; a hardware summary has no timeline)."""
    refuse_shadowed_options("nkisim.profile_model", kernel, lnc=lnc)
    return model_of_launch(kernel, args, kwargs, lnc)


def model_of_launch(kernel: Any, args: tuple, kwargs: dict, lnc: int | None) -> ProfileSummary:
    """`profile_model` for a caller that has already checked its own options."""
    result = run_launch("nkisim.profile_model", kernel, args, kwargs, lnc, dry_run=True)
    return estimate(result.trace, result.sbuf_peak_bytes or None)


def neff_cache_dir() -> str:
    """The NEFF cache of the profile processes: TORCH_NEURONX_NEFF_CACHE_DIR if set, else the workshop's
    own folder under the user's cache directory (one persistent cache, so an unchanged kernel is not
    compiled again: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/compiler/about-compiler-artifacts.html)."""
    configured = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    if configured:
        return configured
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(cache_home) / "nki-workshop" / "neff-cache")


def _explorer() -> str:
    found = shutil.which("neuron-explorer")
    if found is None:
        raise RuntimeError(
            "neuron-explorer not found: it comes with aws-neuronx-tools (preinstalled on Neuron DLAMIs). On "
            "Ubuntu: `sudo apt-get install aws-neuronx-tools` from the Neuron apt repository; if it is "
            f"installed, `export PATH=/opt/aws/neuron/bin:$PATH` ({EXPLORER_TROUBLESHOOTING})")
    return found


def _profile_on_trn2(kernel: Any, args: tuple, kwargs: dict, lnc: int) -> ProfileSummary:
    """Capture in a process of its own (module docstring), then summarise with neuron-explorer."""
    explorer = _explorer()
    name = kernel_function(kernel).__name__
    output = Path(tempfile.mkdtemp(prefix=f"nki-profile-{name}-")) / "inspect"
    env = {**CAPTURE_ENV, "NEURON_RT_INSPECT_OUTPUT_DIR": str(output), "TORCH_NEURONX_NEFF_CACHE_DIR": neff_cache_dir(),
           **ONE_CORE}
    launch_in_process(kernel, args, kwargs, lnc, launches=2, env=env, outputs=False)
    traces = sorted(output.rglob("*.ntff"))
    if not traces:
        raise RuntimeError(
            f"{name}: no device profile (.ntff) under {output}, though its process ran with "
            f"{', '.join(f'{k}={v}' for k, v in CAPTURE_ENV.items())}: see 'Only .pb files, no .ntff' and "
            f"'Empty output directory' in {EXPLORER_TROUBLESHOOTING}")
    if len(traces) > 1:   # the process ran one kernel; more than one profile is not one launch's summary
        raise RuntimeError(f"{name}: {len(traces)} device profiles under {output} ({', '.join(t.name for t in traces)}), "
                           "expected one; open them in the Neuron Explorer UI (neuron-explorer view)")
    shown = subprocess.run([explorer, "view", "-d", str(output), "--output-format", "summary-json"],
                           capture_output=True, text=True)
    if shown.returncode != 0:
        raise RuntimeError(f"{name}: `neuron-explorer view -d {output} --output-format summary-json` failed:\n"
                           f"{shown.stderr.strip()}")
    summary = ProfileSummary.from_explorer_json(shown.stdout, kernel=name, lnc=lnc)
    note = (f"captured in a process of its own (NEURON_LOGICAL_NC_CONFIG={lnc}, NEURON_RT_INSPECT_* set before its "
            f"runtime started); NEFF and NTFF in {output}")
    return trn2_rehearsal.label(dataclasses.replace(summary, notes=(*summary.notes, note)))
