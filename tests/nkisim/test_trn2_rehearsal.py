"""The trn2 rehearsal (NKISIM_REHEARSE_TRN2=1, nkisim/trn2_rehearsal.py) behaves as the device would.

The rehearsal changes process-wide state (torch's PrivateUse1 backend becomes `neuron`), so each
scenario runs in a child process; the scenarios print what they found and the tests read it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import json, os
import numpy as np
import torch
import nkisim
nkisim.install()
import nki, nki.isa as nisa, nki.language as nl
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
"""


def _scenario(tmp_path: Path, code: str, lnc: str | None = "1") -> dict:
    env = dict(os.environ, NKISIM_REHEARSE_TRN2="1", PYTHONPATH=str(ROOT))
    env.pop("NEURON_LOGICAL_NC_CONFIG", None)
    env.pop("NKISIM_REHEARSAL_LOG", None)
    if lnc is not None:
        env["NEURON_LOGICAL_NC_CONFIG"] = lnc
    script = PRELUDE + textwrap.dedent(code) + "\nprint('FOUND', json.dumps(found))\n"
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True)
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
        """)
    assert found["backend"][0] == "trn2" and "REHEARSAL" in found["backend"][1]
    assert found["device"] == "neuron:0"
    assert found["back_on_cpu"] == ["cpu", "Tensor"]
    assert "Expected all tensors to be on the same device" in found["mixed"]
    assert found["scalar_ok"] == "neuron:0"
    assert found["launch"] == ["neuron:0", True]
    assert found["trace_after_device_run"] is True
    assert "launched as kernel[2] in a process whose NEURON_LOGICAL_NC_CONFIG is 1" in found["wrong_degree"]
    assert "a torch tensor on cpu" in found["cpu_tensor"]
    assert found["numpy"] == [2.0, 2.0]
    assert found["emulator_trace_lnc"] == 2


def test_the_default_lnc_is_the_trn2_default(tmp_path: Path) -> None:
    found = _scenario(tmp_path, """
        found["plain_call"] = error_of(lambda: double(np.ones((128, 8), dtype=np.float32)))
        """, lnc=None)
    assert "NEURON_LOGICAL_NC_CONFIG is 2 (unset: the trn2 default)" in found["plain_call"]


def test_profile_takes_the_hardware_branch_through_the_explorer_stand_in(tmp_path: Path) -> None:
    found = _scenario(tmp_path, """
        x = torch.randn(128, 64)
        s = nkisim.profile(double, x)
        model = nkisim.profile_model(double, x)
        found["model"] = [model.source, model.timeline is not None]
        found["summary"] = [s.source, s.timeline is None, s.total_time == model.total_time,
                            s.hbm_read_bytes == model.hbm_read_bytes]
        found["commands"] = [c[:2] for c in rehearsal.recorded_commands()]
        found["capture"] = [c for c in rehearsal.recorded_commands() if c[1] == "capture"][0]
        two = nkisim.profile(double, x, lnc=2)           # another LNC: a child process
        found["child"] = [two.source, two.lnc, any("child process" in n for n in two.notes)]
        """)
    assert found["model"] == ["trn2 cost model (estimate)", True]
    assert found["summary"] == ["trn2 rehearsal: cost model (estimate), not measured", True, True, True]
    assert found["commands"][:2] == [["neuron-explorer", "capture"], ["neuron-explorer", "view"]]
    assert "--profile-nth-exec=2" in found["capture"] and found["capture"][2] == "-n"
    assert found["child"] == ["trn2 rehearsal: cost model (estimate), not measured", 2, True]


def test_the_explorer_stand_in_refuses_what_it_does_not_rehearse(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NKISIM_REHEARSAL_LOG=str(tmp_path / "log"))
    standin = ROOT / "nkisim" / "neuron_explorer_standin.py"
    done = subprocess.run([sys.executable, str(standin), "view", "-n", "x.neff", "-s", "x.ntff", "--output-format",
                           "json"], env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "only `capture` and `view --output-format summary-json`" in done.stderr
    assert json.loads((tmp_path / "log").read_text())[:2] == ["neuron-explorer", "view"]


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
