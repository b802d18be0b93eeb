"""kernels.check_setup: one OK/FAIL line per check, a summary line, and failures that say what to do."""
from __future__ import annotations

from pathlib import Path

import pytest

import kernels
import nkisim
from kernels import setup_check


def test_this_environment_passes_every_required_check(capsys):
    report = kernels.check_setup()
    lines = capsys.readouterr().out.splitlines()
    assert report.ok, lines
    names = [c.name for c in report.checks]
    assert names == ["Python", "packages", "backend", "GELU kernel vs PyTorch", "profile", "book toolchain"]
    assert [line.split()[0] for line in lines[:-1]] == ["OK" if c.ok else "FAIL" for c in report.checks]
    assert lines[-1].startswith("SETUP OK: 5 of 5 checks passed (backend nkisim")


def test_a_wrong_pin_fails_the_packages_check_and_names_the_package(tmp_path: Path, monkeypatch, capsys):
    (tmp_path / "environment.yml").write_text(
        "name: x\ndependencies:\n  - python=3.11\n  - pip:\n      - numpy==0.0.1\n      - no-such-package==1.0\n")
    monkeypatch.setattr(setup_check, "REPO_ROOT", tmp_path)
    report = kernels.check_setup()
    assert not report.ok
    packages = next(c for c in report.checks if c.name == "packages")
    assert "numpy" in packages.detail and "(pinned 0.0.1)" in packages.detail
    assert "no-such-package missing" in packages.detail and "make env" in packages.detail
    assert capsys.readouterr().out.splitlines()[-1].startswith("SETUP FAIL: 1 of 5 checks failed, first: FAIL packages")


def test_a_crashing_check_is_a_fail_line_with_its_message(monkeypatch, capsys):
    def broken(x):
        raise RuntimeError("device not reachable")

    monkeypatch.setattr(setup_check, "gelu_fwd", broken)
    report = kernels.check_setup()
    gelu = next(c for c in report.checks if c.name == "GELU kernel vs PyTorch")
    assert not gelu.ok and gelu.detail == "RuntimeError: device not reachable"
    assert "Traceback" not in capsys.readouterr().out


def test_on_a_device_backend_no_trace_is_needed_and_the_trn2_environment_is_the_reference(monkeypatch):
    """On trn2 the GELU check compares the launch's output only: it passes when the emulator recorded
    no trace (nkisim.last_trace() is None after a device run). The launch in a process of its own is
    tested in the rehearsal (test_trn2_rehearsal.py)."""
    monkeypatch.setattr(setup_check, "install", lambda verbose=False: nkisim.Backend("trn2", "a device (simulated)"))
    monkeypatch.setattr(nkisim, "last_trace", lambda: None)
    report = kernels.check_setup(verbose=False)
    by_name = {c.name: c for c in report.checks}
    assert by_name["backend"].detail.startswith("trn2")
    assert by_name["GELU kernel vs PyTorch"].ok
    assert "requirements-trn2.txt" in by_name["packages"].detail


@pytest.mark.parametrize("installed, pin, matches", [
    ("2.13.0+cpu", "2.13.0", True), ("2.11.3", "2.11.*", True), ("2.11", "2.11.*", True),
    ("2.1.0", "2.11.*", False), ("2.13.1", "2.13.0", False),
])
def test_version_pins(installed, pin, matches):
    assert setup_check._version_matches(installed, pin) is matches


def test_the_environment_files_pins_are_read():
    pins = setup_check.pinned_requirements(setup_check.REPO_ROOT / "environment.yml")
    assert pins["torch"] == "2.13.0" and "jupyterlab" in pins
    trn2 = setup_check.pinned_requirements(setup_check.REPO_ROOT / "requirements-trn2.txt")
    assert trn2["nki"] == "0.7.0" and trn2["torch"] == "2.14.0" and trn2["torch-neuronx"] == "2.14.3.0.*", trn2
    assert "--extra-index-url" not in str(trn2)     # pip options are not pins


def test_verbose_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"kernels.check_setup: verbose must be True or False, got str 'yes'"):
        kernels.check_setup(verbose="yes")


def test_the_python_line_shows_the_interpreter_relative_to_the_repository(monkeypatch):
    """The stored setup notebook shows `.venv/bin/python`, not the directory of the machine it ran on."""
    monkeypatch.setattr(setup_check.sys, "executable", str(setup_check.REPO_ROOT / ".venv" / "bin" / "python"))
    assert setup_check._check_python().detail.endswith(" at .venv/bin/python")
