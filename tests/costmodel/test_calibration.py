"""The model against the published trn2 figures: real kernels, real emulator traces (dry run)."""
import pytest
import torch

import kernels  # noqa: F401  (installs nki)
import nkisim
from kernels import gelu_bwd, gelu_fwd
from nkisim.profile import published
from nkisim.profile.calibration import BAND, compare, failures
from nkisim.profile.summary import SOURCE_ESTIMATE


@pytest.fixture(scope="module")
def modeled():
    x = torch.empty(published.GELU_SHAPE, dtype=torch.bfloat16)
    return {"gelu_fwd": nkisim.profile(gelu_fwd, x), "gelu_bwd": nkisim.profile(gelu_bwd, x, x)}


@pytest.mark.parametrize("kernel,figures", [("gelu_fwd", published.GELU_FWD), ("gelu_bwd", published.GELU_BWD)])
def test_gelu_total_time_within_band_and_dma_bound(modeled, kernel, figures):
    s = modeled[kernel]
    assert s.source == SOURCE_ESTIMATE
    assert abs(s.total_time_us / figures["total_time_us"] - 1) <= BAND
    assert s.bound_by.startswith("DMA")
    assert s.dma_active_time_percent > 85                       # compute hidden under DMA
    assert s.opcode_time("ACTIVATE") < 0.7 * s.total_time
    assert not failures(compare(kernel, s, figures | {"bound_by": "DMA"}))


def test_compute_times_match_the_published_instruction_times(modeled):
    assert modeled["gelu_fwd"].opcode_count("ACTIVATE") == 26
    assert modeled["gelu_fwd"].opcode_time("ACTIVATE") * 1e6 == pytest.approx(93.9, rel=0.05)
    assert modeled["gelu_bwd"].opcode_time("TENSOR_TENSOR", "Vector") * 1e6 == pytest.approx(59.6, rel=0.05)


def test_band_check_fails_outside_the_band(modeled):
    far = published.GELU_FWD | {"total_time_us": modeled["gelu_fwd"].total_time_us * 1.5, "bound_by": "Scalar"}
    missed = {r.metric for r in failures(compare("gelu_fwd", modeled["gelu_fwd"], far))}
    assert missed == {"total_time", "bound by"}
