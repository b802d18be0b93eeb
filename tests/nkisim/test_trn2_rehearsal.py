"""The trn2 rehearsal (NKISIM_REHEARSE_TRN2=1) behaves as the documented SDK, device and runtime do.

Each runtime rule of nkisim/rehearsal_runtime.py has a test here that shows the stand-in refusing
what the real runtime refuses (its page is cited in the module). The rehearsal changes process-wide
state (torch's PrivateUse1 backend becomes `neuron`, the runtime reserves cores), so each scenario
runs in a child process of its own, on a rehearsed instance in the test's tmp_path; the scenarios
print what they found and the tests read it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nkisim.costmodel import constants as K

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import json, os, subprocess, sys
from pathlib import Path
import numpy as np
import torch
import nkisim
nkisim.install()
import nki, nki.isa as nisa, nki.language as nl
from nkisim import rehearsal_runtime as runtime
from nkisim import trn2_rehearsal as rehearsal

@nki.jit
def double(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(axes=0)
    r0 = nl.program_id(0) * rows
    t = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r0:r0 + rows], name="load")
    nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, name="add")
    nisa.dma_copy(dst=out[r0:r0 + rows], src=t, name="store")
    return out

found = {}
def error_of(call):
    try:
        call()
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return None

def files(folder, pattern):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob(pattern)) if Path(folder).exists() else []

def in_new_process(code, **env):
    # another process on the same instance (it inherits NKISIM_REHEARSAL_INSTANCE)
    done = subprocess.run([sys.executable, "-c", PRELUDE_TEXT + code], env={**os.environ, **env},
                          capture_output=True, text=True)
    return done.returncode, done.stdout + done.stderr
"""


def _env(tmp_path: Path, lnc: str | None, extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NEURON_", "TORCH_NEURONX_", "NKISIM_"))}
    env.update(NKISIM_REHEARSE_TRN2="1", PYTHONPATH=str(ROOT), NKISIM_REHEARSAL_INSTANCE=str(tmp_path / "instance"),
               XDG_CACHE_HOME=str(tmp_path / "cache"), TORCH_NEURONX_DEBUG_DIR=str(tmp_path / "neuron_backend"),
               TMPDIR=str(tmp_path))
    if lnc is not None:
        env["NEURON_LOGICAL_NC_CONFIG"] = lnc
    env.update(extra)
    return env


def _scenario(tmp_path: Path, code: str, lnc: str | None = "1", **extra: str) -> dict:
    work = tmp_path / "work"
    work.mkdir(parents=True, exist_ok=True)
    prelude = PRELUDE.replace("PRELUDE_TEXT", repr(PRELUDE.split("found = {}")[0]))
    # After the atexit handlers, the script leaves without finalizing the interpreter: an autograd device thread
    # still releasing a finished backward's objects can then meet a finalizing interpreter and abort the process
    # ("terminate called without an active exception", pytorch/pytorch#38228), after every check has run.
    script = prelude + textwrap.dedent(code) + (
        "\nprint('FOUND', json.dumps(found), flush=True)\nimport atexit\natexit._run_exitfuncs()\n"
        "sys.stderr.flush()\nos._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=work, env=_env(tmp_path, lnc, extra),
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-4000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("FOUND "))
    return json.loads(line[len("FOUND "):])


def test_backend_device_and_device_launches(tmp_path: Path) -> None:
    found = _scenario(tmp_path, """
        b = nkisim.backend()
        found["backend"] = [b.name, b.reason]
        x = torch.randn(128, 8).to("neuron")
        found["device"] = str(x.device)
        found["back_on_cpu"] = [str(x.cpu().device), type(x.cpu()).__name__]
        found["mixed"] = error_of(lambda: x + torch.ones(128, 8))
        found["scalar_ok"] = str((x * torch.tensor(2.0)).device)
        y = double(x)                                   # a device launch at LNC 1
        found["launch"] = [str(y.device), bool(torch.equal(y.cpu(), 2 * x.cpu()))]
        found["trace_after_device_run"] = nkisim.last_trace() is None
        found["wrong_degree"] = error_of(lambda: double[2](x))
        found["cpu_tensor"] = error_of(lambda: double(torch.ones(128, 8)))
        a = np.ones((128, 8), dtype=np.float32)
        found["numpy"] = double(a).tolist()[0][:2]
        nkisim.run(double, torch.ones(128, 8), lnc=2)   # the emulator beside the device: any LNC
        found["emulator_trace_lnc"] = nkisim.last_trace().lnc
        # nki.simulate "executes the kernel on CPU" (its page): CPU tensors, any LNC, no device launch
        simulated = [nki.simulate(double)(torch.ones(128, 8)), nki.simulate(double[2])(torch.ones(128, 8))]
        found["simulated"] = [[str(t.device), t[0, 0].item()] for t in simulated]
        """)
    assert found["backend"][0] == "trn2" and "REHEARSAL" in found["backend"][1]
    assert found["device"] == "neuron:0"
    assert found["back_on_cpu"] == ["cpu", "Tensor"]
    assert "Expected all tensors to be on the same device" in found["mixed"]
    assert found["scalar_ok"] == "neuron:0"
    assert found["launch"] == ["neuron:0", True]
    assert found["trace_after_device_run"] is True
    # NKI 0.7 compiles the kernel at neuronx-cc's LNC, which NEURON_LOGICAL_NC_CONFIG sets (EVRF066)
    assert "NCC_EVRF066 NKI kernel 'double' is configured with LNC=2, but neuronx-cc is using LNC=1" in \
        found["wrong_degree"]
    assert "a torch tensor on cpu" in found["cpu_tensor"]
    assert found["numpy"] == [2.0, 2.0]
    assert found["emulator_trace_lnc"] == 2
    assert found["simulated"] == [["cpu", 2.0], ["cpu", 2.0]]


def test_the_default_lnc_is_the_trn2_default(tmp_path: Path) -> None:
    found = _scenario(tmp_path, """
        found["plain_call"] = error_of(lambda: double(np.ones((128, 8), dtype=np.float32)))
        """, lnc=None)
    assert "runtime started at NEURON_LOGICAL_NC_CONFIG=2 (unset: the trn2 default)" in found["plain_call"]


# ---- rule 1: the runtime reserves a process's NeuronCores --------------------------------------------
def test_a_process_gets_no_neuroncore_while_another_holds_it(tmp_path: Path) -> None:
    """"Once a NeuronCore is reserved for a process, it cannot be used by another process at all, until
    the process reserving that NeuronCore is terminated" (runtime configuration guide, 2.33)."""
    found = _scenario(tmp_path, """
        launch = "double(np.ones((128, 8), dtype=np.float32))"
        found["before"] = [in_new_process(launch)[0], in_new_process(launch)[0]]   # each frees them as it ends
        torch.ones(2).to("neuron")                               # this process starts its runtime: all cores
        found["holders"] = {str(k): list(v) for k, v in runtime.holders().items()}
        found["second"] = in_new_process(launch)
        found["profile_here"] = error_of(lambda: nkisim.profile(double, torch.ones(128, 8), lnc=2))
        """)
    assert found["before"] == [0, 0]
    assert list(found["holders"].values()) == [list(range(8))]      # trn2.3xlarge: all 8 physical cores
    code, output = found["second"]
    assert code != 0 and "NeuronCore(s) not available - Requested:nc0-nc7 Available:0" in output
    assert "DeviceProcessError: double at LNC=2: its process got no NeuronCore" in found["profile_here"]
    assert "Shut Down Kernel" in found["profile_here"]


def test_visible_cores_partition_an_instance_between_processes(tmp_path: Path) -> None:
    """NEURON_RT_VISIBLE_CORES: each process reserves only the cores it names (runtime configuration guide)."""
    found = _scenario(tmp_path, """
        torch.ones(2).to("neuron")                               # this process: logical core 0 only
        launch = "double(np.ones((128, 8), dtype=np.float32))"
        found["other_core"] = in_new_process(launch, NEURON_RT_VISIBLE_CORES="1-3")[0]
        found["same_core"] = in_new_process(launch, NEURON_RT_VISIBLE_CORES="0")
        found["no_such_core"] = in_new_process(launch, NEURON_RT_VISIBLE_CORES="8")[1]
        """, NEURON_RT_VISIBLE_CORES="0")
    assert found["other_core"] == 0
    assert found["same_core"][0] != 0 and "NeuronCore(s) not available" in found["same_core"][1]
    assert "names core 8, but this trn2.3xlarge has 8 NeuronCores at LNC=1 (0-7)" in found["no_such_core"]


def test_num_cores_reserves_that_many_free_cores(tmp_path: Path) -> None:
    """NEURON_RT_NUM_CORES: "Neuron Runtime will attempt to automatically reserve the number of free NeuronCores
    specified for the process" (runtime configuration guide, 2.33); VISIBLE_CORES names one index or an inclusive
    range."""
    found = _scenario(tmp_path, """
        torch.ones(2).to("neuron")                               # this process: one core
        launch = "double(np.ones((128, 8), dtype=np.float32))"
        found["mine"] = runtime.started().cores
        found["another_one"] = in_new_process(launch, NEURON_RT_NUM_CORES="1")[0]
        found["all_the_rest"] = in_new_process(launch, NEURON_RT_NUM_CORES="7")[0]
        found["one_too_many"] = in_new_process(launch, NEURON_RT_NUM_CORES="8")[1]
        found["too_many"] = in_new_process(launch, NEURON_RT_NUM_CORES="9")[1]
        found["reversed"] = in_new_process(launch, NEURON_RT_VISIBLE_CORES="3-1")[1]
        found["list"] = in_new_process(launch, NEURON_RT_VISIBLE_CORES="1,2")[1]
        """, NEURON_RT_NUM_CORES="1")
    assert found["mine"] == [0] and found["another_one"] == 0 and found["all_the_rest"] == 0
    assert "NeuronCore(s) not available - Requested:8 Available:7" in found["one_too_many"]
    assert "NEURON_RT_NUM_CORES='9': a count of NeuronCores from 0 (all) to 8 at LNC=1" in found["too_many"]
    assert "NEURON_RT_VISIBLE_CORES='3-1' names no core" in found["reversed"]
    assert "NEURON_RT_VISIBLE_CORES='1,2': expected a core index or an inclusive range" in found["list"]


@pytest.mark.parametrize("value", ["4", "0", "two"])
def test_the_runtime_starts_only_at_lnc_1_or_2(tmp_path: Path, value: str) -> None:
    """"LNC can only be set to 1 or 2" (the LNC pages): a runtime asked for another degree does not start."""
    found = _scenario(tmp_path, """
        found["start"] = error_of(lambda: torch.ones(2).to("neuron"))
        """, lnc=value)
    assert f"NEURON_LOGICAL_NC_CONFIG='{value}': LNC can only be set to 1 or 2 on trn2" in found["start"]


def test_the_runtime_keeps_the_lnc_it_started_with(tmp_path: Path) -> None:
    """The runtime reads its settings "before the workload starts": a later NEURON_LOGICAL_NC_CONFIG changes the
    compiler's LNC (EVRF066 for kernel[1]), but an LNC-2 NEFF still cannot load on the runtime started at LNC 1."""
    found = _scenario(tmp_path, """
        x = torch.ones(128, 8).to("neuron")                      # the runtime starts at LNC 1
        os.environ["NEURON_LOGICAL_NC_CONFIG"] = "2"
        found["two"] = error_of(lambda: double[2](x))
        found["one"] = error_of(lambda: double[1](x))
        """)
    assert "launched as kernel[2] in a process whose runtime started at NEURON_LOGICAL_NC_CONFIG=1" in found["two"]
    assert "NCC_EVRF066" in found["one"]


# ---- rule 2: NEFFs live where TorchNeuron puts them, and the NEFF cache ---------------------------------
def test_neffs_appear_only_under_the_debug_dir_and_vanish_unless_preserved(tmp_path: Path) -> None:
    """TORCH_NEURONX_DEBUG_DIR holds the compilation artifacts, kept after execution only with
    TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1; NEURON_FRAMEWORK_DEBUG (the PyTorch/XLA path) saves
    nothing in the working directory."""
    found = _scenario(tmp_path, """
        os.environ["NEURON_FRAMEWORK_DEBUG"] = "1"
        double(np.ones((128, 8), dtype=np.float32))
        debug = os.environ["TORCH_NEURONX_DEBUG_DIR"]
        found["cwd"] = files(".", "*.neff")
        found["debug"] = files(debug, "*.neff")
        found["cache"] = files(runtime.neff_cache_dir(), "*.neff")
        os.environ["TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"] = "1"
        double(np.ones((128, 16), dtype=np.float32))             # a new shape: a new compilation, kept
        found["preserved"] = files(debug, "*.neff")
        """)
    assert found["cwd"] == [] and found["debug"] == []
    assert len(found["cache"]) == 1
    assert len(found["preserved"]) == 1 and found["preserved"][0].endswith("model.neff")


def test_an_unchanged_kernel_is_served_from_the_neff_cache(tmp_path: Path) -> None:
    """Compiled NEFFs go to the persistent NEFF cache and later calls with the same inputs reuse them:
    no compilation, no new NEFF, in this process or the next; a changed kernel compiles again."""
    found = _scenario(tmp_path, """
        os.environ["TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"] = "1"
        debug = os.environ["TORCH_NEURONX_DEBUG_DIR"]
        a = np.ones((128, 8), dtype=np.float32)
        double(a)
        found["first"] = [len(files(debug, "*.neff")), len(files(runtime.neff_cache_dir(), "*.neff"))]
        double(a * 3)                                            # same shapes, other values: the same graph
        found["again"] = [len(files(debug, "*.neff")), len(files(runtime.neff_cache_dir(), "*.neff"))]

        @nki.jit
        def double(x):                                           # the same name, another body
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
            nisa.dma_copy(dst=out, src=t)
            return out

        double(a)
        found["changed"] = [len(files(debug, "*.neff")), len(files(runtime.neff_cache_dir(), "*.neff"))]
        """)
    assert found["first"] == [1, 1]
    assert found["again"] == [1, 1]
    assert found["changed"] == [2, 2]
    found = _scenario(tmp_path, """
        os.environ["TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"] = "1"
        double(np.ones((128, 8), dtype=np.float32))              # the first kernel again, in a new process
        found["next_process"] = len(files(os.environ["TORCH_NEURONX_DEBUG_DIR"], "*.neff"))
        """)
    assert found["next_process"] == 2                             # nothing compiled


# ---- rule 3: device profiles need the inspect variables before the runtime starts ------------------------
def test_profile_output_appears_only_when_the_inspect_variables_came_first(tmp_path: Path) -> None:
    """NEURON_RT_* variables are read at run time: "Set them before the workload starts" (Neuron Explorer
    environment variables, 2.33.1). Setting them in a process whose runtime runs captures nothing."""
    inspect = {"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_DEVICE_PROFILE": "1"}
    late = _scenario(tmp_path, f"""
        a = np.ones((128, 8), dtype=np.float32)
        double(a)                                                # the runtime starts without them
        os.environ.update({inspect!r})
        os.environ["NEURON_RT_INSPECT_OUTPUT_DIR"] = "late"
        double(a); double(a * 2)
        found["late"] = files("late", "*")
        """)
    assert late["late"] == []
    early = _scenario(tmp_path, """
        a = np.ones((128, 8), dtype=np.float32)
        double(a)
        found["after_warmup"] = files("early", "*.ntff")        # NUM_WARMUP=1: the first run is skipped
        double(a); double(a)
        found["ntff"] = files("early", "*.ntff")
        found["neff"] = files("early", "*.neff")
        found["values"] = bool(np.isnan(double(a)).all())        # a capture process computes no values
        """, **inspect, NEURON_RT_INSPECT_OUTPUT_DIR="early", NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP="1")
    assert early["after_warmup"] == []
    assert len(early["ntff"]) == 1 and "_pid_" in early["ntff"][0]     # one per NEFF per core, per process
    assert early["neff"] == []                # without TORCH_NEURONX_NEFF_CACHE_DIR the NEFF stays in the cache
    assert early["values"] is True
    with_cache = _scenario(tmp_path, """
        a = np.ones((128, 8), dtype=np.float32)
        double(a)
        found["neff"] = files("out", "*.neff")
        """, **inspect, NEURON_RT_INSPECT_OUTPUT_DIR="out", TORCH_NEURONX_NEFF_CACHE_DIR=str(tmp_path / "neffs"))
    assert len(with_cache["neff"]) == 1


def test_profile_captures_each_lnc_in_a_process_of_its_own(tmp_path: Path) -> None:
    """nkisim.profile at LNC=1 and LNC=2 from one process that never starts the runtime itself."""
    found = _scenario(tmp_path, """
        x = torch.randn(128, 64)
        one, two = nkisim.profile(double, x), nkisim.profile(double, x, lnc=2)
        model = nkisim.profile_model(double, x)
        found["summaries"] = [[s.source, s.lnc, s.timeline is None] for s in (one, two)]
        found["same_as_model"] = [one.total_exec_time == model.total_time, one.hbm_read_bytes == model.hbm_read_bytes]
        found["setup_us"] = [(s.total_time - s.total_exec_time) * 1e6 for s in (one, two)]
        found["dma_share"] = [one.dma_active_time_percent, 100 * model.dma_active_time / one.total_time]
        found["setup_dma_us"] = (one.dma_active_time - model.dma_active_time) * 1e6
        found["mbu"] = [one.mbu_estimated_percent, model.mbu_estimated_percent * model.total_time / one.total_time]
        found["total_us"] = one.total_time * 1e6
        found["runtime_here"] = runtime.started() is None
        found["commands"] = [[c[1], c[2], c[4:]] for c in rehearsal.recorded_commands()]
        found["notes"] = [n for n in two.notes if "process of its own" in n]
        found["again"] = nkisim.profile(double, x).total_time == one.total_time   # from the NEFF cache
        """)
    assert found["summaries"] == [["trn2 rehearsal: cost model (estimate), not measured", 1, True],
                                  ["trn2 rehearsal: cost model (estimate), not measured", 2, True]]
    assert found["same_as_model"] == [True, True]
    # Explorer's total_time holds the launch setup, its total_exec_time is the span the model estimates, and its
    # percentages are shares of total_time (nkisim/rehearsal_runtime.summary_json_fields); the setup is the LNC's,
    # and its own DMA counts in dma_active_time (the schema's "at least one DMA packet", setup packets included)
    assert found["setup_us"] == pytest.approx([K.launch_preamble_s(1) * 1e6, K.launch_preamble_s(2) * 1e6])
    assert found["setup_dma_us"] == pytest.approx(K.LAUNCH_SETUP_DMA_S * 1e6)
    setup_dma_share = 100 * found["setup_dma_us"] / found["total_us"]
    assert found["dma_share"][0] == pytest.approx(found["dma_share"][1] + setup_dma_share)
    # summary-json stores MBU as a share of 1 (under 1% here): read back, it is the model's bytes over total_time
    assert found["mbu"][0] < 1 and found["mbu"][0] == pytest.approx(found["mbu"][1])
    assert found["runtime_here"] is True
    assert [c[0:2] for c in found["commands"]] == [["view", "-d"], ["view", "-d"]]
    assert found["commands"][0][2] == ["--output-format", "summary-json"]
    assert "NEURON_LOGICAL_NC_CONFIG=2" in found["notes"][0]
    assert found["again"] is True


def test_the_stand_in_summary_counts_a_dma_on_its_issuing_engine() -> None:
    """A published trn2 summary-json (SDK 2.32) counts a DMA as an instruction of its issuing queue's engine (four
    transfers moved from the GpSimd count to the Sync count when they changed to hardware DGE); prebuilt-descriptor
    transfers have no issuing queue here."""
    import nki
    import nki.isa as nisa
    import nki.language as nl
    import numpy as np

    import nkisim
    from nkisim import rehearsal_runtime

    @nki.jit
    def moves(x, mode):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, dge_mode=mode)
        nisa.activation(dst=t, op=nl.exp, data=t)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t, dge_mode=mode)
        return out

    x = np.ones((128, 64), np.float32)
    counts = {}
    for mode in (nisa.dge_mode.swdge, nisa.dge_mode.hwdge, nisa.dge_mode.none):
        fields = rehearsal_runtime.summary_json_fields(nkisim.profile_model(moves, x, mode))
        counts[mode._name_] = [fields.get(f"{e}_engine_instruction_count", 0) for e in ("gpsimd", "sync", "scalar")]
    assert counts["swdge"][0] == 2 and counts["hwdge"][0] == 0 and counts["none"] == [0, 0, 1]
    assert sum(counts["hwdge"]) == 3           # the two transfers on hardware-DGE queues, and the activation


def test_the_setup_check_leaves_no_runtime_in_the_notebook(tmp_path: Path) -> None:
    found = _scenario(tmp_path, """
        import kernels
        report = kernels.check_setup(verbose=False)
        found["checks"] = {c.name: c.ok for c in report.checks if c.required}
        found["profile"] = next(c.detail for c in report.checks if c.name == "profile")
        found["runtime_here"] = runtime.started() is None
        found["holders"] = len(runtime.holders())
        """)
    assert all(found["checks"].values()), found
    assert "trn2 rehearsal" in found["profile"]
    assert found["runtime_here"] is True and found["holders"] == 0


# ---- rule 4: neuron-explorer comes with aws-neuronx-tools ----------------------------------------------
def test_neuron_explorer_exists_only_where_aws_neuronx_tools_is_installed(tmp_path: Path) -> None:
    code = """
        import shutil
        found["which"] = shutil.which("neuron-explorer")
        found["profile"] = error_of(lambda: nkisim.profile(double, torch.ones(128, 8)))
        """
    with_tools = _scenario(tmp_path, code)
    assert with_tools["which"].endswith("opt/aws/neuron/bin/neuron-explorer") and with_tools["profile"] is None
    plain_ubuntu = _scenario(tmp_path / "plain", code, NKISIM_REHEARSAL_NEURON_TOOLS="0")
    assert plain_ubuntu["which"] is None
    assert "neuron-explorer not found: it comes with aws-neuronx-tools" in plain_ubuntu["profile"]
    assert "export PATH=/opt/aws/neuron/bin:$PATH" in plain_ubuntu["profile"]


def test_the_explorer_stand_in_needs_each_ntffs_own_neff(tmp_path: Path) -> None:
    standin = ROOT / "nkisim" / "neuron_explorer_standin.py"
    env = dict(os.environ, NKISIM_REHEARSAL_LOG=str(tmp_path / "log"))
    (tmp_path / "a_instid_0_vnc_0.ntff").write_text(json.dumps({"neff": "a", "summary_json": {"total_time": 1.0}}))
    (tmp_path / "neff_b.neff").write_text(json.dumps({"neff": "b"}))
    view = [sys.executable, str(standin), "view", "--output-format", "summary-json"]
    alone = subprocess.run(view + ["-d", str(tmp_path)], env=env, capture_output=True, text=True)
    assert alone.returncode == 1 and "no matching NEFF" in alone.stderr
    mismatch = subprocess.run(view + ["-n", str(tmp_path / "neff_b.neff"), "-s", str(tmp_path / "a_instid_0_vnc_0.ntff")],
                              env=env, capture_output=True, text=True)
    assert mismatch.returncode == 1 and "UUID mismatch" in mismatch.stderr
    (tmp_path / "neff_a.neff").write_text(json.dumps({"neff": "a"}))
    paired = subprocess.run(view + ["-d", str(tmp_path)], env=env, capture_output=True, text=True)
    assert paired.returncode == 0 and json.loads(paired.stdout) == {"a_instid_0_vnc_0": {"total_time": 1.0}}
    other = subprocess.run([sys.executable, str(standin), "capture", "-n", "x.neff"], env=env,
                           capture_output=True, text=True)
    assert other.returncode == 2 and "only `view --output-format summary-json`" in other.stderr
    assert [json.loads(line)[1] for line in (tmp_path / "log").read_text().splitlines()] == ["view"] * 3 + ["capture"]


def test_kernels_torch_ops_on_the_neuron_device(tmp_path: Path) -> None:
    found = _scenario(tmp_path, """
        import kernels
        from kernels import reference
        x = torch.randn(4, 300)
        y = kernels.gelu_erf(x.to("neuron"))
        found["gelu"] = [str(y.device), float((y.cpu() - reference.gelu_exact(x)).abs().max())]
        found["trace"] = nkisim.last_trace() is None     # the op's launch was a device run
        """)
    assert found["gelu"][0] == "neuron:0" and found["gelu"][1] < 1e-5
    assert found["trace"] is True


def test_a_kernel_op_compiles_as_the_torchneuron_pages_show(tmp_path: Path) -> None:
    """An nki_op whose body launches the kernel, as the TorchNeuron quickstart writes it, runs eagerly and under
    torch.compile(backend="neuron", fullgraph=True) with the same result: tracing passes fake tensors through
    the kernel for their shapes instead of refusing them as CPU tensors."""
    found = _scenario(tmp_path, """
        from torch_neuronx import nki_op

        @nki_op("rehearsal::double", mutates_args={})
        def double_op(x: torch.Tensor) -> torch.Tensor:
            return double(x)

        x = torch.randn(4, 8).to("neuron")
        compiled = torch.compile(lambda t: double_op(t) + 1, backend="neuron", fullgraph=True)(x)
        found["compiled"] = [str(compiled.device), float((compiled.cpu() - (2 * x.cpu() + 1)).abs().max())]
        """)
    assert found["compiled"][0] == "neuron:0" and found["compiled"][1] == 0.0


def test_a_bare_kernel_call_is_one_graph_node_on_the_neuron_device(tmp_path: Path) -> None:
    """TorchNeuron's how-to: inside torch.compile(backend="neuron") "The kernel call becomes one node in the
    captured graph"; the node is a device run of the graph's data."""
    found = _scenario(tmp_path, """
        x = torch.randn(4, 8).to("neuron")
        f = lambda t: double(t) + 1
        explain = torch._dynamo.explain(f)(x)
        compiled = torch.compile(f, backend="neuron", fullgraph=True)(x)
        found["compiled"] = [explain.graph_count, explain.graph_break_count, str(compiled.device),
                             float((compiled.cpu() - (2 * x.cpu() + 1)).abs().max())]
        """)
    assert found["compiled"] == [1, 0, "neuron:0", 0.0]


def test_torch_compile_takes_the_neuron_backends_arguments(tmp_path: Path) -> None:
    """The torch.compile backend reference (TorchNeuron): `neuron` is "auto-selected when running on a Neuron
    device"; modes other than 'default' "log a warning and fall back to default"; options "Accepts a dict or None";
    "dynamic=True is rejected during compilation"."""
    found = _scenario(tmp_path, """
        import warnings
        x = torch.randn(4, 8).to("neuron")
        f = lambda t: double(t) + 1
        want = 2 * x.cpu() + 1
        found["no_backend"] = float((torch.compile(f, fullgraph=True)(x).cpu() - want).abs().max())
        torch._dynamo.reset()
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            moded = torch.compile(f, backend="neuron", mode="max-autotune")(x)
        found["mode"] = [float((moded.cpu() - want).abs().max()), [str(w.message) for w in seen]]
        torch._dynamo.reset()
        optioned = torch.compile(f, backend="neuron", options={"fallback_execution": True})(x)
        found["options"] = float((optioned.cpu() - want).abs().max())
        torch._dynamo.reset()
        found["dynamic"] = error_of(lambda: torch.compile(f, backend="neuron", dynamic=True)(x))
        """)
    assert found["no_backend"] == 0.0 and found["options"] == 0.0
    assert found["mode"][0] == 0.0
    assert any("mode='max-autotune' has no effect, compiling in the default mode" in m for m in found["mode"][1])
    assert "the neuron backend rejects dynamic=True" in found["dynamic"]


def test_standard_pytorch_runs_on_the_neuron_device(tmp_path: Path) -> None:
    """What is TorchNeuron?: "a model written in standard PyTorch runs on it by setting the device to neuron; code
    written against torch.accelerator needs no change"; the TorchNeuron index: "Mixed precision: Use
    torch.autocast(device_type="neuron")". Autocast follows PyTorch's autocast op reference (matmuls in the
    autocast dtype, softmax and layer_norm in float32, the rest in their inputs' dtype)."""
    found = _scenario(tmp_path, """
        x = torch.randn(4, 3)
        n = x.to("neuron")
        made = torch.tensor([1.0, 2.0], device="neuron")
        found["made"] = [str(made.device), made.cpu().tolist(), str(n.new_tensor([3.0]).device)]
        found["tolist"] = n.tolist() == x.tolist()
        found["numpy"] = error_of(n.numpy)
        found["ordinal"] = [error_of(lambda: torch.ones(2, device="neuron:1")), error_of(lambda: x.to("neuron:1")),
                            str(x.to("neuron:0").device)]
        found["sync"] = [error_of(torch.accelerator.synchronize), error_of(torch.neuron.synchronize),
                         torch.neuron.device_count()]
        draws = []
        for _ in range(2):
            torch.neuron.manual_seed(7)
            draws.append(torch.randn(3, device="neuron").cpu().tolist())
        found["seeded"] = draws[0] == draws[1]
        w = torch.randn(2, 3).to("neuron")
        with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
            mm, lin = n @ n.T, torch.nn.functional.linear(n, w)
            soft = torch.softmax(n.bfloat16(), -1)
            added, on_cpu = n + n, x @ x.T
        found["autocast"] = [str(t.dtype) for t in (mm, lin, soft, added, on_cpu)] + [str(mm.device)]
        found["autocast_values"] = float((mm.cpu().float() - x @ x.T).abs().max())
        model = torch.nn.Linear(3, 2).to("neuron")
        with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
            loss = model(n).float().pow(2).mean()
        loss.backward()
        found["backward"] = [str(model.weight.grad.dtype), str(model.weight.grad.device)]
        """)
    assert found["made"] == ["neuron:0", [1.0, 2.0], "neuron:0"]
    assert found["tolist"] is True
    assert "can't convert neuron:0 device type tensor to numpy. Use Tensor.cpu()" in found["numpy"]
    assert all("invalid device ordinal" in e for e in found["ordinal"][:2]) and found["ordinal"][2] == "neuron:0"
    assert found["sync"] == [None, None, 1]
    assert found["seeded"] is True
    assert found["autocast"] == ["torch.bfloat16", "torch.bfloat16", "torch.float32", "torch.float32",
                                 "torch.float32", "neuron:0"]
    assert 0 < found["autocast_values"] < 0.1    # bf16 rounding, not another result
    assert found["backward"] == ["torch.float32", "neuron:0"]


def test_ci_runs_the_rehearsal_after_the_tests() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci.index("make rehearse-trn2") > ci.index("make test")
    assert "rehearse-trn2:" in (ROOT / "Makefile").read_text()
    assert "`make rehearse-trn2`" in (ROOT / "README.md").read_text()


def test_the_emulator_path_is_untouched() -> None:
    import torch

    import nkisim

    assert nkisim.backend().name == "nkisim"
    assert torch._C._get_privateuse1_backend_name() != "neuron"   # no rehearsal without the variable
