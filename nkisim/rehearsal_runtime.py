"""The Neuron runtime and TorchNeuron as the trn2 rehearsal stands them in (NKISIM_REHEARSE_TRN2=1).

Each rule is what the Neuron SDK 2.33 documentation says the real piece does, with its page; the
rehearsal refuses what the runtime refuses, so code that only works against our own picture of the
SDK fails here first. nkisim/trn2_rehearsal.py calls `start()` at a process's first use of the
`neuron` device and `execute()` for each device launch.

1. NeuronCores are reserved per process. "By default, Neuron Runtime initializes all the cores
   present in the system and reserves them for the current process", and "Once a NeuronCore is
   reserved for a process, it cannot be used by another process at all, until the process reserving
   that NeuronCore is terminated"; NEURON_RT_VISIBLE_CORES selects the cores a process reserves
   (RUNTIME_CONFIG). Any other process then fails at runtime initialisation with "NeuronCore(s) not
   available" (RUNTIME_TROUBLESHOOTING, "Neuron Core is in use"); NEURON_RT_NUM_CORES asks for a number of
   free cores instead. `start()` reserves the cores of the rehearsed instance and raises RuntimeRefused while
   a live process holds one of them (or, for a count, too many). NEURON_LOGICAL_NC_CONFIG, read when the
   runtime starts, is 1 or 2 (LNC_PAGE); a NEFF compiled for another LNC does not load.
2. NEFFs. TorchNeuron compiles a graph in a working directory under TORCH_NEURONX_DEBUG_DIR (default
   /tmp/neuron_backend), stores the NEFF in the persistent NEFF cache and runs it; the debug files
   are kept "after execution" only with TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1 (TORCH_ENV_VARS,
   COMPILER_ARTIFACTS). A launch of an unchanged kernel with the same inputs is served from the cache:
   nothing is compiled and no NEFF is written. NEURON_FRAMEWORK_DEBUG, which made the PyTorch/XLA
   torch-neuronx save a NEFF in the working directory (OLD_TORCH_ENV_VARS), has no effect here.
3. Device profiles. The runtime reads NEURON_RT_* "at run time ... Set them before the workload
   starts" (EXPLORER_ENV): `start()` takes the inspect settings of the environment it starts in, and
   later changes to os.environ change nothing. With NEURON_RT_INSPECT_ENABLE=1 and
   NEURON_RT_INSPECT_DEVICE_PROFILE=1 (or `model`: "first execution per NEFF per core"), the first
   execution of each NEFF after NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP skipped ones is captured
   as an NTFF under NEURON_RT_INSPECT_OUTPUT_DIR (default ./output), in a folder per instance and
   process (CAPTURE). The NEFF lands beside it when TORCH_NEURONX_NEFF_CACHE_DIR is set ("When set,
   cached NEFFs are automatically available in the profile output directory", EXPLORER_ENV; without
   it "NEFFs are in a separate compiler cache", EXPLORER_TROUBLESHOOTING). `session` mode is not
   rehearsed (no profile is written).
4. `neuron-explorer` comes with aws-neuronx-tools, in /opt/aws/neuron/bin (EXPLORER_TROUBLESHOOTING,
   "neuron-explorer command not found"): nkisim/trn2_rehearsal.py installs the stand-in only on an
   instance that has the tools (NKISIM_REHEARSAL_NEURON_TOOLS, default yes: Neuron DLAMIs have them).

One rehearsed instance is a directory (NKISIM_REHEARSAL_INSTANCE, made on first use and inherited
by child processes): the reservations, the default NEFF cache and the tools live there, so
`tools/rehearse_trn2.py` gives each job an instance of its own. The instance is a trn2.3xlarge: one
Trainium2 device with 8 physical NeuronCores, 4 logical cores at LNC=2.

Stand-in shortcut (not a documented behaviour): a launch in a process whose runtime captures device
profiles computes no values (its outputs are NaN, as nkisim fills new buffers); its profile comes from
the trn2 cost model. Profile processes read only the NTFF, and this keeps rehearsed profiles of the
published shapes fast.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
import types
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from nkisim.device_process import global_names
from nkisim.vocabulary import DMA, DMA_QUEUE_LANES, NO_QUEUE

DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"
RUNTIME_CONFIG = f"{DOCS}/v2.33.0/neuron-runtime/guides/configuration-guide.html"
RUNTIME_TROUBLESHOOTING = f"{DOCS}/v2.33.0/neuron-runtime/nrt-troubleshoot.html"
TORCH_ENV_VARS = f"{DOCS}/latest/torch/reference/env-vars.html"
COMPILER_ARTIFACTS = f"{DOCS}/latest/compiler/about-compiler-artifacts.html"
OLD_TORCH_ENV_VARS = f"{DOCS}/latest/frameworks/torch/torch-neuronx/api-reference-guide/training/torch-neuron-envvars.html"
EXPLORER_ENV = f"{DOCS}/v2.33.1/tools/neuron-explorer/environment-variables.html"
CAPTURE = f"{DOCS}/v2.33.0/tools/neuron-explorer/how-to-profile-workload.html"
EXPLORER_TROUBLESHOOTING = f"{DOCS}/v2.33.0/tools/neuron-explorer/troubleshooting.html"
LNC_PAGE = f"{DOCS}/v2.33.1/nki/get-started/about/lnc.html"

INSTANCE_ENV = "NKISIM_REHEARSAL_INSTANCE"
TOOLS_ENV = "NKISIM_REHEARSAL_NEURON_TOOLS"
PHYSICAL_CORES = 8                  # trn2.3xlarge: one Trainium2 device
DEFAULT_DEBUG_DIR = "/tmp/neuron_backend"
DEFAULT_INSPECT_OUTPUT = "./output"


class DeviceLaunchError(RuntimeError):
    """What the Neuron runtime would refuse."""


class RuntimeRefused(DeviceLaunchError):
    """The runtime could not reserve its NeuronCores: another process holds them."""


def instance_dir() -> Path:
    """The rehearsed instance of this process (made on first use; children inherit it)."""
    path = os.environ.get(INSTANCE_ENV)
    if not path:
        path = tempfile.mkdtemp(prefix="nkisim-trn2-instance-")
        os.environ[INSTANCE_ENV] = path
    Path(path).mkdir(parents=True, exist_ok=True)
    return Path(path)


def has_neuron_tools() -> bool:
    """True when the rehearsed instance has aws-neuronx-tools (a DLAMI; "0" rehearses a plain Ubuntu AMI)."""
    return os.environ.get(TOOLS_ENV, "1") not in ("0", "")


def process_lnc() -> int:
    """The LNC the runtime starts with: NEURON_LOGICAL_NC_CONFIG, trn2 default 2; "an LNC degree ... of either
    1 or 2" (LNC_PAGE)."""
    value = os.environ.get("NEURON_LOGICAL_NC_CONFIG", "2").strip()
    if value not in ("1", "2"):
        raise DeviceLaunchError(f"NEURON_LOGICAL_NC_CONFIG={value!r}: LNC can only be set to 1 or 2 on trn2 "
                                f"({LNC_PAGE}) [trn2 rehearsal]")
    return int(value)


# ---- rule 1: the runtime's NeuronCores ---------------------------------------------------------
@dataclass(frozen=True)
class Runtime:
    """What the runtime of this process read from its environment when it started."""
    cores: tuple[int, ...]              # physical NeuronCores reserved
    lnc: int
    lnc_set: bool                       # NEURON_LOGICAL_NC_CONFIG was set (else the trn2 default)
    capture: bool                       # device profiles: NEURON_RT_INSPECT_ENABLE + DEVICE_PROFILE=1/model
    output_dir: Path
    warmup: int                         # NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP
    neff_cache_env: str | None          # TORCH_NEURONX_NEFF_CACHE_DIR as the process started


_runtime: Runtime | None = None
_executions: dict[str, int] = {}


def started() -> Runtime | None:
    return _runtime


def start() -> Runtime:
    """Start this process's runtime (idempotent): read its environment and reserve its NeuronCores."""
    global _runtime
    if _runtime is not None:
        return _runtime
    lnc = process_lnc()
    cores = _reserve(_requested_cores(lnc), lnc)
    enabled = os.environ.get("NEURON_RT_INSPECT_ENABLE", "0").strip().lower() in ("1", "true")
    mode = os.environ.get("NEURON_RT_INSPECT_DEVICE_PROFILE", "0").strip().lower()
    _runtime = Runtime(
        cores=cores, lnc=lnc, lnc_set="NEURON_LOGICAL_NC_CONFIG" in os.environ,
        capture=enabled and mode in ("1", "model"),
        output_dir=Path(os.environ.get("NEURON_RT_INSPECT_OUTPUT_DIR", DEFAULT_INSPECT_OUTPUT)).resolve(),
        warmup=int(os.environ.get("NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP", "0") or 0),
        neff_cache_env=os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or None)
    return _runtime


def _requested_cores(lnc: int) -> tuple[int, ...] | int:
    """The logical cores NEURON_RT_VISIBLE_CORES names ("a single NeuronCore index or an inclusive range value",
    RUNTIME_CONFIG), or how many free ones NEURON_RT_NUM_CORES asks for ("Neuron Runtime will attempt to
    automatically reserve the number of free NeuronCores specified"; 0, its default, is "all"), at this LNC."""
    logical_count = PHYSICAL_CORES // lnc
    spec = os.environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if spec:
        first, _, last = spec.partition("-")
        try:
            logical = range(int(first), int(last or first) + 1)
        except ValueError:
            raise DeviceLaunchError(f"NEURON_RT_VISIBLE_CORES={spec!r}: expected a core index or an inclusive range "
                                    f"such as 0-1 ({RUNTIME_CONFIG}) [trn2 rehearsal]") from None
        if not logical:
            raise DeviceLaunchError(f"NEURON_RT_VISIBLE_CORES={spec!r} names no core: an inclusive range runs from "
                                    f"the lower index to the higher ({RUNTIME_CONFIG}) [trn2 rehearsal]")
        outside = [c for c in (logical.start, logical.stop - 1) if not 0 <= c < logical_count]
        if outside:
            raise DeviceLaunchError(f"NEURON_RT_VISIBLE_CORES={spec!r} names core {outside[0]}, but this trn2.3xlarge "
                                    f"has {logical_count} NeuronCores at LNC={lnc} (0-{logical_count - 1}) "
                                    "[trn2 rehearsal]")
        return tuple(logical)
    count = os.environ.get("NEURON_RT_NUM_CORES", "0").strip() or "0"
    if not count.isdigit() or int(count) > logical_count:
        raise DeviceLaunchError(f"NEURON_RT_NUM_CORES={count!r}: a count of NeuronCores from 0 (all) to "
                                f"{logical_count} at LNC={lnc} ({RUNTIME_CONFIG}) [trn2 rehearsal]")
    return int(count) or tuple(range(logical_count))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def holders() -> dict[int, tuple[int, ...]]:
    """pid -> physical cores, for every live process holding NeuronCores of this instance."""
    folder = instance_dir() / "reserved-cores"
    folder.mkdir(exist_ok=True)
    found = {}
    for entry in folder.glob("*.json"):
        pid = int(entry.stem)
        if _alive(pid):
            found[pid] = tuple(json.loads(entry.read_text())["cores"])
        else:
            entry.unlink(missing_ok=True)   # "until the process reserving that NeuronCore is terminated"
    return found


def _reserve(requested: tuple[int, ...] | int, lnc: int) -> tuple[int, ...]:
    """Reserve the named logical cores, or a count of free ones, as physical cores; returns them."""
    folder = instance_dir() / "reserved-cores"
    folder.mkdir(exist_ok=True)
    with open(instance_dir() / "reserved-cores.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        taken = {c: pid for pid, held in holders().items() if pid != os.getpid() for c in held}
        free = [c for c in range(PHYSICAL_CORES // lnc) if not set(range(c * lnc, (c + 1) * lnc)) & set(taken)]
        if isinstance(requested, int):
            wanted, logical = f"{requested}", tuple(free[:requested])
            missing = len(logical) < requested
        else:
            wanted, logical = f"nc{requested[0]}-nc{requested[-1]}", requested
            missing = not set(logical) <= set(free)
        if missing:
            asked = range(PHYSICAL_CORES // lnc) if isinstance(requested, int) else requested   # a count: any core
            holder = next(taken[p] for c in asked for p in range(c * lnc, (c + 1) * lnc) if p in taken)
            raise RuntimeRefused(
                f"ERROR NRT:nrt_allocate_neuron_cores NeuronCore(s) not available - Requested:{wanted} "
                f"Available:{len(free)}. Process {holder} holds them: the runtime reserves a process's "
                f"NeuronCores until that process ends ({RUNTIME_CONFIG}). Shut down the other process (a notebook "
                f"kernel that used the device: Kernel > Shut Down Kernel), then run this again "
                f"({RUNTIME_TROUBLESHOOTING}, 'Neuron Core is in use') [trn2 rehearsal]")
        cores = tuple(p for c in logical for p in range(c * lnc, (c + 1) * lnc))
        mine = folder / f"{os.getpid()}.json"
        mine.write_text(json.dumps({"cores": list(cores), "lnc": lnc}))
    atexit.register(mine.unlink, missing_ok=True)
    return cores


# ---- rule 2: compilation, the NEFF cache and the debug directory --------------------------------
def neff_cache_dir() -> Path:
    """TORCH_NEURONX_NEFF_CACHE_DIR, else the system default (a folder of the rehearsed instance: the
    pages read do not name the default; the capture guide's example searches /tmp/neff_cache)."""
    configured = os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR")
    return Path(configured) if configured else instance_dir() / "neff-cache"


def debug_dir() -> Path:
    return Path(os.environ.get("TORCH_NEURONX_DEBUG_DIR", DEFAULT_DEBUG_DIR))


def _fingerprint(fn: types.FunctionType, digest: Any, seen: set[int]) -> None:
    """The code of a kernel and of every function or kernel it calls by global name."""
    if id(fn) in seen:
        return
    seen.add(id(fn))
    _hash_code(fn.__code__, digest)
    for name in sorted(global_names(fn.__code__)):
        value = fn.__globals__.get(name)
        inner = getattr(value, "fn", None) or getattr(value, "__wrapped__", None) or value
        if isinstance(inner, types.FunctionType):
            _fingerprint(inner, digest, seen)


def _describe(value: Any) -> Any:
    if isinstance(value, (torch.Tensor, np.ndarray)):
        return ["tensor", list(value.shape), str(value.dtype)]
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    return repr(value)


def _hash_code(code: types.CodeType, digest: Any) -> None:
    """Bytecode, names and constants (marshal's output also depends on reference counts)."""
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames)).encode())
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            _hash_code(const, digest)
        else:
            digest.update(repr(const).encode())


def graph_key(fn: types.FunctionType, lnc: int, args: tuple, kwargs: dict) -> str:
    """The NEFF cache key: the kernel's code, its inputs' shapes and dtypes, its scalars, its LNC."""
    digest = hashlib.sha256()
    _fingerprint(fn, digest, set())
    digest.update(json.dumps([lnc, _describe(args), {k: _describe(v) for k, v in sorted(kwargs.items())}]).encode())
    return digest.hexdigest()[:15]


def _output_specs(outputs: Any) -> Any:
    if isinstance(outputs, (tuple, list)):
        return {"tuple": [_output_specs(o) for o in outputs]}
    if isinstance(outputs, (torch.Tensor, np.ndarray)):
        return {"shape": list(outputs.shape), "dtype": str(outputs.dtype).replace("torch.", ""),
                "numpy": isinstance(outputs, np.ndarray)}
    return None


def _nan_outputs(spec: Any) -> Any:
    if spec is None:
        return None
    if "tuple" in spec:
        return tuple(_nan_outputs(s) for s in spec["tuple"])
    if spec["numpy"]:
        array = np.empty(spec["shape"], dtype=spec["dtype"])
        array.fill(np.nan if array.dtype.kind == "f" else 0)
        return array
    dtype = getattr(torch, spec["dtype"])
    return torch.full(spec["shape"], float("nan") if dtype.is_floating_point else 0, dtype=dtype)


def _compile(kernel: Any, lnc: int, args: tuple, kwargs: dict, key: str, run: Any) -> dict:
    """A compilation: the NEFF (the launch's cost-model summary and output shapes) written in a job
    directory under TORCH_NEURONX_DEBUG_DIR and stored in the NEFF cache."""
    from nkisim.profile.summary import estimate

    summary = estimate(run.trace, run.sbuf_peak_bytes or None)
    neff = {"neff": key, "kernel": kernel.fn.__name__, "lnc": lnc, "outputs": _output_specs(run.outputs),
            "summary_json": summary_json_fields(summary)}
    job = debug_dir() / f"{time.strftime('%Y%m%d_%H%M%S')}_{uuid.uuid4().hex[:8]}" / "neuronx-cc" / key
    job.mkdir(parents=True)
    (job / "model.neff").write_text(json.dumps(neff))
    cache = neff_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    (cache / f"neff_{key}.neff").write_text(json.dumps(neff))
    return {"neff": neff, "job": job.parents[1]}


def execute(kernel: Any, lnc: int, args: tuple, kwargs: dict) -> Any:
    """One device launch of an nkisim Kernel on CPU-backed arguments: compile or hit the NEFF cache,
    run, capture a profile when the runtime was started for it, drop the debug files."""
    from nkisim.emulator import cores
    from nkisim.emulator.kernel import launch

    runtime = start()
    key = graph_key(kernel.fn, lnc, args, kwargs)
    cached = neff_cache_dir() / f"neff_{key}.neff"
    before = cores.last_trace()
    compiled = None
    try:
        if cached.exists():                     # the same graph with the same inputs: served from the cache
            neff = json.loads(cached.read_text())
            outputs = (_nan_outputs(neff["outputs"]) if runtime.capture
                       else launch(kernel, args, kwargs, lnc, dry_run=False).outputs)
        else:
            run = launch(kernel, args, kwargs, lnc, dry_run=runtime.capture)
            compiled = _compile(kernel, lnc, args, kwargs, key, run)
            neff, outputs = compiled["neff"], run.outputs
        if runtime.capture:
            _capture(runtime, neff)
    finally:
        cores.set_last_trace(before)            # a device run leaves no emulator trace
        if compiled is not None and os.environ.get("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "0") not in ("1", "true"):
            shutil.rmtree(compiled["job"], ignore_errors=True)
    return outputs


# ---- rule 3: device profiles --------------------------------------------------------------------
def _capture(runtime: Runtime, neff: dict) -> None:
    key = neff["neff"]
    _executions[key] = _executions.get(key, 0) + 1
    if _executions[key] != runtime.warmup + 1:           # model mode: one execution per NEFF per core
        return
    folder = runtime.output_dir / f"i-rehearsal_pid_{os.getpid()}"    # per instance and process
    folder.mkdir(parents=True, exist_ok=True)
    core = runtime.cores[0] // runtime.lnc
    (folder / f"{key}_instid_0_vnc_{core}.ntff").write_text(json.dumps(
        {"neff": key, "vnc": core, "execution": _executions[key], "summary_json": neff["summary_json"]}))
    if runtime.neff_cache_env:
        (folder / f"neff_{key}.neff").write_text(json.dumps(neff))


REHEARSAL_NOTE = ("trn2 rehearsal (NKISIM_REHEARSE_TRN2=1): synthesised from the trn2 cost model by the "
                  "neuron-explorer stand-in; nothing ran on Trainium")


def summary_json_fields(summary: Any) -> dict[str, Any]:
    """A ProfileSummary (an estimate: its total_time is the instructions' span) as the fields of a
    `neuron-explorer view --output-format summary-json` summary, which spans the whole launch: the estimate's
    `with_launch_setup()` (total_exec_time the span, total_time with the setup of the kernel's LNC, the setup's DMA
    in dma_active_time, MBU a share of total_time). Its `*_percent` fields are shares of 1, as in a published
    LNC=1 summary: total_active_time_percent 0.7575 = total_active_time 16.91 µs / total_time 22.32 µs."""
    launch = summary.with_launch_setup()
    fields: dict[str, Any] = {"kernel_name": launch.kernel, "total_time": launch.total_time,
                              "total_exec_time": launch.total_exec_time, "dma_active_time": launch.dma_active_time,
                              "hbm_read_bytes": launch.hbm_read_bytes, "hbm_write_bytes": launch.hbm_write_bytes,
                              "dma_transfer_count": launch.dma_transfer_count,
                              "dma_transfer_total_bytes": launch.dma_transfer_total_bytes,
                              "mbu_estimated_percent": launch.mbu_estimated_percent / 100.0,   # a share of 1
                              "rehearsal": REHEARSAL_NOTE}
    # A DMA counts as an instruction of the engine whose queue issues it: on trn2 (SDK 2.32) four transfers moved
    # from the GpSimd count to the Sync count when they changed from software to hardware DGE. A transfer of
    # prebuilt descriptors (dge_mode.none) has no issuing queue here and is not counted.
    issuing = {lane: queue for queue, lane in DMA_QUEUE_LANES.items() if queue != NO_QUEUE}
    triggers = Counter(issuing[s.lane] for s in summary.timeline.slots if s.engine == DMA and s.lane in issuing)
    for engine in sorted({*summary.engine_active_time, *triggers}):
        fields[f"{engine.lower()}_engine_active_time"] = summary.engine_active_time.get(engine, 0.0)
        fields[f"{engine.lower()}_engine_instruction_count"] = triggers[engine] + sum(
            n for (e, _), n in summary.instruction_counts.items() if e == engine)
    activates = sum(n for (_, op), n in summary.instruction_counts.items() if op == "ACTIVATE")
    if activates:
        fields["activate_instruction_count"] = activates
        fields["activate_instruction_time"] = summary.opcode_time("ACTIVATE")
    return fields
