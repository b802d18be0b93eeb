"""The room kit: `make wheelhouse` caches every wheel of the environment, and a fresh venv installs
from that cache alone.

What is checked, and what is not (to keep the suite's cost reasonable on a 2-core CI machine):
- `make wheelhouse` downloads the whole environment (about 390 MB, ~1-2 min from this machine's
  package mirror);
- pip resolves the WHOLE environment from the wheelhouse with `--no-index` (`pip install --dry-run`:
  every requirement and every dependency has a wheel for this platform), without installing it;
- a fresh venv really installs, offline, the part the lessons' code runs on (torch, numpy,
  ml_dtypes, matplotlib, PyYAML) plus this repository (`pip install -e .`, whose build backend
  also comes from the wheelhouse), and computes a GELU on the emulator. Installing the rest
  (JupyterLab, Jupyter Book, the test tools) would triple the time and test nothing new;
- `make env` with a wheelhouse present issues exactly those `--no-index --find-links` installs
  (`make -n`).
Every offline step runs with pip's configuration files and PIP_* variables cleared, so neither
PyPI nor a local mirror or wheel folder can stand in for the wheelhouse.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.long   # minutes of pip: `make test` starts it first

ROOT = Path(__file__).resolve().parents[1]
RUNTIME = ["torch", "numpy", "ml_dtypes", "matplotlib", "pyyaml"]


def _run(cmd: list[str], env: dict[str, str] | None = None) -> str:
    result = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def test_a_fresh_venv_installs_from_the_wheelhouse_alone(tmp_path: Path) -> None:
    wheelhouse, venv = tmp_path / "wheelhouse", tmp_path / "venv"
    this_venv = Path(sys.prefix)
    # The venv running the tests is installed already: --assume-old keeps make from reinstalling it.
    _run(["make", "--no-print-directory", f"--assume-old={this_venv / '.installed'}", "wheelhouse",
          f"VENV={this_venv}", f"WHEELHOUSE={wheelhouse}"])
    requirements = wheelhouse / "requirements.txt"
    assert requirements.is_file() and any(wheelhouse.glob("torch-*.whl"))

    planned = _run(["make", "--no-print-directory", "-n", "env", f"VENV={venv}", f"WHEELHOUSE={wheelhouse}"])
    offline_flags = f"--no-index --find-links {wheelhouse}"
    assert f"{offline_flags} -r {venv}/requirements.txt" in planned and f"{offline_flags} --no-deps -e ." in planned

    offline = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    offline["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf: no index, mirror or find-links of this machine
    _run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    _run(pip + ["install", "--dry-run", "--quiet", "--no-index", "--find-links", str(wheelhouse),
                "-r", str(requirements)], env=offline)
    pins = [line for line in requirements.read_text().split() if line.split("==")[0].lower() in RUNTIME]
    assert len(pins) == len(RUNTIME), pins
    _run(pip + ["install", "--quiet", "--no-index", "--find-links", str(wheelhouse), *pins], env=offline)
    _run(pip + ["install", "--quiet", "--no-index", "--find-links", str(wheelhouse), "--no-deps", "-e", str(ROOT)],
         env=offline)

    code = ("import nkisim; nkisim.install(); import kernels, torch; x = torch.linspace(-3, 3, 128).reshape(128, 1); "
            "err = (kernels.gelu_fwd(x) - torch.nn.functional.gelu(x)).abs().max().item(); print(kernels.__file__, err)")
    out = subprocess.run([str(venv / "bin" / "python"), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    path, err = out.stdout.split()
    assert path == str(ROOT / "kernels" / "__init__.py") and float(err) < 1e-5
