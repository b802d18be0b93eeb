"""`nkisim.run` on kernels made by a foreign `nki.jit` (the real Neuron SDK's, as on a trn2 instance).

No SDK is installed here, so a fake one stands in: modules named `nki`, `nki.isa`, `nki.language`
whose every attribute raises when called, an `nki.isa.dge_mode` enum, and a `jit` returning a
`Kernel` object that holds the function in `.func`. Kernel files are imported with the fake
modules in sys.modules (restored afterwards); `nkisim.run` must emulate them without touching
the fake SDK.
"""
import enum
import importlib
import sys
import textwrap
import types

import numpy as np
import pytest

import nkisim
from nkisim.emulator import runner

HELPERS = '''
import nki.isa as nisa
import nki.language as nl


def double_rows(dst, src):
    """A helper in another module, as lesson kernels import from each other."""
    nisa.tensor_scalar(dst=dst, data=src, op0=nl.multiply, operand0=2.0, name="double")
'''

KERNELS = '''
import nki
import nki.isa as nisa
import nki.language as nl
from fake_helpers import double_rows

DMA_NONE = nisa.dge_mode.none       # an SDK enum member captured at import time


def _tiles(rows_total):
    """A same-module helper that reads `nl`."""
    rows = rows_total // nl.num_programs()
    base = nl.program_id(0) * rows
    return [base + t * nl.tile_size.pmax for t in range(rows // nl.tile_size.pmax)]


def _load(dst, src, mode=DMA_NONE):
    nisa.dma_copy(dst=dst, src=src, dge_mode=mode, name="load")


@nki.jit
def add_one_double(x):
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in _tiles(rows_total):
        t = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
        _load(t, x[r0:r0 + 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, name="add_one")
        double_rows(t, t)
        nisa.dma_copy(dst=out[r0:r0 + 128, :], src=t, dge_mode=DMA_NONE, name="store")
    return out


@nki.jit
def calls_sub_kernel(x):
    return add_one_double(x)        # a kernel called from a kernel
'''


def _raiser(module_name):
    def attribute(name):
        if name.startswith("__"):
            raise AttributeError(name)

        def sdk_function(*args, **kwargs):
            raise RuntimeError(f"the fake SDK's {module_name}.{name} was called")
        sdk_function.__module__ = module_name
        return sdk_function
    return attribute


class Kernel:
    """The fake SDK's jit kernel object: holds the function, cannot run on this machine."""
    __module__ = "nki"

    def __init__(self, func):
        self.func = func

    def __call__(self, *args, **kwargs):
        raise RuntimeError("the fake SDK's kernel needs a Neuron device")


class Opaque:
    """A kernel object that exposes no Python function."""
    __module__ = "nki"


def _fake_sdk():
    nki = types.ModuleType("nki")
    isa = types.ModuleType("nki.isa")
    language = types.ModuleType("nki.language")
    for mod in (nki, isa, language):
        mod.__getattr__ = _raiser(mod.__name__)
    isa.dge_mode = enum.Enum("dge_mode", {"unknown": 0, "swdge": 1, "hwdge": 2, "none": 3}, module="nki.isa")
    nki.jit = lambda fn=None, **options: Kernel(fn) if fn is not None else Kernel
    nki.isa, nki.language = isa, language
    return {"nki": nki, "nki.isa": isa, "nki.language": language}


@pytest.fixture
def sdk_kernels(tmp_path, monkeypatch):
    """The kernel module, imported against the fake SDK; sys.modules and sys.path restored afterwards."""
    (tmp_path / "fake_helpers.py").write_text(textwrap.dedent(HELPERS))
    (tmp_path / "fake_kernels.py").write_text(textwrap.dedent(KERNELS))
    emulator_nki = sys.modules.get("nki")
    with monkeypatch.context() as m:
        for name, module in _fake_sdk().items():
            m.setitem(sys.modules, name, module)
        m.syspath_prepend(str(tmp_path))
        kernels = importlib.import_module("fake_kernels")
        for name in ("fake_kernels", "fake_helpers"):
            m.delitem(sys.modules, name)
    assert sys.modules.get("nki") is emulator_nki
    return kernels


def test_fake_sdk_kernel_is_foreign_and_cannot_run_itself(sdk_kernels):
    assert type(sdk_kernels.add_one_double) is Kernel
    with pytest.raises(RuntimeError, match="needs a Neuron device"):
        sdk_kernels.add_one_double(np.zeros((128, 4), np.float32))


def test_run_gives_outputs_and_trace(sdk_kernels):
    x = np.random.default_rng(0).standard_normal((256, 8)).astype(np.float32)
    r = nkisim.run(sdk_kernels.add_one_double, x)
    np.testing.assert_array_equal(r.outputs, (x + 1.0) * 2.0)
    names = [i.name for i in r.trace.instructions]
    assert names == ["load", "add_one", "double", "store"] * 2
    assert {i.dma.dge_mode for i in r.trace.instructions if i.isa == "dma_copy"} == {"none"}
    assert r.trace.kernel == "add_one_double"
    assert r.trace.instructions[0].source.startswith("fake_kernels.py:")


def test_run_lnc2_dry_run_and_sub_kernels(sdk_kernels):
    x = np.ones((1024, 512), np.float32)
    r = nkisim.run(sdk_kernels.add_one_double, x, lnc=2, dry_run=True)
    assert r.trace.dry_run and r.trace.lnc == 2 and len(r.trace) == 8 * 4
    assert {i.program_id for i in r.trace.instructions} == {0, 1}
    assert np.all(np.isnan(r.outputs))               # a dry run computes nothing
    x = np.full((128, 4), 3.0, np.float32)
    np.testing.assert_array_equal(nkisim.run(sdk_kernels.calls_sub_kernel, x).outputs, np.full((128, 4), 8.0))


def test_emulation_is_cached_per_kernel_object(sdk_kernels):
    kernel = sdk_kernels.add_one_double
    assert runner.emulated(kernel) is runner.emulated(kernel)
    assert runner.emulated(kernel).fn is not kernel.func          # a re-created copy; the SDK's is untouched
    assert kernel.func.__globals__["nl"].__name__ == "nki.language"


def test_kernel_object_without_a_function_is_a_clear_error():
    with pytest.raises(TypeError, match=r"nkisim.run: kernel must be an nki.jit kernel, .* got a nki\.Opaque "
                                        r"object .*__wrapped__ .*func, fn, function, _func, kernel"):
        nkisim.run(Opaque(), np.zeros((128, 4), np.float32))


# A machine with neuronx-cc installed also has the legacy `neuronxcc.nki` (removed only in Neuron 2.34). A kernel
# reading it is a compilation error since NKI 0.4.0 (nki/migration/index.html): nkisim.run must refuse it, not swap
# the legacy modules for the emulator's and run it as NKI 0.7 code.
LEGACY_KERNELS = '''
import nki
import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as legacy_isa
import neuronxcc.nki.language as legacy_nl
from neuronxcc.nki.language import par_dim

import nki.isa as nisa
import nki.language as nl


def _copy_body(a):
    out = legacy_nl.ndarray(a.shape, dtype=a.dtype, buffer=legacy_nl.shared_hbm)
    legacy_isa.dma_copy(dst=out, src=a)
    return out


legacy_kernel = legacy_nki.jit(_copy_body)       # a @neuronxcc.nki.jit kernel


@nki.jit
def reads_a_legacy_object(a):
    t = nl.ndarray((par_dim(128), 4), dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    return t


@nki.jit
def imports_legacy_but_does_not_use_it(a):      # the module imports neuronxcc; the kernel never reads it
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=a)
    nisa.dma_copy(dst=out, src=t)
    return out
'''


def _fake_legacy():
    modules = {name: types.ModuleType(name) for name in
               ("neuronxcc", "neuronxcc.nki", "neuronxcc.nki.isa", "neuronxcc.nki.language")}
    for module in modules.values():
        module.__getattr__ = _raiser(module.__name__)
    modules["neuronxcc.nki"].jit = lambda fn: Kernel(fn)
    modules["neuronxcc"].nki = modules["neuronxcc.nki"]
    modules["neuronxcc.nki"].isa = modules["neuronxcc.nki.isa"]
    modules["neuronxcc.nki"].language = modules["neuronxcc.nki.language"]
    return modules


@pytest.fixture
def legacy_kernels(tmp_path, monkeypatch):
    (tmp_path / "fake_legacy_kernels.py").write_text(textwrap.dedent(LEGACY_KERNELS))
    with monkeypatch.context() as m:
        for name, module in {**_fake_sdk(), **_fake_legacy()}.items():
            m.setitem(sys.modules, name, module)
        m.syspath_prepend(str(tmp_path))
        kernels = importlib.import_module("fake_legacy_kernels")
        m.delitem(sys.modules, "fake_legacy_kernels")
    return kernels


@pytest.mark.parametrize("kernel, read", [("legacy_kernel", "'legacy_nl', module neuronxcc.nki.language"),
                                          ("reads_a_legacy_object", "'par_dim', an object of neuronxcc.nki.language")])
def test_legacy_neuronxcc_kernel_is_refused_not_run_as_nki(legacy_kernels, kernel, read):
    with pytest.raises(nkisim.NkiValidationError,
                       match=rf"uses {read} of the legacy neuronxcc package; neuronxcc.nki inside a kernel is a "
                             rf"compilation error since NKI 0.4.0, use nki\.\* \(nki/migration/index.html\)"):
        nkisim.run(getattr(legacy_kernels, kernel), np.zeros((128, 4), np.float32))


def test_a_module_importing_neuronxcc_runs_kernels_that_do_not_read_it(legacy_kernels):
    x = np.arange(512, dtype=np.float32).reshape(128, 4)
    np.testing.assert_array_equal(nkisim.run(legacy_kernels.imports_legacy_but_does_not_use_it, x).outputs, x)
