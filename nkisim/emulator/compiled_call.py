"""A bare `@nki.jit` kernel call inside `torch.compile`: one node of the captured graph.

TorchNeuron's how-to: "Inside torch.compile(backend="neuron"): The kernel call becomes one node in the
captured graph and compiles together with the surrounding PyTorch operations"; in eager mode the kernel is
compiled "for the input shapes, data types, and non-tensor argument values of that call"
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/guides/how-to-work-with-nki.html).

Dynamo does not trace the emulator. While it traces, a launch calls `node`, which hands the call to a
`nonstrict_trace` function (Dynamo records it opaquely) that calls one custom op, `nkisim::jit_call(tensors,
site)`. `site` numbers the call site: the kernel, its LNC, the arguments' structure and their non-tensor
values. The op's fake implementation is a dry run of the kernel (its output shapes and dtypes), its
implementation a launch; like the ops `torch_neuronx.nki_op` registers, it runs as part of a compute graph
(the compiler's LNC, NCC_EVRF066). It has no gradient, and a kernel that writes one of its arguments is
refused: the page's ways to train through a kernel and to update a tensor in place are nki_op's
`register_autograd` and `mutates_args`.

Importing torch._dynamo costs seconds, so the node function is registered with Dynamo when torch._dynamo is
first imported (`_RegisterWithDynamo`), not when nkisim is.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils import _pytree as pytree

from . import dtypes
from .errors import NkiValidationError
from .ops import Op

OP_NAME = "nkisim::jit_call"


@dataclass
class _Site:
    """One call site of a kernel in a traced program: what the op needs besides the tensors."""

    kernel: Any
    lnc: int                         # 0: unbracketed, the LNC the launch takes at run time
    spec: pytree.TreeSpec            # structure of (args, kwargs)
    constants: tuple                 # the flattened leaves, None where a tensor goes
    out_spec: pytree.TreeSpec | None = None    # structure of the outputs, known after the first run

    def arguments(self, tensors: list[torch.Tensor]) -> tuple[tuple, dict]:
        given = iter(tensors)
        leaves = [next(given) if c is None else (None if c is _NONE else c) for c in self.constants]
        return pytree.tree_unflatten(leaves, self.spec)


class _NoneArgument:
    """Stands for a None argument while Dynamo traces: a nonstrict_trace input cannot be None."""

    def __eq__(self, other: object) -> bool:
        return self is other

    __hash__ = object.__hash__


_NONE = _NoneArgument()
_SITES: list[_Site] = []
_SITE_NUMBERS: dict[tuple, int] = {}
_node: Any = None                    # the nonstrict_trace function, once torch._dynamo is imported
_kernel_class: Any = None            # kernel.Kernel and kernel.launch_in_graph, given to `install`
_launch_in_graph: Any = None
_site_number: Any = None             # _site, which Dynamo never traces (when it falls back to tracing _in_graph)


def node(kernel: Any, lnc: int, args: tuple, kwargs: dict) -> Any:
    """The launch of `kernel` (kernel[lnc], or kernel(...) for lnc 0) as Dynamo traces it."""
    args = tuple(_NONE if a is None else a for a in args)
    kwargs = {k: _NONE if v is None else v for k, v in kwargs.items()}
    return _node(kernel, lnc, args, kwargs)


def registered() -> bool:
    """Whether Dynamo knows the node (torch._dynamo has been imported)."""
    return _node is not None


def _in_graph(kernel: Any, lnc: int, args: tuple, kwargs: dict) -> Any:
    """The node's body, run by AOT autograd's tracing (fake tensors) or by the eager backend (real ones)."""
    leaves, spec = pytree.tree_flatten((args, kwargs))
    leaves = [_value(leaf) for leaf in leaves]
    tensors = [leaf for leaf in leaves if isinstance(leaf, torch.Tensor)]
    constants = tuple(None if isinstance(leaf, torch.Tensor) else leaf for leaf in leaves)
    site = _site_number(_Site(kernel, lnc, spec, constants))
    outputs = torch.ops.nkisim.jit_call(tensors, site)
    return pytree.tree_unflatten(list(outputs), _SITES[site].out_spec)


def _value(leaf: Any) -> Any:
    """A symbolic number as its value, guarded: a Python float that changed between calls reaches the node as a
    SymFloat (Dynamo's automatic dynamic), but a kernel is compiled for the values of its non-tensor arguments
    (the how-to above), so the graph is specialised to this value and Dynamo recompiles when it changes."""
    if isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        from torch.fx.experimental.symbolic_shapes import guard_scalar   # loaded by Dynamo already
        return guard_scalar(leaf)
    return leaf


def _site(site: _Site) -> int:
    """The site's number; a site equal to an earlier one (same kernel, LNC, structure, values) reuses it."""
    key: tuple | None = (id(site.kernel), site.lnc, site.spec, site.constants)
    try:
        number = _SITE_NUMBERS.get(key)
    except TypeError:                # an unhashable constant: a site of its own
        key, number = None, None
    if number is None:
        number = len(_SITES)
        _SITES.append(site)
        if key is not None:
            _SITE_NUMBERS[key] = number
    return number


def _run(tensors: list[torch.Tensor], site: int) -> list[torch.Tensor]:
    """jit_call's implementation and fake implementation: launch (or, for fake tensors, dry-run) the kernel."""
    call = _SITES[site]
    args, kwargs = call.arguments(tensors)
    outputs, written = _launch_in_graph(call.kernel, call.lnc, args, kwargs)
    _refuse_written_arguments(call.kernel, written)
    flat, call.out_spec = pytree.tree_flatten(outputs)
    if not all(isinstance(t, torch.Tensor) for t in flat):
        raise NkiValidationError(
            f"kernel '{call.kernel.fn.__name__}' called inside torch.compile returned {type(outputs).__name__}; a "
            "kernel in a compiled graph returns tensors")
    return flat


def _refuse_written_arguments(kernel: Any, written: tuple[str, ...]) -> None:
    if written:
        names = list(inspect.signature(kernel.fn).parameters)
        which = ", ".join(f"'{names[int(w)]}'" if w.isdigit() and int(w) < len(names) else f"'{w}'" for w in written)
        code = kernel.fn.__code__
        raise NkiValidationError(
            f"kernel '{kernel.fn.__name__}' writes its argument {which} in place: inside torch.compile a kernel "
            "call is one graph node, which must declare what it updates; register the kernel with "
            "torch_neuronx.nki_op(..., mutates_args={...}) and call the op (TorchNeuron, How to work with NKI "
            f"kernels from torch-neuronx) ({os.path.basename(code.co_filename)}:{code.co_firstlineno})")


def _register() -> None:
    """Tell Dynamo about the node and the NKI constants a kernel may take; define the op. Runs once."""
    global _node, _site_number
    from torch._dynamo.decorators import disable, nonstrict_trace

    for cls in {_kernel_class, Op, _NoneArgument, *(type(dt) for dt in dtypes.SUPPORTED)}:
        if cls not in pytree.SUPPORTED_NODES:
            pytree.register_constant(cls)
    op = torch.library.custom_op(OP_NAME, _run, mutates_args=())
    op.register_fake(_run)
    _site_number = disable(_site, reason="nkisim numbers a kernel call site in Python")
    _node = nonstrict_trace(_in_graph)


class _RegisterWithDynamo(importlib.abc.MetaPathFinder):
    """Runs `_register` right after torch._dynamo is imported (by torch.compile, torch._dynamo.explain, ...)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name != "torch._dynamo":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        load = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            load(module)
            _register()

        spec.loader.exec_module = exec_module
        return spec


def install(kernel_class: type, launch_in_graph: Callable) -> None:
    """Arrange for `_register` to run (now, if torch._dynamo is already imported). `launch_in_graph(kernel,
    lnc, args, kwargs)` launches as a graph node and returns (outputs, the arguments the kernel wrote)."""
    global _kernel_class, _launch_in_graph
    _kernel_class, _launch_in_graph = kernel_class, launch_in_graph
    if "torch._dynamo" in sys.modules:
        if _node is None:
            _register()
    elif not any(isinstance(f, _RegisterWithDynamo) for f in sys.meta_path):
        sys.meta_path.insert(0, _RegisterWithDynamo())
