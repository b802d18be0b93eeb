"""PyTorch references for both kernels: the math, in one place.

Tests, lessons and exercise checkers compare kernel outputs against these. The GELU references
are the published method's: CPU fp32 `torch.nn.functional.gelu` and its autograd derivative.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ._backend import check_tensors
from .limits import KernelInputError


def _at_least_fp32(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.float64 else t.float()


def _at_infinity(values: torch.Tensor, x: torch.Tensor, at_pos: float | None, at_neg: float) -> torch.Tensor:
    """`values` with the exact limits at x = +-inf (torch's CPU GELU gives NaN there on some
    machines, as inf * 0 does); `at_pos=None` means x itself (+inf)."""
    pos, neg = x == float("inf"), x == float("-inf")
    if not (pos.any() or neg.any()):
        return values
    values = values.masked_fill(neg, at_neg)
    return values.masked_fill(pos, float("inf") if at_pos is None else at_pos)


def gelu_exact(x: torch.Tensor) -> torch.Tensor:
    """gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), computed in fp32 (fp64 stays fp64);
    gelu(+inf) = +inf and gelu(-inf) = 0, the limits."""
    check_tensors("reference.gelu_exact", x=x)
    x = _at_least_fp32(x)
    return _at_infinity(F.gelu(x, approximate="none"), x, None, 0.0)


def gelu_exact_grad(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """gelu'(x) * grad_out with gelu'(x) = Phi(x) + x phi(x), taken from autograd of F.gelu."""
    check_tensors("reference.gelu_exact_grad", x=x, grad_out=grad_out)
    x_ref = _at_least_fp32(x).detach().requires_grad_(True)
    with torch.enable_grad():
        (dx,) = torch.autograd.grad(F.gelu(x_ref, approximate="none"), x_ref, _at_least_fp32(grad_out))
    x = x_ref.detach()
    if torch.isinf(x).any():   # gelu'(+inf) = 1, gelu'(-inf) = 0 (the limits; autograd gives NaN)
        slope = _at_infinity(torch.zeros_like(x), x, 1.0, 0.0)
        dx = torch.where(torch.isinf(x), slope * _at_least_fp32(grad_out), dx)
    return dx


def res_layernorm_fold_reference(
    a: torch.Tensor, b: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(x_new, z) of the fold kernel: x_new = a + b[0] + ... in fp32, summed in branch order (so
    it is exactly what fp32 hardware adds give), z = affine-free LayerNorm of x_new, returned
    unrounded in fp32 (statistics in fp64)."""
    check_tensors("reference.res_layernorm_fold_reference", a=a, b=b)
    x_new = a.float()
    for branch in b:
        x_new = x_new + branch.float()
    z = F.layer_norm(x_new.double(), (x_new.shape[-1],), eps=eps).float()
    return x_new, z


def layernorm_affine_reference(
    x: torch.Tensor, gamma: torch.Tensor | None, beta: torch.Tensor | None, eps: float
) -> torch.Tensor:
    """The unfolded LayerNorm with affine, in x's dtype: what folded consumers must reproduce."""
    check_tensors("reference.layernorm_affine_reference", x=x)
    return F.layer_norm(x, (x.shape[-1],), weight=gamma, bias=beta, eps=eps)


def bf16_ulp(reference: torch.Tensor) -> torch.Tensor:
    """Spacing of bf16 numbers at |reference| (8 significant bits), floored at bf16's smallest
    normal: a correctly rounded bf16 result is within half of this of the exact value."""
    check_tensors("reference.bf16_ulp", reference=reference)
    magnitude = reference.abs().float().clamp_min(2.0**-126)
    return torch.exp2(torch.floor(torch.log2(magnitude)) - 7)


def cosine_and_max_abs(actual: torch.Tensor, expected: torch.Tensor) -> tuple[float, float]:
    """The published correctness metrics: cosine similarity of the flattened tensors and max |diff|,
    both in fp64."""
    check_tensors("reference.cosine_and_max_abs", actual=actual, expected=expected)
    if actual.numel() != expected.numel():
        raise KernelInputError(f"reference.cosine_and_max_abs: actual has shape {tuple(actual.shape)}, expected "
                               f"{tuple(expected.shape)}; they must hold the same number of elements")
    act, exp = actual.double().flatten(), expected.double().flatten()
    cosine = F.cosine_similarity(act, exp, dim=0).item()
    return cosine, (act - exp).abs().max().item()
