"""`nl.gelu` from bf16 to bf16 runs torch's bf16 kernel when that gives the fp32 route's bits:
checked over every bf16 value, for the tiles it accepts and the ones it sends to the fp32 route."""
import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch

from helpers import run_tiles
from nkisim.emulator import dtypes, ops

BF16 = ml_dtypes.bfloat16
GELU = ops.OPS["gelu"]


def _all_bf16() -> np.ndarray:
    """Every bf16 bit pattern once, as a [128, 512] tile."""
    return np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(BF16).reshape(128, 512)


def _exponent(x: np.ndarray) -> np.ndarray:
    return (x.view(np.uint16) >> 7) & 0xFF


def _regular(x: np.ndarray) -> np.ndarray:
    """The values the shortcut accepts: finite with |x| >= 2^-125 (exponent field 2..254)."""
    e = _exponent(x)
    return x[(e >= 2) & (e <= 254)]


def _fp32_route(x: np.ndarray) -> np.ndarray:
    """What the emulator computes without the shortcut: fp32 GELU, one round-to-nearest-even write."""
    out = np.empty_like(x)
    dtypes.store(out, GELU.act(dtypes.load_f32(x)))
    return out


def _bits(x: np.ndarray) -> np.ndarray:
    return x.view(np.uint16)


def test_the_shortcut_is_in_use_on_this_machine():
    """The workshop's machines (AVX2 and AVX-512 builds of torch) can all use it, exact or repaired."""
    assert ops._gelu_bf16_route() in ("exact", "plus_zero")


def test_the_plus_zero_repair_changes_only_negative_zeros():
    x = torch.tensor([-0.0, 0.0, -1e-3, 2.5, -7.0], dtype=torch.bfloat16)
    repaired = x.clone().add_(0.0)
    assert repaired.view(torch.int16).tolist() == [0, 0] + x.view(torch.int16).tolist()[2:]


def test_the_shortcut_declines_when_torch_cannot_stand_in(monkeypatch):
    monkeypatch.setattr(ops, "_gelu_bf16_route", lambda: None)
    x = np.linspace(-4, 4, 1024, dtype=np.float32).astype(BF16)
    out = np.zeros_like(x)
    assert not GELU.act_bf16(dtypes.torch_view(x), dtypes.torch_view(out))


def test_the_shortcut_reproduces_the_fp32_route_on_every_value_it_accepts():
    x = _regular(_all_bf16())
    assert x.size == (253 * 128) * 2                      # 253 exponents x 128 mantissas x 2 signs
    out = np.zeros_like(x)
    assert GELU.act_bf16(dtypes.torch_view(x), dtypes.torch_view(out))
    np.testing.assert_array_equal(_bits(out), _bits(_fp32_route(x)))


@pytest.mark.parametrize("special", [0.0, -0.0, 1e-40, -2e-38, 2.0 ** -126, np.inf, -np.inf, np.nan])
def test_the_shortcut_declines_tiles_holding_a_special_value(special):
    """Some torch builds (AVX-512) flush tiny bf16 GELU results to zero, so such tiles take the fp32 route."""
    x = np.linspace(-4, 4, 1024, dtype=np.float32).astype(BF16)
    x[517] = special
    out = np.zeros_like(x)
    assert not GELU.act_bf16(dtypes.torch_view(x), dtypes.torch_view(out))
    assert not _bits(out).any()                           # untouched


def _count_fp32_route(monkeypatch) -> list:
    calls = []
    fp32_gelu = GELU.act
    monkeypatch.setattr(GELU, "act", lambda x: calls.append(x.numel()) or fp32_gelu(x))
    return calls


@pytest.mark.parametrize("in_place", [False, True])
@pytest.mark.parametrize("tile", ["every value", "regular values"])
def test_activation_gives_the_fp32_route_bits_either_way(tile, in_place, monkeypatch):
    x = _all_bf16()
    if tile == "regular values":
        x = _regular(x)[:128 * 500].reshape(128, 500)
    want = _fp32_route(x)
    calls = _count_fp32_route(monkeypatch)
    if in_place:
        body = lambda d, o: (nisa.activation(dst=d, op=nl.gelu, data=d), nisa.tensor_copy(dst=o, src=d))
    else:
        body = lambda d, o: nisa.activation(dst=o, op=nl.gelu, data=d)
    got = run_tiles(body, x, outs=[(x.shape, BF16)])
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert calls == ([x.size] if tile == "every value" else [])   # the shortcut ran on regular tiles


def test_partly_overlapping_views_take_the_fp32_route(monkeypatch):
    """dst = columns 1..63, data = columns 0..62 of one tile: the hardware reads before it writes."""
    x = np.linspace(-3, 3, 128 * 64, dtype=np.float32).reshape(128, 64).astype(BF16)
    want = x.copy()
    want[:, 1:] = _fp32_route(x[:, :63])
    calls = _count_fp32_route(monkeypatch)
    body = lambda d, o: (nisa.activation(dst=d[:, 1:64], op=nl.gelu, data=d[:, 0:63]), nisa.tensor_copy(dst=o, src=d))
    got = run_tiles(body, x, outs=[(x.shape, BF16)])
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert calls == [128 * 63]


_SCALED = lambda d, o: nisa.activation(dst=o, op=nl.gelu, data=d, scale=2.0)
_BIASED = lambda d, o: nisa.activation(dst=o, op=nl.gelu, data=d, bias=0.5)
_ACCUMULATING = lambda d, o: nisa.activation(
    dst=o, op=nl.gelu, data=d, reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.add)


@pytest.mark.parametrize("body", [_SCALED, _BIASED, _ACCUMULATING], ids=["scale", "bias", "reduce_cmd"])
def test_scaled_biased_or_accumulating_activations_take_the_fp32_route(body, monkeypatch):
    x = np.linspace(-3, 3, 128 * 64, dtype=np.float32).reshape(128, 64).astype(BF16)
    calls = _count_fp32_route(monkeypatch)
    run_tiles(body, x, outs=[(x.shape, BF16)])
    assert calls == [x.size]
