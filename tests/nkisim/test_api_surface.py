"""The documented NKI 0.6 API surface (nkisim/api_surface.py) exists in nkisim's shims, and the
coverage table in nkisim/README.md is the one the code generates."""
import importlib
import inspect

import nki.language as nl
import numpy as np
import pytest

from nkisim import NkiValidationError
from nkisim.api_surface import README, all_names, readme_with_table, resolve
from nkisim.emulator.coverage import NOT_EMULATED, REFUSED, NotEmulated


@pytest.mark.parametrize("name", all_names())
def test_every_documented_name_resolves(name):
    resolve(name)     # an AttributeError / ImportError here is a silent gap


@pytest.mark.parametrize("name", sorted(NOT_EMULATED))
def test_stand_ins_are_documented_and_fail_clearly_when_used(name):
    assert name in all_names(), f"{name} is not a documented name (typo?)"
    obj = resolve(name)
    assert isinstance(obj, NotEmulated), f"{name} is implemented now: delete its NOT_EMULATED entry"
    with pytest.raises(NkiValidationError, match=f"{name} is not emulated by nkisim: .+"):
        obj()
    with pytest.raises(NkiValidationError, match=f"{name} is not emulated by nkisim"):
        obj.some_member  # noqa: B018  (e.g. an enum member of a not-emulated class)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_apis_exist_and_say_why(name):
    assert name in all_names()
    obj = resolve(name)
    if callable(obj):
        required = [p for p in inspect.signature(obj).parameters.values() if p.default is p.empty]
        with pytest.raises(NkiValidationError, match="NeuronCore-v4"):
            obj(*[None] * len(required))
    else:
        import nki

        @nki.jit
        def make(x):
            return nl.ndarray((128, 4), dtype=obj, buffer=nl.sbuf)

        with pytest.raises(NkiValidationError, match="NeuronCore-v4"):
            make(np.zeros((1, 1), np.float32))


def test_a_real_implementation_is_never_shadowed_by_a_stand_in():
    for name in NOT_EMULATED:
        module, _, attr = name.rpartition(".")
        assert attr not in vars(importlib.import_module(module)), f"{name} is defined: delete its NOT_EMULATED entry"


def test_the_documented_nkitensor_constructor_is_refused_clearly():
    """nl.NkiTensor is the tensor type (isinstance works), but its documented constructor
    NkiTensor(shape, dtype, storage, buffer=..., name=..., address=...) is not emulated."""
    import nki

    @nki.jit
    def make(x):
        assert isinstance(x, nl.NkiTensor)
        return nl.NkiTensor((128, 4), nl.float32, None)

    with pytest.raises(NkiValidationError, match=r"nl.NkiTensor\(...\) is not emulated by nkisim as a constructor .*"
                                                 r"allocate a tensor with nl.ndarray\(shape, dtype, buffer=.*"
                                                 r"test_api_surface.py:\d+\)$"):
        make(np.zeros((1, 1), np.float32))


def test_unknown_names_are_still_attribute_errors():
    with pytest.raises(AttributeError):
        nl.definitely_not_an_nki_api  # noqa: B018


def test_readme_coverage_table_is_current():
    text = README.read_text()
    assert text == readme_with_table(text), "run `python -m nkisim.api_surface --write` and commit nkisim/README.md"


def test_kernels_see_only_nki_names_in_nl_nisa_and_nki():
    # on the device these modules hold NKI's names only: the emulator's imports and helpers must not be reachable
    import nki
    import nki.isa as nisa
    from nkisim.api_surface import DOCUMENTED
    from nkisim.emulator import isa as emulator_isa, language as emulator_language

    for module, documented in ((nl, DOCUMENTED["nki.language"]), (nisa, (*DOCUMENTED["nki.isa"], "constants"))):
        assert set(dir(module)) <= set(documented)
    assert {n for n in dir(nki) if not n.startswith("_")} <= {*DOCUMENTED["nki"], "dtype", "typing", "collectives",
                                                               "compiler", "isa", "language"}
    for module, internal in ((nl, "np"), (nl, "PSUM"), (nl, "call_op"), (nisa, "costs"), (nisa, "Issue"),
                             (nki, "Kernel"), (nki, "sys")):
        with pytest.raises(AttributeError, match=f"module '{module.__name__}' has no attribute '{internal}'"):
            getattr(module, internal)
    # read through, not copied: the emulator's objects and state, and assignments reach the emulator
    assert nisa.engine is emulator_isa.engine and nl.tile_size is emulator_language.tile_size
    assert nisa.constants.dge_mode is emulator_isa.dge_mode
    saved = emulator_language.ndarray
    try:
        nl.ndarray = "patched"
        assert emulator_language.ndarray == "patched"
    finally:
        emulator_language.ndarray = saved
    star: dict = {}
    exec("from nki.language import *", star)
    assert {"ndarray", "affine_range", "float32"} <= set(star) and "np" not in star
