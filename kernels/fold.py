"""Folding a LayerNorm's gamma/beta into the Linear layers that read its output.

For a consumer y = W (z*gamma + beta) + c:   y = (W * gamma) z + (W beta + c),
where W * gamma scales W's input columns. So the fold kernel can emit the affine-free z, and the
consumers carry the affine. `FoldedPreNorm` pairs the kernel with consumers folded at construction,
so z can never meet unfolded weights (which would silently drop the affine).
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn

from .limits import KernelInputError, KernelTypeError, check_kind, described
from .res_layernorm import res_layernorm_fold


def fold_affine_into_linear(
    gamma: torch.Tensor | None, beta: torch.Tensor | None, linear: nn.Linear
) -> nn.Linear:
    """A new nn.Linear computing linear(z * gamma + beta) from z; the input layer is untouched.

    gamma/beta None mean 1 and 0 (a LayerNorm without affine or without bias). Otherwise each is a
    vector of the layer's in_features numbers: a torch tensor, a NumPy array or a list (they only
    enter host arithmetic). The products are formed in float64 and rounded once to the layer's dtype.
    """
    check_kind("fold_affine_into_linear", "linear", linear, nn.Linear, "an nn.Linear (the consumer of z)")
    weight = linear.weight.detach()
    hidden = linear.in_features
    w64 = weight.double()
    gamma64, beta64 = (_vector64(name, vec, hidden, weight.device) for name, vec in (("gamma", gamma), ("beta", beta)))
    folded_w = w64 * gamma64 if gamma64 is not None else w64
    folded_b = linear.bias.detach().double() if linear.bias is not None else torch.zeros(
        linear.out_features, dtype=torch.float64, device=weight.device
    )
    if beta64 is not None:
        folded_b = folded_b + w64 @ beta64
    folded = nn.Linear(hidden, linear.out_features, bias=True, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        folded.weight.copy_(folded_w.to(weight.dtype))
        folded.bias.copy_(folded_b.to(weight.dtype))
    return folded


def _vector64(name: str, vec: object, hidden: int, device: torch.device) -> torch.Tensor | None:
    """gamma or beta as a float64 tensor of shape (hidden,) on `device`, or None for None."""
    if vec is None:
        return None
    try:
        as64 = torch.as_tensor(vec.detach() if isinstance(vec, torch.Tensor) else vec, dtype=torch.float64,
                               device=device)
    except (TypeError, ValueError, RuntimeError):
        raise KernelTypeError(f"fold_affine_into_linear: {name} must be None or a vector of {hidden} numbers "
                              f"(torch tensor, NumPy array or list), got {described(vec)}") from None
    if tuple(as64.shape) != (hidden,):
        raise KernelInputError(
            f"fold_affine_into_linear: {name} has shape {tuple(as64.shape)}, expected ({hidden},)")
    return as64


class FoldedPreNorm(nn.Module):
    """residual add + LayerNorm + its consumer Linears, with gamma/beta folded into the Linears.

    forward(a, b) -> (x_new, (consumer_0(z), consumer_1(z), ...)): the fold kernel adds the B
    branches of b into the fp32 residual a, normalizes without affine into bf16 z, and feeds z
    only to the folded consumers (z is cast to each consumer's dtype). Inference only.

    `norm` is an nn.LayerNorm over one axis (a subclass only if it keeps LayerNorm's forward: the fold
    kernel computes that one); `consumers` any iterable of nn.Linear (a list, a tuple, a generator, an
    nn.ModuleList), read once.
    """

    def __init__(self, norm: nn.LayerNorm, consumers: Iterable[nn.Linear]) -> None:
        super().__init__()
        check_kind("FoldedPreNorm", "norm", norm, nn.LayerNorm,
                   "an nn.LayerNorm (the fold kernel computes LayerNorm, not RMSNorm or another norm)")
        if type(norm).forward is not nn.LayerNorm.forward:
            raise KernelTypeError(f"FoldedPreNorm: norm is a {type(norm).__qualname__}, a LayerNorm subclass with "
                                  "its own forward; the fold kernel computes nn.LayerNorm's, so it cannot stand in")
        if len(norm.normalized_shape) != 1:
            raise KernelInputError(
                f"FoldedPreNorm: the LayerNorm normalizes over {tuple(norm.normalized_shape)}; "
                "the fold kernel normalizes one hidden axis"
            )
        (hidden,) = norm.normalized_shape
        consumers = _consumer_list(consumers)
        for i, lin in enumerate(consumers):
            check_kind("FoldedPreNorm", f"consumer {i}", lin, nn.Linear, "an nn.Linear")
            if lin.in_features != hidden:
                raise KernelInputError(
                    f"FoldedPreNorm: consumer {i} has in_features={lin.in_features}, the LayerNorm width is {hidden}"
                )
        self.eps = float(norm.eps)
        self.hidden = hidden
        self.consumers = nn.ModuleList(fold_affine_into_linear(norm.weight, norm.bias, lin) for lin in consumers)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
        x_new, z = res_layernorm_fold(a, b, self.eps)
        return x_new, tuple(lin(z.to(lin.weight.dtype)) for lin in self.consumers)


def _consumer_list(consumers: object) -> list[nn.Linear]:
    """The consumers as a list, read once (a generator would be empty on a second pass)."""
    if isinstance(consumers, nn.Module) and not isinstance(consumers, nn.ModuleList):
        hint = "; wrap a single Linear in a list" if isinstance(consumers, nn.Linear) else ""
        raise KernelTypeError(f"FoldedPreNorm: consumers must be an iterable of nn.Linear (list, tuple, "
                              f"nn.ModuleList), got {described(consumers)}{hint}")
    try:
        listed = list(consumers)
    except TypeError:
        raise KernelTypeError(f"FoldedPreNorm: consumers must be an iterable of nn.Linear, got "
                              f"{described(consumers)}") from None
    if not listed:
        raise KernelInputError("FoldedPreNorm: give at least one consumer nn.Linear")
    return listed
