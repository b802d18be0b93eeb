"""The workshop's setup check: one OK/FAIL line per check and a summary line to hand in.

`kernels.check_setup()` is what notebooks/00_setup.ipynb runs. Each check says what it found and,
when it fails, what to do. The GELU and profile checks launch the finished kernel: on a trn2 instance
each in a short-lived process of its own (nkisim.run_on_device), so the notebook never holds the
NeuronCores; elsewhere on the emulator. They pass without an emulator trace on the device.

It lives with the kernels it checks and uses nkisim from above (backend, device launches, profiles):
nkisim never imports kernels (tests/nkisim/test_import_graph.py).
"""
from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nkisim import backend, install, profile, run_on_device
from nkisim.active_backend import rehearsing
from nkisim.arguments import check_kind

from . import reference
from .gelu import gelu_fwd

REPO_ROOT = Path(__file__).resolve().parents[1]
MIN_PYTHON = (3, 11)
# The environment file each backend is installed from.
ENV_FILES = {"nkisim": "environment.yml", "neuron-sdk-simulator": "requirements-trn2.txt",
             "trn2": "requirements-trn2.txt"}


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    required: bool = True

    def line(self) -> str:
        status = "OK  " if self.ok else ("FAIL" if self.required else "FAIL (optional)")
        return f"{status} {self.name}: {self.detail}"


@dataclass
class SetupReport:
    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks if c.required)

    def summary(self) -> str:
        """The one line an instructor collects."""
        required = [c for c in self.checks if c.required]
        failed = [c for c in required if not c.ok]
        backend = next((c.detail.split()[0] for c in self.checks if c.name == "backend"), "?")
        if not failed:
            return f"SETUP OK: {len(required)} of {len(required)} checks passed (backend {backend}, Python " \
                   f"{sys.version.split()[0]})"
        return f"SETUP FAIL: {len(failed)} of {len(required)} checks failed, first: {failed[0].line()}"


def pinned_requirements(env_file: Path) -> dict[str, str]:
    """name -> pinned version ("2.11.*" allowed) of a requirements file (.txt) or of the `pip:` list of a
    conda environment file."""
    if env_file.suffix == ".txt":
        pip = [line.split("#")[0] for line in env_file.read_text().splitlines()]
    else:
        import yaml

        spec = yaml.safe_load(env_file.read_text())
        pip = next((d["pip"] for d in spec.get("dependencies", []) if isinstance(d, dict) and "pip" in d), [])
    pins = {}
    for entry in pip:
        if match := re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", entry.strip()):
            pins[match.group(1)] = match.group(2)
    return pins


def _version_matches(installed: str, pin: str) -> bool:
    installed = installed.split("+")[0]  # a local build tag (torch's +cpu) is the same release
    if pin.endswith(".*"):
        return installed == pin[:-2] or installed.startswith(pin[:-1])
    return installed == pin


def _shown_path(path: Path) -> str:
    """A path inside the repository relative to it (`.venv/bin/python`): the same on every machine,
    and no one's directory layout in a stored notebook."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def _check_python() -> Check:
    found = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    need = ".".join(map(str, MIN_PYTHON))
    return Check("Python", ok, f"{found} at {_shown_path(Path(sys.executable))}" if ok else
                 f"{found} is too old: {need} or newer is needed (use the .venv that `make lab` creates)")


def _check_packages(backend_name: str) -> Check:
    # A rehearsal runs on the CPU workshop environment: check what is installed, not the trn2 pins.
    env_file = REPO_ROOT / ("environment.yml" if rehearsing() else ENV_FILES.get(backend_name, "environment.yml"))
    if not env_file.is_file():
        return Check("packages", False, f"{env_file} not found: run the check from a clone of the repository")
    wrong = []
    pins = pinned_requirements(env_file)
    for name, pin in pins.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{name} missing (pinned {pin})")
            continue
        if not _version_matches(installed, pin):
            wrong.append(f"{name} {installed} (pinned {pin})")
    if wrong:
        return Check("packages", False, f"{len(wrong)} of {len(pins)} differ from {env_file.name}: "
                     f"{', '.join(wrong[:4])}{' ...' if len(wrong) > 4 else ''}; run `make env` again")
    return Check("packages", True, f"all {len(pins)} pinned versions of {env_file.name} installed")


def _check_backend() -> tuple[Check, str]:
    active = install()
    return Check("backend", True, f"{active.name} ({active.reason})"), active.name


def _gelu_input():
    import torch

    return torch.randn(200, 64, generator=torch.Generator().manual_seed(0))  # 2 tiles, a partial one


def _check_gelu() -> Check:
    import torch

    x = _gelu_input()
    # On trn2 the launch runs in a process of its own, so this notebook holds no NeuronCore afterwards
    # (the profile check and the lessons' profiles need them); elsewhere a plain launch on the emulator.
    y = run_on_device(gelu_fwd, x) if backend().name == "trn2" else gelu_fwd(x)
    y = torch.as_tensor(y.cpu() if hasattr(y, "cpu") else y)
    err = (y.double() - reference.gelu_exact(x.double())).abs().max().item()
    ok = y.shape == x.shape and err < 1e-5
    return Check("GELU kernel vs PyTorch", ok, f"kernels.gelu_fwd on [200, 64] fp32, max |error| {err:.1e}"
                 + ("" if ok else " (expected < 1e-05): reinstall with `make env`"))


def _check_profile() -> Check:
    summary = profile(gelu_fwd, _gelu_input())
    ok = bool(summary.total_time) and summary.total_time > 0
    return Check("profile", ok, f"gelu_fwd {summary.total_time * 1e6:.2f} µs [{summary.source}]" if ok
                 else f"no total time in the profile [{summary.source}]")


def _tool_version(command: str) -> str | None:
    path = shutil.which(command)
    if path is None:
        return None
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else "?"


def _check_book_toolchain() -> Check:
    """Only `make book` needs it: Jupyter Book and Node's npm (it fetches MathJax)."""
    missing, found = [], []
    try:
        found.append(f"jupyter-book {importlib.metadata.version('jupyter-book')}")
    except importlib.metadata.PackageNotFoundError:
        missing.append("jupyter-book")
    for tool in ("node", "npm"):
        version = _tool_version(tool)
        (found.append(f"{tool} {version}") if version else missing.append(tool))
    if missing:
        return Check("book toolchain", False, f"{', '.join(missing)} not found (only `make book` needs them; "
                     "the lessons do not)", required=False)
    return Check("book toolchain", True, ", ".join(found), required=False)


def _run(check: Callable[[], Check], name: str) -> Check:
    try:
        return check()
    except Exception as err:  # a check that crashes is a FAIL with its message, not a traceback
        return Check(name, False, f"{type(err).__name__}: {err}")


def check_setup(verbose: bool = True) -> SetupReport:
    """Run every check, print one OK/FAIL line each (if verbose) and the summary line."""
    check_kind("kernels.check_setup", "verbose", verbose, bool, "True or False")
    report = SetupReport()
    report.checks.append(_run(_check_python, "Python"))
    try:
        backend_check, backend_name = _check_backend()
    except Exception as err:
        backend_check, backend_name = Check("backend", False, f"{type(err).__name__}: {err}"), "nkisim"
    report.checks.append(_run(lambda: _check_packages(backend_name), "packages"))
    report.checks.append(backend_check)
    report.checks.append(_run(_check_gelu, "GELU kernel vs PyTorch"))
    report.checks.append(_run(_check_profile, "profile"))
    report.checks.append(_run(_check_book_toolchain, "book toolchain"))
    if verbose:
        for check in report.checks:
            print(check.line())
        print(report.summary())
    return report
