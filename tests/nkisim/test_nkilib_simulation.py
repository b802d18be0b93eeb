"""tools/nkilib_simulation.py and its shim: nkisim under the names nki-library's simulation mode uses.

nki-library's harness (test/utils/simulation_setup.py) imports `nki_cpu_simulator.nki` and eight submodules,
aliases them to `nki`, `nki.isa`, ..., and runs a kernel as `nki.cpu_simulate(kernel)[lnc](**inputs)` after
naming the test's NeuronCore generation in NKI_NC_VERSION. These tests check that contract on a small kernel,
the stand-ins for what the published harness omits, and the tool's test selection and result reading. The
run over nki-library itself needs its checkout (not shipped here) and is an acceptance check, recorded in
nkisim/README.md.
"""
import importlib.util
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "tools" / "nkilib_simulation_shim"
sys.path.insert(0, str(SHIM))

import neuron_dtypes  # noqa: E402
import nkilib_simulation_plugin as plugin  # noqa: E402
from nki_cpu_simulator import nki as sim_nki  # noqa: E402

KERNEL = '''
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def scale_rows(x):
    rows, cols = x.shape
    share = rows // nl.num_programs()
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    for r0 in range(nl.program_id(0) * share, (nl.program_id(0) + 1) * share, 128):
        t = nl.ndarray((128, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r0:r0 + 128, :])
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=3.0)
        nisa.dma_copy(dst=out[r0:r0 + 128, :], src=t)
    return out
'''


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module          # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scale_rows(tmp_path_factory):
    path = tmp_path_factory.mktemp("kernel") / "scale_rows_kernel.py"
    path.write_text(KERNEL)
    return _load("scale_rows_kernel", path).scale_rows


@pytest.fixture(scope="module")
def tool():
    return _load("nkilib_simulation_tool", ROOT / "tools" / "nkilib_simulation.py")


@pytest.mark.parametrize("lnc", [1, 2])
def test_cpu_simulate_runs_a_kernel_at_the_given_lnc(scale_rows, lnc):
    x = np.arange(256 * 8, dtype=np.float32).reshape(256, 8)
    out = sim_nki.cpu_simulate(scale_rows)[lnc](x=x)
    np.testing.assert_array_equal(np.asarray(out), 3 * x)


def test_the_harness_imports_resolve_to_nkisim():
    import importlib

    import nki
    names = ["builtin", "compiler", "isa", "isa.constants", "language", "language.dtypes", "tensor", "typing"]
    modules = {n: importlib.import_module(f"nki_cpu_simulator.nki.{n}") for n in names}
    assert modules["isa"].nc_matmul is nki.isa.nc_matmul
    assert modules["language"].bfloat16 is nki.language.bfloat16 is modules["language.dtypes"].bfloat16
    assert modules["isa.constants"].__name__ == "nki_cpu_simulator.nki.isa.constants"
    assert sim_nki.jit is nki.jit
    # the harness's own statement form, which reads each submodule as its parent's attribute
    import nki_cpu_simulator.nki.language.dtypes as sim_dtypes
    assert sim_dtypes is modules["language.dtypes"] and sim_dtypes.float32 is nki.language.float32


def test_another_neuroncore_generation_is_refused(scale_rows, monkeypatch):
    monkeypatch.setenv("NKI_NC_VERSION", "gen4")
    with pytest.raises(RuntimeError, match=r"targets NeuronCore gen4; nkisim emulates trn2 \(gen3\) only"):
        sim_nki.cpu_simulate(scale_rows)[1](x=np.zeros((128, 4), np.float32))
    monkeypatch.setenv("NKI_NC_VERSION", "gen3")
    assert np.asarray(sim_nki.cpu_simulate(scale_rows)[1](x=np.ones((128, 4), np.float32))).sum() == 3 * 128 * 4


def test_neuron_dtypes_stand_in():
    x = np.array([1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5], np.float32)   # ties: round to even
    assert neuron_dtypes.static_cast(x, "bfloat16").tolist() == x.astype(ml_dtypes.bfloat16).tolist() == [1.0, 1.015625, -2.5]
    assert neuron_dtypes.static_cast(x, np.float16).dtype == np.float16
    assert neuron_dtypes.is_float_type("bfloat16") and neuron_dtypes.is_float_type(np.float32)
    assert not neuron_dtypes.is_float_type(np.int32)
    assert neuron_dtypes.float8_e4m3fn_x4 is np.uint32
    with pytest.raises(AttributeError, match="no 'not_a_dtype'"):
        neuron_dtypes.not_a_dtype


def test_stand_ins_for_the_omitted_harness_modules(tmp_path):
    names = ["test.utils.scripts", "test.utils.scripts.remote_lock_scripts", "test.utils.perf_analysis_private"]
    try:
        assert plugin.register_stand_ins(tmp_path) == names
        from test.utils.scripts.remote_lock_scripts import LockStatus   # the harness's own import form
        with pytest.raises(RuntimeError, match="LockStatus belongs to nki-library's hardware-run harness"):
            LockStatus.ALLOCATED
        with pytest.raises(RuntimeError, match="analyze_trace belongs"):
            sys.modules["test.utils.perf_analysis_private"].analyze_trace("trace.json")
    finally:
        for name in names:
            sys.modules.pop(name, None)
    # a tree that has them keeps its own
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "remote_lock_scripts.py").write_text("")
    (tmp_path / "perf_analysis_private.py").write_text("")
    assert plugin.register_stand_ins(tmp_path) == []


def test_selection_keeps_the_smallest_vectors_the_harness_runs(tool):
    skip = "Skipping slow simulation test"
    tests = {"t.py::T::f[b-4_s-2048]": None, "t.py::T::f[b-1_s-128]": skip, "t.py::T::f[b-1_s-256]": None,
             "t.py::T::f[b-2_s-256]": None, "t.py::T::g[lnc-2_v-32768]": skip, "t.py::T::g[lnc-2_v-65536]": skip,
             "u.py::h": None}
    # f's smallest is skipped by the harness, so its smallest run is chosen; g runs nothing, so its smallest
    # skipped vector is chosen (reported as skipped, with the harness's reason)
    assert tool.select(tests, 1) == ["t.py::T::f[b-1_s-256]", "t.py::T::g[lnc-2_v-32768]", "u.py::h"]
    assert tool.select(tests, 2, match="::f[") == ["t.py::T::f[b-1_s-256]", "t.py::T::f[b-2_s-256]"]
    assert tool.size("u.py::h") == 0


def test_the_plugin_reports_the_harness_skips():
    class Marker:
        def __init__(self, *args, **kwargs):
            self.args, self.kwargs = args, kwargs

    class Item:
        def __init__(self, marker):
            self.marker = marker

        def get_closest_marker(self, name):
            return self.marker if name == "skip" else None

    assert plugin.skip_reason(Item(None)) is None
    assert plugin.skip_reason(Item(Marker(reason="Skipping slow simulation test"))) == "Skipping slow simulation test"
    assert plugin.skip_reason(Item(Marker("positional reason"))) == "positional reason"


def test_a_test_under_the_memory_limit_fails_on_its_own(tool, tmp_path):
    (tmp_path / "test_big.py").write_text("def test_big():\n    bytearray(3 * 2 ** 30)\n")
    limited = [sys.executable, "-c", tool.LIMITED_PYTEST, str(2 ** 31), "-q", "-p", "no:cacheprovider",
               "test_big.py"]
    import subprocess
    out = subprocess.run(limited, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    outcome = tool.outcome_of("test_big", out.returncode, out.stdout + out.stderr, 1.0)
    assert (outcome.result, outcome.reason) == ("failed", "MemoryError")
    assert tool.outcome_of("t", -9, "", 1.0).reason == "killed by signal 9"


def test_reading_a_test_run(tool):
    passed = tool.outcome_of("t", 0, "INFO ...\n1 passed, 2 warnings in 3.1s\n", 9.0)
    assert (passed.result, passed.reason) == ("passed", "")
    skipped = tool.outcome_of("t", 0, "SKIPPED [1] integration/x.py:40: Slow simulation test\n1 skipped in 0.1s", 1.0)
    assert (skipped.result, skipped.reason) == ("skipped", "Slow simulation test")
    failed = tool.outcome_of("t", 1, "    def f():\nE   nkisim.emulator.errors.NkiValidationError: dma_copy: "
                             "dge_mode must be a member\nE   other\n1 failed in 2s", 2.0)
    assert (failed.result, failed.reason) == ("failed", "nkisim.emulator.errors.NkiValidationError: dma_copy: "
                                              "dge_mode must be a member")
    assert tool.outcome_of("t", 4, "ERROR: file or directory not found: t\n", 1.0).reason.startswith("ERROR: file")


def test_missing_requirements_are_read_from_the_checkout(tool, tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\n[project.optional-dependencies]\n'
                         'test = ["numpy", "pytest", "no-such-package-here>=1", "numpy"]\n')
    assert tool.missing_requirements(pyproject) == ["no-such-package-here>=1"]
