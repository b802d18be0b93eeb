"""PyTorch side of the exact-erf GELU: custom ops, autograd, an nn.GELU drop-in, a model swapper.

The ops launch the kernels on the runtime's LNC (NEURON_LOGICAL_NC_CONFIG, default 2), each
physical core taking half of the rows. The two NKI kernels are registered as torch custom ops through `torch_neuronx.nki_op` (nkisim
emulates it on CPU), so `torch.compile(..., fullgraph=True)` sees one opaque op per call instead
of a graph break. `gelu_erf` is the autograd Function on top: forward saves x, backward runs the
gelu_bwd kernel.
"""
from __future__ import annotations

import warnings

import torch
from torch import nn

from ._backend import OP_NAMESPACE, check_device, launch, logical_nc_config, nki_op
from .gelu import gelu_bwd, gelu_fwd
from .limits import check_gelu_input, check_lnc, check_same


@nki_op(f"{OP_NAMESPACE}::gelu_fwd", mutates_args={})
def gelu_fwd_op(x: torch.Tensor) -> torch.Tensor:
    """Custom op around the gelu_fwd kernel: [R, C] -> [R, C]."""
    check_gelu_input("gelu_fwd", "x", x.shape, x.dtype)
    check_device("gelu_fwd", x=x)
    lnc = logical_nc_config()
    check_lnc("gelu_fwd", lnc)
    return launch(gelu_fwd, lnc, x)


@nki_op(f"{OP_NAMESPACE}::gelu_bwd", mutates_args={})
def gelu_bwd_op(x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
    """Custom op around the gelu_bwd kernel: gelu'(x) * grad_out, [R, C]."""
    check_gelu_input("gelu_bwd", "x", x.shape, x.dtype)
    check_same("gelu_bwd", ("x", "grad_out"), (x.shape, grad_out.shape), (x.dtype, grad_out.dtype))
    check_device("gelu_bwd", x=x, grad_out=grad_out)
    lnc = logical_nc_config()
    check_lnc("gelu_bwd", lnc)
    return launch(gelu_bwd, lnc, x, grad_out)


def _as_rows(t: torch.Tensor) -> torch.Tensor:
    """View any tensor as the kernels' [R, C]: leading dims flattened into rows, C = last dim."""
    cols = t.shape[-1] if t.dim() else 1
    return t.contiguous().reshape(-1, cols)


class _GELUErfFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        if x.numel() == 0:
            return x.clone()
        return gelu_fwd_op(_as_rows(x)).reshape(x.shape)

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        if x.numel() == 0:
            return torch.zeros_like(x)
        return gelu_bwd_op(_as_rows(x), _as_rows(grad_out)).reshape(x.shape)


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """Exact (erf) GELU of a tensor of any shape, fp32 or bf16, differentiable."""
    return _GELUErfFunction.apply(x)


class GELUErf(nn.Module):
    """Drop-in for `nn.GELU()` (default, exact erf) running the NKI kernels. Stateless."""

    approximate = "none"  # what nn.GELU calls its variant; kept so model code can introspect it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_erf(x)


def swap_gelu(model: nn.Module) -> int:
    """Replace every exact `nn.GELU` submodule of `model` with `GELUErf()`; return the count.

    Looks through the whole module tree (any attribute name, Sequential/ModuleList slots too).
    `nn.GELU(approximate="tanh")` computes a different function, so those are left in place and
    listed in one UserWarning with their qualified names.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"swap_gelu takes an nn.Module (a model), got {type(model).__name__}")
    if isinstance(model, nn.GELU):
        raise TypeError("swap_gelu replaces GELU submodules; the model itself is an nn.GELU: use GELUErf() instead")
    swapped = 0
    tanh_modules: list[str] = []
    for parent_name, parent in model.named_modules():
        for child_name, child in list(parent.named_children()):
            if not isinstance(child, nn.GELU):
                continue
            qualified = f"{parent_name}.{child_name}" if parent_name else child_name
            if child.approximate == "none":
                setattr(parent, child_name, GELUErf())
                swapped += 1
            else:
                tanh_modules.append(qualified)
    if tanh_modules:
        warnings.warn(
            f"swap_gelu left {len(tanh_modules)} nn.GELU(approximate='tanh') module(s) unchanged "
            f"(GELUErf is the exact erf GELU, a different function): {', '.join(tanh_modules)}",
            UserWarning,
            stacklevel=2,
        )
    return swapped
