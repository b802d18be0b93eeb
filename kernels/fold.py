"""Folding a LayerNorm's gamma/beta into the Linear layers that read its output.

For a consumer y = W (z*gamma + beta) + c:   y = (W * gamma) z + (W beta + c),
where W * gamma scales W's input columns. So the fold kernel can emit the affine-free z, and the
consumers carry the affine. `FoldedPreNorm` pairs the kernel with consumers folded at construction,
so z can never meet unfolded weights (which would silently drop the affine).
"""
from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

from .res_layernorm import res_layernorm_fold


def fold_affine_into_linear(
    gamma: torch.Tensor | None, beta: torch.Tensor | None, linear: nn.Linear
) -> nn.Linear:
    """A new nn.Linear computing linear(z * gamma + beta) from z; the input layer is untouched.

    gamma/beta None mean 1 and 0 (a LayerNorm without affine or without bias). The products are
    formed in float64 and rounded once to the layer's dtype.
    """
    if not isinstance(linear, nn.Linear):
        raise TypeError(
            f"fold_affine_into_linear: linear must be an nn.Linear (the consumer of z), got {type(linear).__name__}"
        )
    weight = linear.weight.detach()
    hidden = linear.in_features
    for name, vec in (("gamma", gamma), ("beta", beta)):
        if vec is not None and tuple(vec.shape) != (hidden,):
            raise ValueError(f"fold_affine_into_linear: {name} has shape {tuple(vec.shape)}, expected ({hidden},)")
    w64 = weight.double()
    folded_w = w64 * gamma.detach().double() if gamma is not None else w64
    folded_b = linear.bias.detach().double() if linear.bias is not None else torch.zeros(
        linear.out_features, dtype=torch.float64, device=weight.device
    )
    if beta is not None:
        folded_b = folded_b + w64 @ beta.detach().double()
    folded = nn.Linear(hidden, linear.out_features, bias=True, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(folded_w.to(weight.dtype))
        folded.bias.copy_(folded_b.to(weight.dtype))
    return folded


class FoldedPreNorm(nn.Module):
    """residual add + LayerNorm + its consumer Linears, with gamma/beta folded into the Linears.

    forward(a, b) -> (x_new, (consumer_0(z), consumer_1(z), ...)): the fold kernel adds the B
    branches of b into the fp32 residual a, normalizes without affine into bf16 z, and feeds z
    only to the folded consumers (z is cast to each consumer's dtype). Inference only.
    """

    def __init__(self, norm: nn.LayerNorm, consumers: Sequence[nn.Linear]) -> None:
        super().__init__()
        if len(norm.normalized_shape) != 1:
            raise ValueError(
                f"FoldedPreNorm: the LayerNorm normalizes over {tuple(norm.normalized_shape)}; "
                "the fold kernel normalizes one hidden axis"
            )
        (hidden,) = norm.normalized_shape
        if not consumers:
            raise ValueError("FoldedPreNorm: give at least one consumer nn.Linear")
        for i, lin in enumerate(consumers):
            if lin.in_features != hidden:
                raise ValueError(
                    f"FoldedPreNorm: consumer {i} has in_features={lin.in_features}, the LayerNorm width is {hidden}"
                )
        self.eps = float(norm.eps)
        self.hidden = hidden
        self.consumers = nn.ModuleList(fold_affine_into_linear(norm.weight, norm.bias, lin) for lin in consumers)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        x_new, z = res_layernorm_fold(a, b, self.eps)
        return x_new, tuple(lin(z.to(lin.weight.dtype)) for lin in self.consumers)
