"""The affine fold: gamma/beta moved into the consumer Linears, exactly, and FoldedPreNorm."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from kernels import FoldedPreNorm, fold_affine_into_linear, reference


def _norm_and_linear(hidden: int, out: int, dtype: torch.dtype, seed: int = 0) -> tuple[nn.LayerNorm, nn.Linear]:
    torch.manual_seed(seed)
    norm = nn.LayerNorm(hidden, eps=1e-6, dtype=dtype)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.5 * torch.randn(hidden, dtype=dtype))
        norm.bias.copy_(0.5 * torch.randn(hidden, dtype=dtype))
    return norm, nn.Linear(hidden, out, dtype=dtype)


@pytest.mark.parametrize(("dtype", "tol"), [(torch.float64, 1e-12), (torch.float32, 2e-5)])
def test_folded_linear_equals_linear_of_affine(dtype: torch.dtype, tol: float) -> None:
    norm, linear = _norm_and_linear(384, 96, dtype)
    z = torch.randn(16, 384, dtype=dtype)
    folded = fold_affine_into_linear(norm.weight, norm.bias, linear)
    with torch.no_grad():
        expected = linear(z * norm.weight + norm.bias)
        actual = folded(z)
    assert folded.weight.dtype == dtype
    assert (actual - expected).abs().max().item() <= tol * expected.abs().max().item()


def test_folded_linear_is_the_unfused_layernorm_then_linear_in_fp64() -> None:
    norm, linear = _norm_and_linear(256, 64, torch.float64)
    x = 3 * torch.randn(8, 256, dtype=torch.float64) + 1
    z = reference.layernorm_affine_reference(x, None, None, norm.eps)  # affine-free z
    with torch.no_grad():
        expected = linear(norm(x))
        actual = fold_affine_into_linear(norm.weight, norm.bias, linear)(z)
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-12)


def test_missing_affine_or_bias_is_identity_and_zero() -> None:
    _, linear = _norm_and_linear(32, 8, torch.float64)
    no_bias = nn.Linear(32, 8, bias=False, dtype=torch.float64)
    z = torch.randn(4, 32, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(fold_affine_into_linear(None, None, linear)(z), linear(z))
        torch.testing.assert_close(fold_affine_into_linear(None, None, no_bias)(z), no_bias(z))


def test_fold_rejects_wrong_gamma_shape() -> None:
    _, linear = _norm_and_linear(32, 8, torch.float32)
    with pytest.raises(ValueError, match=r"gamma has shape \(31,\), expected \(32,\)"):
        fold_affine_into_linear(torch.ones(31), None, linear)


def test_folded_pre_norm_matches_add_layernorm_linears(lnc2: int) -> None:
    hidden, rows = 384, 256
    norm, q = _norm_and_linear(hidden, 64, torch.float32, seed=1)
    _, k = _norm_and_linear(hidden, 32, torch.float32, seed=2)
    module = FoldedPreNorm(norm, [q, k])
    gen = torch.Generator().manual_seed(3)
    a = torch.randn(rows, hidden, generator=gen)
    b = torch.randn(2, rows, hidden, generator=gen).bfloat16()
    with torch.no_grad():
        x_new, (yq, yk) = module(a, b)
        x_ref = a + b[0].float() + b[1].float()
        assert torch.equal(x_new, x_ref)
        for folded, original, y in ((module.consumers[0], q, yq), (module.consumers[1], k, yk)):
            _, z_ref = reference.res_layernorm_fold_reference(a, b, norm.eps)
            # The folded consumer applied to the bf16-rounded reference z (kernel z is within 1 ulp) ...
            torch.testing.assert_close(y, folded(z_ref.bfloat16().float()), rtol=0, atol=0.05)
            # ... and, up to z's bf16 rounding, the unfused LayerNorm -> Linear.
            cos = torch.nn.functional.cosine_similarity(y.flatten(), original(norm(x_ref)).flatten(), dim=0)
            assert cos.item() > 0.9999


def test_folded_pre_norm_checks_its_consumers() -> None:
    norm, _ = _norm_and_linear(32, 8, torch.float32)
    with pytest.raises(ValueError, match="consumer 0 has in_features=16, the LayerNorm width is 32"):
        FoldedPreNorm(norm, [nn.Linear(16, 4)])
    with pytest.raises(ValueError, match="at least one consumer"):
        FoldedPreNorm(norm, [])
