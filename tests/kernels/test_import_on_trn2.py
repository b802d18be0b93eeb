"""`import kernels` on a trn2 machine, with and without torch_neuronx (import stand-ins).

The Neuron SDK is stood in by a minimal `nki` package (isa and language submodules, a recording
`jit`); torch_neuronx, when present, by a module whose `nki_op` records what it registers. Since
Neuron SDK 2.32 `nki` and `torch-neuronx` ship separately (requirements-trn2.txt), both cases happen.
"""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

NKI_INIT = """
JITTED = []
def jit(fn=None, **kwargs):
    JITTED.append(fn.__name__)
    return fn
"""
TORCH_NEURONX_INIT = """
REGISTERED = []
def nki_op(name, fn=None, mutates_args=()):
    def build(wrapper):
        REGISTERED.append(name)
        return wrapper
    return build if fn is None else build(fn)
"""


def _stand_ins(tmp_path: Path, with_torch_neuronx: bool) -> Path:
    site = tmp_path / "site"
    (site / "nki").mkdir(parents=True)
    (site / "nki" / "__init__.py").write_text(NKI_INIT)
    (site / "nki" / "isa.py").write_text("dge_mode = None\n")
    (site / "nki" / "language.py").write_text("")
    if with_torch_neuronx:
        (site / "torch_neuronx").mkdir()
        (site / "torch_neuronx" / "__init__.py").write_text(TORCH_NEURONX_INIT)
    return site


def _run(site: Path, code: str, tmp_path: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    env.pop("NKISIM_REHEARSE_TRN2", None)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=tmp_path, env=env,
                          capture_output=True, text=True)


def test_kernels_import_with_the_sdk_and_without_torch_neuronx(tmp_path: Path) -> None:
    result = _run(_stand_ins(tmp_path, with_torch_neuronx=False), """
        import nki, torch
        import kernels
        assert nki.__file__.startswith(%r), nki.__file__           # the SDK stand-in, not nkisim's shim
        assert {"gelu_fwd", "gelu_bwd", "res_layernorm_fold_kernel", "folded_linear_kernel"} <= set(nki.JITTED)
        assert callable(kernels.gelu_fwd)                             # the raw kernels are there
        try:
            kernels.gelu_erf(torch.zeros(2, 4))
        except ImportError as err:
            print(err)
        """ % str(tmp_path), tmp_path)
    assert result.returncode == 0, result.stderr
    assert "the kernels' PyTorch ops need torch_neuronx" in result.stdout
    assert "the raw NKI kernels (kernels.gelu_fwd, ...) work without it" in result.stdout


def test_kernels_register_their_ops_through_torch_neuronx_when_present(tmp_path: Path) -> None:
    result = _run(_stand_ins(tmp_path, with_torch_neuronx=True), """
        import torch_neuronx
        import kernels
        print(sorted(torch_neuronx.REGISTERED))
        """, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(sorted(["nki_workshop::gelu_fwd", "nki_workshop::gelu_bwd",
                                                "nki_workshop::res_layernorm_fold", "nki_workshop::folded_linear"]))
