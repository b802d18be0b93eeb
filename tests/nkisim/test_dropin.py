"""`nkisim.install()` makes unchanged NKI 0.6 kernel files run; `backend()` says which NKI is active."""
import subprocess
import sys
import textwrap

import nkisim

KERNEL_MODULE = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def add_tiles(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    ta = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    tb = nl.ndarray(b.shape, dtype=b.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=ta, src=a)
    nisa.dma_copy(dst=tb, src=b)
    nisa.tensor_tensor(dst=ta, data1=ta, data2=tb, op=nl.add)
    nisa.dma_copy(dst=out, src=ta)
    return out
'''

SCRIPT = '''
import numpy as np, nkisim
first = nkisim.install()
again = nkisim.install()
import nki, nki.isa, nki.language
from torch_neuronx import nki_op, nki as tn_nki
import my_kernels
a = np.ones((128, 512), np.float32)
assert np.array_equal(my_kernels.add_tiles(a, a), 2 * a)
assert tn_nki is nki and nki.__nkisim__ and first.name == again.name == "nkisim"
print("ran", nkisim.last_trace().counts()[("Vector", "TENSOR_TENSOR")])
'''


def test_kernel_module_importing_nki_runs_unchanged_after_install(tmp_path):
    (tmp_path / "my_kernels.py").write_text(KERNEL_MODULE)
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(SCRIPT)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ran 1\n"          # install() is silent by default, and idempotent


def test_backend_reports_nkisim_without_the_sdk(capsys):
    b = nkisim.backend()
    assert b.name == "nkisim" and b.target == "trn2" and "not installed" in b.reason
    assert set(b.versions) >= {"python", "torch", "numpy", "ml_dtypes", "nkisim"}
    assert nkisim.install(verbose=True).name == "nkisim"
    assert capsys.readouterr().out.startswith("nkisim.install(): the Neuron SDK (`nki`) is not installed")


def _fake_package(root, files):
    pkg = root / "nki"
    pkg.mkdir()
    for f in files:
        (pkg / f).write_text("raise ImportError('must not be imported by backend()')\n")
    return root


def test_real_sdk_takes_precedence_and_install_does_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(_fake_package(tmp_path, ["__init__.py", "isa.py", "language.py"])))
    monkeypatch.delenv("NEURON_PLATFORM_TARGET_OVERRIDE", raising=False)
    b = nkisim.install(verbose=True)
    # no /dev/neuron* here: AWS's simulator targets trn3 unless the override says otherwise (gen3 is trn2)
    assert (b.name, b.target) == ("neuron-sdk-simulator", "trn3") and "target trn3 (its default" in b.reason
    assert capsys.readouterr().out.startswith("nkisim.install(): nothing to do, the Neuron SDK is installed")
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")
    assert nkisim.backend().target == "trn2"


def test_empty_pypi_placeholder_is_not_a_real_sdk(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(_fake_package(tmp_path, ["__init__.py"])))
    b = nkisim.backend()
    assert b.name == "nkisim" and "empty PyPI placeholder" in b.reason
