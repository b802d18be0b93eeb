"""The outputs of a bare eager `@nki.jit` call on tensors that require grad: backward through them raises.

A kernel has no gradient of its own. TorchNeuron trains through a kernel by registering it with
`torch_neuronx.nki_op` and giving the op a backward with `register_autograd` (How to work with NKI kernels
from torch-neuronx, "add a backward pass"); inside torch.compile a bare call is a custom op without one,
whose backward raises. Eagerly, the emulator hands back new tensors, which would silently carry no gradient
to the inputs; linking them to the inputs through `_NoGradient` makes the backward raise there too.
"""
from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_leaves, tree_map

from .errors import NkiValidationError


class _NoGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, output: torch.Tensor, kernel_name: str, *inputs: torch.Tensor) -> torch.Tensor:
        ctx.kernel_name = kernel_name
        return output.view_as(output)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> Any:
        raise NkiValidationError(
            f"kernel '{ctx.kernel_name}' has no gradient: a bare @nki.jit call is not differentiable; register the "
            "kernel with torch_neuronx.nki_op and give the op a backward with register_autograd (TorchNeuron, How "
            "to work with NKI kernels from torch-neuronx: add a backward pass)")


def without_gradient(kernel_name: str, arguments: Any, outputs: Any) -> Any:
    """`outputs`, linked to the arguments that require grad (when grad mode is on) by a backward that raises."""
    needing = [a for a in tree_leaves(arguments) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not needing or not torch.is_grad_enabled():
        return outputs
    return tree_map(lambda out: _NoGradient.apply(out, kernel_name, *needing)
                    if isinstance(out, torch.Tensor) and out.is_floating_point() else out,
                    outputs)
