"""The NKI version switch (nkisim/emulator/nki_versions.py): NKI 0.7 by default, NKI 0.6 through the
documented NKI_COMPILER_FRONTEND=custom or install(nki="0.6"), reported by backend(); one table says
which rule or API belongs to which version, each row with its page."""
import dataclasses
import re
from pathlib import Path

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim.emulator import nki_versions

PACKAGE = Path(nkisim.__file__).parent


@pytest.fixture
def restore_selection():
    saved = nki_versions._active, nki_versions._explicit
    yield
    nki_versions._active, nki_versions._explicit = saved


@pytest.mark.usefixtures("restore_selection")
def test_nki_0_7_by_default_and_0_6_by_the_documented_variable(monkeypatch):
    nki_versions._explicit = None
    monkeypatch.delenv("NKI_COMPILER_FRONTEND", raising=False)
    assert nkisim.install() and nki_versions.active() == "0.7"
    backend = nkisim.backend()
    assert "CPU emulator of NKI 0.7.0 (Neuron SDK 2.33)" in backend.reason and backend.versions["nki"] == "0.7.0 (emulated)"
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "custom")
    nkisim.install()
    assert nki_versions.active() == "0.6"
    assert "NKI 0.6.0 (Neuron SDK 2.32, selected by NKI_COMPILER_FRONTEND=custom)" in nkisim.backend().reason
    monkeypatch.setenv("NKI_COMPILER_FRONTEND", "tracer")
    with pytest.raises(ValueError, match="NKI_COMPILER_FRONTEND='tracer': the documented value is 'custom'"):
        nkisim.install()


@pytest.mark.usefixtures("restore_selection")
def test_an_explicit_version_wins_and_later_plain_installs_keep_it(monkeypatch):
    monkeypatch.delenv("NKI_COMPILER_FRONTEND", raising=False)
    nkisim.install(nki="0.6")
    nkisim.install()                       # e.g. the kernels package or the setup check installing again
    assert nki_versions.active() == "0.6" and nkisim.backend().versions["nki"] == "0.6.0 (emulated)"
    nkisim.install(nki="0.7.0")
    assert nki_versions.active() == "0.7"
    with pytest.raises(ValueError, match=r"nki='0.5': nkisim emulates NKI 0.6 or 0.7"):
        nkisim.install(nki="0.5")


def test_every_row_names_its_versions_and_a_documentation_page():
    for row in nki_versions.TABLE:
        assert row.versions and set(row.versions) <= set(nki_versions.VERSIONS), row.key
        assert "https://awsdocs-neuron.readthedocs-hosted.com/" in row.page, row.key
        if row.key.startswith("nki.") and row.versions != nki_versions.VERSIONS:
            assert row.instead, f"{row.key}: say what a version without it uses"


def test_every_key_the_emulator_asks_about_is_a_row():
    asked = set()
    for path in PACKAGE.rglob("*.py"):
        asked |= set(re.findall(r"applies\(\s*\"([\w.-]+)\"", path.read_text()))
        asked |= set(re.findall(r"unavailable\(\s*'([\w.-]+)'", path.read_text()))
    assert asked and asked <= set(nki_versions.ROWS), asked - set(nki_versions.ROWS)
    with pytest.raises(KeyError):
        nki_versions.applies("no-such-rule")


class Pair(nl.NKIObject):            # a plain NKIObject: no __eq__ of its own
    def __init__(self, a, b):
        self.a, self.b = a, b


@dataclasses.dataclass
class Config(nl.NKIObject):
    rows: int = 128


@nki.jit
def compares_objects(x):
    out = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    flags = nl.ndarray((1, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=flags[0:1, 0:1], value=float(Pair(1, 2) == Pair(1, 2)))
    nisa.memset(dst=flags[0:1, 1:2], value=float(Config() == Config()))
    nisa.dma_copy(dst=out, src=flags)
    return out


def test_equality_of_user_objects_is_structural_in_0_6_and_pythonic_in_0_7():
    # NKI 0.6: "Equality in NKI is structural"; NKI 0.7: "Kernels that use == on user-defined classes can
    # behave differently" (standard Python: identity, unless the class defines __eq__, as a dataclass does)
    x = np.zeros((1, 1), np.float32)
    with nki_versions.emulating("0.6"):
        assert compares_objects(x).tolist() == [[1.0, 1.0]]
    with nki_versions.emulating("0.7"):
        assert compares_objects(x).tolist() == [[0.0, 1.0]]


def _kernel_with_python_of_0_7(x):
    """Generators, `is`, a plain class with inheritance, int dict keys: Python under NKI 0.7."""
    class Base:
        rows = 64

    class Tall(Base):
        rows = Base.rows * 2

    sizes = {0: Tall.rows}
    cols = sum(n for n in (4, 4))
    t = nl.ndarray((sizes[0], cols), dtype=nl.float32, buffer=nl.sbuf)
    if x.dtype is nl.float32:
        nisa.memset(dst=t, value=1.0)
    out = nl.ndarray((sizes[0], cols), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_nki_0_7_kernels_use_python_and_nki_0_6_refuses_it():
    x = np.zeros((1, 1), np.float32)
    with nki_versions.emulating("0.7"):
        assert np.all(nki.jit(_kernel_with_python_of_0_7)(x) == 1.0)
    with nki_versions.emulating("0.6"):
        with pytest.raises(nkisim.NkiValidationError, match="NKI 0.6.0 language"):
            nki.jit(_kernel_with_python_of_0_7)(x)
