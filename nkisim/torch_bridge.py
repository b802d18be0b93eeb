"""`torch_neuronx.nki_op` on CPU: a real `torch.library` custom op around an NKI kernel wrapper.

As in torch-neuronx, the decorated wrapper (type-annotated, allocating nothing itself or using
`torch.empty_like`, calling an `@nki.jit` kernel) becomes the op's implementation AND its fake
(meta) implementation. Under fake tensors the emulator runs the kernel in dry-run mode (checks
and trace, no arithmetic) and returns outputs of the right shape, dtype and device, so
`torch.compile(fullgraph=True)` traces through the op without a graph break. Attach a backward
with `op.register_autograd(backward, setup_context=...)` on the returned op.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch


def nki_op(name: str, fn: Callable | None = None, mutates_args: str | Iterable[str] = {}) -> Any:  # noqa: B006
    """Register `fn` as the custom op `name` ("namespace::op"); usable as a decorator."""

    def build(wrapper: Callable) -> Any:
        op = torch.library.custom_op(name, wrapper, mutates_args=mutates_args)
        op.register_fake(wrapper)
        return op

    return build if fn is None else build(fn)
