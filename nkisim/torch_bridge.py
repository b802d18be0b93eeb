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
import inspect
from typing import Any, Callable, Iterable

import torch

from .emulator.errors import NkiValidationError
from .emulator.kernel import IN_GRAPH, OP_WRITES, is_fake


def nki_op(name: str, fn: Callable | None = None, mutates_args: str | Iterable[str] = {}) -> Any:  # noqa: B006
    """Register `fn` as the custom op `name` ("namespace::op"); usable as a decorator. An input its kernels write
    in place must be listed in `mutates_args` (torch.library.custom_op's rule; with "unknown" any may be)."""

    def build(wrapper: Callable) -> Any:
        @functools.wraps(wrapper)
        def in_graph(*args: Any, **kwargs: Any) -> Any:
            # the op is compiled with the graph: under NKI 0.7 its kernels take the compiler's LNC (EVRF066)
            token, writes = IN_GRAPH.set(True), OP_WRITES.set([])
            try:
                result = wrapper(*args, **kwargs)
                if mutates_args != "unknown":
                    _check_declared_writes(name, wrapper, args, kwargs, OP_WRITES.get(), mutates_args)
                return result
            finally:
                IN_GRAPH.reset(token)
                OP_WRITES.reset(writes)

        op = torch.library.custom_op(name, in_graph, mutates_args=mutates_args)
        op.register_fake(in_graph)
        return op

    return build if fn is None else build(fn)


def _check_declared_writes(name: str, wrapper: Callable, args: tuple, kwargs: dict, written: list,
                           mutates_args: str | Iterable[str]) -> None:
    """Refuse an op whose kernels wrote an input tensor (or a view of it) that `mutates_args` does not list:
    "list every mutated Tensor argument in mutates_args" (torch.library.custom_op); undeclared, torch.compile
    may reorder the op with a read of that input or reuse its old value."""
    if not written:          # also every fake (tracing) run: a dry run writes nothing
        return
    declared = {mutates_args} if isinstance(mutates_args, str) else set(mutates_args)
    on_cpu = lambda t: isinstance(t, torch.Tensor) and t.device.type == "cpu" and not is_fake(t)  # noqa: E731
    memory = {t.untyped_storage().data_ptr() for t in written if on_cpu(t)}
    for arg, value in inspect.signature(wrapper).bind(*args, **kwargs).arguments.items():
        if (arg not in declared and on_cpu(value) and value.untyped_storage().nbytes()
                and value.untyped_storage().data_ptr() in memory):
            raise NkiValidationError(
                f"nki_op '{name}': its kernel wrote the input '{arg}' in place, but mutates_args does not list it; "
                f"declare it (mutates_args={{'{arg}'}}), or write a new output instead (torch.library.custom_op: "
                f"every tensor an op mutates must be in mutates_args)")
