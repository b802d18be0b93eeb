"""The room kit: `make wheelhouse` caches every wheel of the environment, and `make env` then builds
a fresh venv from that cache alone.

The whole environment is installed, not a subset: torch and JupyterLab are exactly what a room on
venue Wi-Fi cannot download. The install runs with pip's configuration files and PIP_* variables
cleared and `--no-index`, so neither PyPI nor a local mirror or wheel folder can stand in for the
wheelhouse. Cost on a 2-core machine: about 1.5 min to download (from this machine's package
mirror) and 2-6 min to install, depending on load; this is the slowest test of the suite.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _make(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(["make", "--no-print-directory", *args], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    assert result.returncode == 0, f"make {' '.join(args)} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_a_fresh_venv_installs_from_the_wheelhouse_alone(tmp_path: Path) -> None:
    wheelhouse, venv = tmp_path / "wheelhouse", tmp_path / "venv"
    this_venv = Path(sys.prefix)
    # The venv running the tests is installed already: --assume-old keeps make from reinstalling it.
    _make(f"--assume-old={this_venv / '.installed'}", "wheelhouse", f"VENV={this_venv}", f"WHEELHOUSE={wheelhouse}")
    assert (wheelhouse / "requirements.txt").is_file()
    assert any(wheelhouse.glob("torch-*.whl")) and any(wheelhouse.glob("setuptools-*.whl"))

    offline = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    offline["PIP_CONFIG_FILE"] = os.devnull  # no pip.conf: no index, mirror or find-links of this machine
    result = _make("env", f"VENV={venv}", f"WHEELHOUSE={wheelhouse}", env=offline)
    assert f"installing offline from {wheelhouse}/" in result.stdout
    assert "--no-index" in result.stdout

    python = venv / "bin" / "python"
    check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    code = "import kernels, nkisim, torch, jupyterlab, nbval, myst_nb; print(kernels.__file__)"
    out = subprocess.run([str(python), "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(ROOT / "kernels" / "__init__.py")
