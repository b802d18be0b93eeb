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
                inputs = inspect.signature(wrapper).bind(*args, **kwargs).arguments
                if mutates_args != "unknown":
                    _check_declared_writes(name, inputs, OP_WRITES.get(), mutates_args)
                _check_fresh_outputs(name, inputs, result)
                return result
            finally:
                IN_GRAPH.reset(token)
                OP_WRITES.reset(writes)

        op = torch.library.custom_op(name, in_graph, mutates_args=mutates_args)
        op.register_fake(in_graph)
        return op

    return build if fn is None else build(fn)


def _memory(t: Any) -> range | None:
    """The bytes of the emulated memory a real CPU tensor's storage spans (None for another tensor or value)."""
    if not isinstance(t, torch.Tensor) or t.device.type != "cpu" or is_fake(t):
        return None
    storage = t.untyped_storage()
    return range(storage.data_ptr(), storage.data_ptr() + storage.nbytes()) if storage.nbytes() else None


def _input_holding(inputs: dict, tensor: Any) -> str | None:
    """The name of the op input whose memory holds `tensor`'s (None if none does)."""
    held = _memory(tensor)
    if held is None:
        return None
    for arg, value in inputs.items():
        memory = _memory(value)
        if memory is not None and held.start in memory:
            return arg
    return None


def _check_declared_writes(name: str, inputs: dict, written: list, mutates_args: str | Iterable[str]) -> None:
    """Refuse an op whose kernels wrote an input tensor (or a view of it) that `mutates_args` does not list:
    "list every mutated Tensor argument in mutates_args" (torch.library.custom_op); undeclared, torch.compile
    may reorder the op with a read of that input or reuse its old value. A fake (tracing) run writes nothing."""
    declared = {mutates_args} if isinstance(mutates_args, str) else set(mutates_args)
    for arg in filter(None, (_input_holding(inputs, t) for t in written)):
        if arg not in declared:
            raise NkiValidationError(
                f"nki_op '{name}': its kernel wrote the input '{arg}' in place, but mutates_args does not list it; "
                f"declare it (mutates_args={{'{arg}'}}), or write a new output instead (torch.library.custom_op: "
                f"every tensor an op mutates must be in mutates_args)")


def _check_fresh_outputs(name: str, inputs: dict, result: Any) -> None:
    """Refuse an op that returns one of its inputs or a view of it. torch.library.custom_op refuses such an
    output on its own ("The output of this custom operator (1) must not also be an input to this custom operator
    and (2) may not alias any inputs"), but a kernel's output here is a new tensor over the same emulated memory,
    which its storage check does not see; let through, eager and compiled runs disagree after a write to it."""
    for output in torch.utils._pytree.tree_leaves(result):
        arg = _input_holding(inputs, output)
        if arg is not None:
            raise NkiValidationError(
                f"nki_op '{name}': an output is the input '{arg}' (the kernel returned it, or a view of it), but a "
                f"custom op's outputs must not alias its inputs (torch.library.custom_op); return a new tensor, or "
                f"return nothing and list '{arg}' in mutates_args")
