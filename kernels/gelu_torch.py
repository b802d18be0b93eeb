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

from ._backend import OP_NAMESPACE, check_device, check_tensors, launch, logical_nc_config, nki_op
from .gelu import gelu_bwd, gelu_fwd
from .limits import KernelTypeError, check_gelu_input, check_kind, check_lnc, check_same


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
        return _GELUErfBackward.apply(x, grad_out)


class _GELUErfBackward(torch.autograd.Function):
    """gelu'(x) * grad_out by the gelu_bwd kernel, as a graph node of its own: with create_graph=True
    a second derivative would need gelu''(x), which no kernel computes, so differentiating it raises."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, grad_out: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            return torch.zeros_like(x)
        return gelu_bwd_op(_as_rows(x), _as_rows(grad_out)).reshape(x.shape)

    @staticmethod
    def backward(ctx, grad_grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        raise RuntimeError(
            "gelu_erf: double backward is not supported (a gradient of its gradient, e.g. a gradient penalty or "
            "a Hessian-vector product): its backward is the gelu_bwd kernel, which has no derivative kernel. "
            "Use torch.nn.functional.gelu where second derivatives are needed"
        )


def gelu_erf(x: torch.Tensor) -> torch.Tensor:
    """Exact (erf) GELU of a torch tensor of any shape, fp32 or bf16, differentiable once (a double
    backward raises). A NumPy array or a list is a KernelTypeError saying how to convert it."""
    check_tensors("gelu_erf", x=x)
    return _GELUErfFunction.apply(x)


class GELUErf(nn.Module):
    """Drop-in for `nn.GELU()` (default, exact erf) running the NKI kernels. Stateless."""

    approximate = "none"  # what nn.GELU calls its variant; kept so model code can introspect it

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gelu_erf(x)


def swap_gelu(model: nn.Module) -> int:
    """Replace every exact, default `nn.GELU` of `model` with a `GELUErf`; return how many slots changed.

    Looks through the whole module tree (any attribute name, Sequential/ModuleList slots too); a GELU
    held by several slots is replaced in every one of them (by one shared GELUErf, so the sharing is
    kept; each slot counts). Left in place, and named in one UserWarning with the reason:
    `nn.GELU(approximate="tanh")`, a different function, and subclasses of nn.GELU, which may compute
    something else (only `type(m) is nn.GELU` is known to be the exact erf GELU).
    """
    check_kind("swap_gelu", "model", model, nn.Module, "an nn.Module (a model)")
    if isinstance(model, nn.GELU):
        raise KernelTypeError("swap_gelu replaces GELU submodules; the model itself is an nn.GELU: use GELUErf() "
                              "instead")
    replacements: dict[int, GELUErf] = {}
    swapped = 0
    left: dict[str, list[str]] = {}      # why -> qualified names of the GELUs left in place
    for parent_name, parent in model.named_modules():
        # _modules, not named_children(): named_children() yields a module held by two slots only once
        for child_name, child in list(parent._modules.items()):
            if not isinstance(child, nn.GELU):
                continue
            qualified = f"{parent_name}.{child_name}" if parent_name else child_name
            if type(child) is not nn.GELU:
                left.setdefault(_SUBCLASS, []).append(f"{qualified} ({type(child).__qualname__})")
            elif child.approximate != "none":
                left.setdefault(_TANH, []).append(qualified)
            else:
                setattr(parent, child_name, replacements.setdefault(id(child), GELUErf()))
                swapped += 1
    if left:
        listed = "; ".join(f"{why}: {', '.join(names)}" for why, names in left.items())
        warnings.warn(f"swap_gelu left {sum(map(len, left.values()))} GELU module(s) unchanged. {listed}",
                      UserWarning, stacklevel=2)
    return swapped


_TANH = "nn.GELU(approximate='tanh') (GELUErf is the exact erf GELU, a different function)"
_SUBCLASS = "subclasses of nn.GELU, which may compute something else (only exact nn.GELU instances are swapped)"
