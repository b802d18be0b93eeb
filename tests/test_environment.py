"""The foundation: one dependency list, importable packages, the README commands, CI."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from importlib import metadata
from pathlib import Path

import nbformat
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
from requirements_from_env import pip_requirements  # noqa: E402

pytestmark = pytest.mark.long   # minutes of JupyterLab and kernels: `make test` starts it first


def test_environment_yml_parses_and_matches_the_venv_install_list() -> None:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["name"] == "nki-workshop"
    assert "python=3.11" in env["dependencies"]
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    # The Makefile installs the venv from this parser's output: it must see exactly the YAML list.
    assert pip_requirements(ROOT / "environment.yml") == pip_section


def test_installed_versions_match_the_pins() -> None:
    mismatched = {}
    for requirement in pip_requirements(ROOT / "environment.yml"):
        name, version = requirement.split("==")
        installed = metadata.version(name)
        if installed.split("+")[0] != version:
            mismatched[name] = (version, installed)
    assert not mismatched, f"installed versions differ from environment.yml pins: {mismatched}"


def test_torch_is_the_cpu_build() -> None:
    import torch

    assert torch.__version__.startswith("2.13.0")
    assert not torch.version.cuda, "a CUDA build of torch was installed; the workshop pins the CPU wheel"


def test_packages_import_from_any_directory(tmp_path: Path) -> None:
    code = "import kernels, nkisim; print(kernels.__name__, nkisim.__name__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["kernels", "nkisim"]


def test_packages_import_from_the_repository_root_without_installing() -> None:
    # Drop the editable-install finder, so only the working directory (the repository root) can
    # provide `kernels` and `nkisim`, as for a learner who cloned the repo and never ran pip.
    code = (
        "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
        "if not type(f).__module__.startswith('__editable__')]; "
        "sys.path.insert(0, ''); import kernels, nkisim; print(kernels.__file__); print(nkisim.__file__)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [str(ROOT / "kernels" / "__init__.py"), str(ROOT / "nkisim" / "__init__.py")]


def test_ci_runs_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text()
    readme = (ROOT / "README.md").read_text()
    assert "make test" in ci and "`make test`" in readme and "`make book`" in readme


def _notebook_printing(stored: str, printed: str, path: Path) -> Path:
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(f"print({printed!r})")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored + "\n")]
    cell.execution_count = 1
    nb.cells.append(cell)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("stored,printed,passes", [("42", "42", True), ("42", "43", False)])
def test_nbval_strict_mode_fails_on_stale_outputs(tmp_path: Path, stored: str, printed: str, passes: bool) -> None:
    nb = _notebook_printing(stored, printed, tmp_path / "lesson.ipynb")
    cmd = [sys.executable, "-m", "pytest", "--nbval", "--nbval-current-env", "-p", "no:cacheprovider",
           "--nbval-sanitize-with", str(ROOT / "tests" / "nbval_sanitize.cfg"), str(nb)]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True)
    assert (result.returncode == 0) == passes, result.stdout[-2000:]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_make_lab_config_starts_jupyterlab_as_this_user(tmp_path: Path) -> None:
    port = _free_port()
    jupyter = Path(sys.executable).parent / "jupyter"
    proc = subprocess.Popen(
        [str(jupyter), "lab", f"--config={ROOT / 'tools' / 'jupyter_server_config.py'}", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--ServerApp.root_dir={ROOT}"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env={**os.environ, "JUPYTER_RUNTIME_DIR": str(tmp_path)},
    )
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            assert proc.poll() is None, proc.stdout.read().decode()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api", timeout=2) as response:
                    assert "version" in json.loads(response.read())
                    return
            except OSError:
                time.sleep(0.5)
        pytest.fail("JupyterLab did not answer within 60 s")
    finally:
        proc.terminate()
        proc.wait(timeout=20)
