"""nkisim.run_on_device and the profile processes' settings (the device side is rehearsed in
test_trn2_rehearsal.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
import nkisim
from nkisim.profile import profiling


@nki.jit
def plus_one(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_off_trn2_run_on_device_is_a_plain_launch_on_the_emulator() -> None:
    x = np.zeros((128, 4), dtype=np.float32)
    np.testing.assert_array_equal(nkisim.run_on_device(plus_one, x), x + 1)
    assert nkisim.last_trace() is not None and nkisim.last_trace().lnc == 1   # the emulator's trace


@pytest.mark.parametrize("kernel, kwargs, error, match", [
    (None, {}, TypeError, r"nkisim.run_on_device: kernel must be an nki.jit kernel"),
    (plus_one, {"lnc": 3}, ValueError, r"nkisim.run_on_device: lnc=3; trn2 supports LNC 1 or 2"),
    (plus_one[2], {"lnc": 1}, ValueError, r"nkisim.run_on_device: kernel is a launch at LNC=2"),
    (lambda x, lnc=1: None, {"lnc": 2}, nkisim.NkiArgumentError,
     r"nkisim.run_on_device: kernel '<lambda>' has a parameter 'lnc' of its own"),
])
def test_run_on_device_names_a_bad_argument(kernel, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        nkisim.run_on_device(kernel, np.zeros((128, 4), dtype=np.float32), **kwargs)


def test_the_capture_variables_are_the_documented_ones() -> None:
    """Environment-variable capture: the master switch, device traces of the first execution per NEFF
    per core, one warm-up execution skipped (Neuron Explorer environment variables, 2.33)."""
    assert profiling.CAPTURE_ENV == {"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_DEVICE_PROFILE": "1",
                                     "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP": "1"}


def test_the_profile_neff_cache_is_yours_or_the_workshops_own(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert profiling.neff_cache_dir() == str(tmp_path / "nki-workshop" / "neff-cache")
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", "/data/neffs")
    assert profiling.neff_cache_dir() == "/data/neffs"
