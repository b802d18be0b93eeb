"""Rules the NKI documentation pages state outside the API reference (migration guide, scheduling
how-to, dynamic loops deep dive), each checked with a kernel written here."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkisim import NkiValidationError


def _copy_through_sbuf(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_jit_platform_target_is_rejected_and_mode_is_ignored():
    # migration guide, NKI 0.3.0: platform_target raises an error; mode= is deprecated and ignored
    with pytest.raises(NkiValidationError, match="platform_target='trn2' is not accepted since NKI 0.3.0.*"
                                                 "NEURON_PLATFORM_TARGET_OVERRIDE"):
        nki.jit(platform_target="trn2")(_copy_through_sbuf)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(nki.jit(mode="torchxla")(_copy_through_sbuf)(x), x)
