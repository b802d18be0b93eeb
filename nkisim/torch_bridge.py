"""`torch_neuronx.nki_op` on CPU: a real `torch.library` custom op around an NKI kernel wrapper.

As in torch-neuronx, the decorated wrapper (type-annotated, allocating nothing itself or using
`torch.empty_like`, calling an `@nki.jit` kernel) becomes the op's implementation AND its fake
(meta) implementation. Under fake tensors the emulator runs the kernel in dry-run mode (checks
and trace, no arithmetic) and returns outputs of the right shape, dtype and device, so
`torch.compile(fullgraph=True)` traces through the op without a graph break. Attach a backward
with `op.register_autograd(backward, setup_context=...)` on the returned op.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterable

import torch

from .emulator.kernel import IN_GRAPH


def nki_op(name: str, fn: Callable | None = None, mutates_args: str | Iterable[str] = {}) -> Any:  # noqa: B006
    """Register `fn` as the custom op `name` ("namespace::op"); usable as a decorator."""

    def build(wrapper: Callable) -> Any:
        @functools.wraps(wrapper)
        def in_graph(*args: Any, **kwargs: Any) -> Any:
            # the op is compiled with the graph: under NKI 0.7 its kernels take the compiler's LNC (EVRF066)
            token = IN_GRAPH.set(True)
            try:
                return wrapper(*args, **kwargs)
            finally:
                IN_GRAPH.reset(token)

        op = torch.library.custom_op(name, in_graph, mutates_args=mutates_args)
        op.register_fake(in_graph)
        return op

    return build if fn is None else build(fn)
