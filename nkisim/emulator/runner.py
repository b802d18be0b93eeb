"""`nkisim.run`, and how it emulates kernels made by a foreign `nki.jit` (the real Neuron SDK's).

On a trn2 instance `import nki` is the real SDK, so kernel files hold the SDK's kernel objects.
`nkisim.run` still wants the emulator's outputs and trace (dry runs of large shapes, cost-model
profiles), so it takes the kernel's Python function and re-creates it over a copy of its globals in
which the SDK's `nki`, `nki.isa`, `nki.language` (and their enums, functions, kernels) are replaced
by the emulator's. Helper functions that reach the SDK (in the kernel's module or in others) are
re-created the same way, recursively. The copy is a snapshot taken at the first `nkisim.run` of a
kernel object (cached per object): module globals rebound later are not seen. The legacy
`neuronxcc.nki` is not swapped: a kernel reading it is refused, as by the toolchain since NKI 0.4.0
(`frontend.py`), never run as if it were `nki`.
"""
from __future__ import annotations

import enum
import importlib
import inspect
import types
from typing import Any

from ..arguments import check_kind, got
from .errors import NkiArgumentError
from .kernel import Kernel, Run, Launcher, launch, unbracketed_lnc

_FUNCTION_ATTRS = ("func", "fn", "function", "_func", "kernel")
_SDK_PACKAGES = ("nki",)
_cache: dict[int, tuple[Any, Kernel]] = {}   # id(kernel object) -> (the object, kept alive; its emulation)


def run(kernel: Any, *args: Any, lnc: int | None = None, dry_run: bool = False, **kwargs: Any) -> Run:
    """Launch `kernel` on the emulator and return outputs, trace and SBUF peak.

    `kernel` is an emulator jit kernel, a launch of one (`kernel[2]`, which runs at its LNC), a plain
    function, or a kernel made by the real Neuron SDK's `nki.jit` (its function is re-created over the
    emulator's `nki`, see below): on a trn2 instance this is still the emulator's run (CPU tensors);
    device runs are `kernel(...)` directly. `lnc` defaults to the launch's, else to an unbracketed
    launch's (`kernel(...)`: under NKI 0.7 NEURON_LOGICAL_NC_CONFIG when set, else 1)."""
    __tracebackhide__ = True
    check_kind("nkisim.run", "dry_run", dry_run, bool, "True or False")
    refuse_shadowed_options("nkisim.run", kernel, lnc=lnc, dry_run=dry_run)
    return run_launch("nkisim.run", kernel, args, kwargs, lnc, dry_run)


def run_launch(function: str, kernel: Any, args: tuple, kwargs: dict, lnc: int | None, dry_run: bool) -> Run:
    """`nkisim.run` for a public `function` that has already checked its own options."""
    __tracebackhide__ = True
    kernel, lnc = launch_of(function, kernel, lnc)
    k = emulated(kernel, function)
    k[lnc]  # validates lnc
    return launch(k, args, kwargs, lnc, dry_run)


def refuse_shadowed_options(function: str, kernel: Any, **given: Any) -> None:
    """`function`'s own keywords (`lnc=`, `dry_run=`) set up the launch and never reach the kernel: one the
    caller gave (not None or False) whose name is also a parameter of the kernel is ambiguous, so it is an
    error naming the unambiguous spelling (an NKI kernel has no keyword-only parameters: positional works),
    never a kernel silently run with its parameter's default."""
    fn = kernel_function(kernel.kernel if isinstance(kernel, Launcher) else kernel, function)
    parameters = list(inspect.signature(fn).parameters)
    for name, value in given.items():
        if value is not None and value is not False and name in parameters:
            raise NkiArgumentError(
                f"{function}: kernel '{fn.__name__}' has a parameter '{name}' of its own, but {function}'s "
                f"{name}={value!r} sets up the launch and would never reach it; pass the kernel's {name} "
                f"positionally (argument {parameters.index(name) + 1} of {fn.__name__})"
                + (", and the launch's LNC as kernel[n]" if name == "lnc" else ""))


def launch_of(function: str, kernel: Any, lnc: int | None) -> tuple[Any, int]:
    """(kernel, LNC) of `function(kernel, ..., lnc=lnc)`: a launch `kernel[n]` carries its LNC, which an
    explicit `lnc` must not contradict; without either, the LNC of an unbracketed launch `kernel(...)`."""
    if isinstance(kernel, Launcher) and kernel.lnc is None:     # nki.simulate(kernel): unbracketed
        kernel = kernel.kernel
    if isinstance(kernel, Launcher):
        if lnc is not None and lnc != kernel.lnc:
            raise ValueError(f"{function}: kernel is a launch at LNC={kernel.lnc} (kernel[{kernel.lnc}]) but "
                             f"lnc={lnc!r}; pass the kernel with lnc=, or kernel[n] alone")
        return kernel.kernel, kernel.lnc
    kernel_function(kernel, function)       # a kernel, or a TypeError naming `function`
    if lnc is None:
        return kernel, unbracketed_lnc()
    check_kind(function, "lnc", lnc, int, "1 or 2 (the logical core's physical cores)")
    if lnc not in (1, 2):
        raise ValueError(f"{function}: lnc={lnc}; trn2 supports LNC 1 or 2")
    return kernel, lnc


def emulated(kernel: Any, function: str = "nkisim.run") -> Kernel:
    """The emulator Kernel for `kernel`: an emulator kernel, a plain function or a foreign jit kernel;
    `function` is the public function whose argument it is (named by the error for anything else)."""
    if isinstance(kernel, Kernel):
        return kernel
    hit = _cache.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    fn = kernel_function(kernel, function)
    if isinstance(kernel, types.FunctionType) and not _reaches_sdk(fn.__globals__):
        return Kernel(fn, {})          # a plain function written against the emulator: nothing to rebind
    rebinder = _Rebinder()
    result = rebinder.kernel(kernel, fn)
    rebinder.finish()
    _cache[id(kernel)] = (kernel, result)
    return result


def kernel_function(kernel: Any, function: str = "nkisim.run", argument: str = "kernel") -> types.FunctionType:
    """The Python function inside a jit kernel object (`__wrapped__`, then common attribute names); the
    error for anything else names `function` and its `argument`."""
    candidates = [kernel] + [getattr(kernel, name, None) for name in _FUNCTION_ATTRS]
    for candidate in candidates:
        if candidate is None:
            continue
        fn = inspect.unwrap(candidate)
        if isinstance(fn, types.FunctionType):
            return fn
    kind = type(kernel)
    what = got(kernel) if kind.__module__ == "builtins" else f"a {kind.__module__}.{kind.__qualname__} object"
    raise TypeError(
        f"{function}: {argument} must be an nki.jit kernel, a launch kernel[n] or a Python function, got {what} "
        f"(no Python function found inside it: looked at __wrapped__ and the attributes "
        f"{', '.join(_FUNCTION_ATTRS)})")


def _is_sdk_name(module_name: Any) -> bool:
    return isinstance(module_name, str) and module_name.split(".")[0] in _SDK_PACKAGES


def _is_sdk_module(value: types.ModuleType) -> bool:
    # the emulator's own shim is also called `nki` when installed; it marks itself with __nkisim__
    return _is_sdk_name(value.__name__) and not getattr(value, "__nkisim__", False)


def _is_sdk_object(value: Any) -> bool:
    if isinstance(value, types.ModuleType):
        return _is_sdk_module(value)
    return _is_sdk_name(type(value).__module__) or _is_sdk_name(getattr(value, "__module__", None))


def _reaches_sdk(namespace: dict) -> bool:
    return any(_is_sdk_object(v) for v in namespace.values())


def _emulator_modules(sdk_module_name: str) -> list[types.ModuleType]:
    """The emulator's isa, language and nki modules, the one with the same role first
    (`nki.isa.*` -> isa, `nki.language.*` -> language, anything else -> nki)."""
    modules = {role: importlib.import_module(f"nkisim.emulator.{role}") for role in ("isa", "language")}
    modules["nki"] = importlib.import_module("nkisim.shims.nki")
    parts = sdk_module_name.split(".")
    role = next((r for r in ("isa", "language") if r in parts), "nki")
    return [modules[role]] + [m for r, m in modules.items() if r != role]


def _emulator_attr(sdk_module_name: str, name: str) -> Any:
    """The emulator's object called `name` (None if it has none), looked up in the same role's module first."""
    return next((getattr(m, name) for m in _emulator_modules(sdk_module_name) if hasattr(m, name)), None)


class _Rebinder:
    """Re-creates functions over copies of their globals in which SDK values are the emulator's.

    Copies are made first and their globals filled afterwards (`finish`), so functions and kernels
    that refer to each other, or to themselves, are copied once."""

    def __init__(self) -> None:
        self.copies: dict[int, Any] = {}                   # id(original function, globals or kernel) -> copy
        self.unfilled: list[tuple[dict, dict]] = []        # (original globals, their copy)

    def kernel(self, kernel: Any, fn: types.FunctionType) -> Kernel:
        if id(kernel) not in self.copies:
            self.copies[id(kernel)] = Kernel(self.function(fn), {})
        return self.copies[id(kernel)]

    def function(self, fn: types.FunctionType) -> types.FunctionType:
        if id(fn) in self.copies:
            return self.copies[id(fn)]
        namespace = self.copies.get(id(fn.__globals__))
        if namespace is None:
            namespace = self.copies[id(fn.__globals__)] = dict(fn.__globals__)
            self.unfilled.append((fn.__globals__, namespace))
        new = types.FunctionType(fn.__code__, namespace, fn.__name__, None, fn.__closure__)
        new.__kwdefaults__ = fn.__kwdefaults__
        new.__qualname__, new.__module__, new.__doc__ = fn.__qualname__, fn.__module__, fn.__doc__
        self.copies[id(fn)] = new
        if fn.__defaults__:
            new.__defaults__ = tuple(self.value(d) for d in fn.__defaults__)
        return new

    def finish(self) -> None:
        while self.unfilled:
            original, namespace = self.unfilled.pop()
            for name, value in original.items():
                namespace[name] = self.value(value)

    def value(self, value: Any) -> Any:
        """The emulator's counterpart of one global (or default) value; non-SDK values stay as they are."""
        if isinstance(value, types.FunctionType):
            return self.function(value) if _reaches_sdk(value.__globals__) else value
        if not _is_sdk_object(value):
            return value
        if isinstance(value, types.ModuleType):
            return _emulator_modules(value.__name__)[0]
        if isinstance(value, enum.Enum):           # e.g. DMA_NONE = nisa.dge_mode.none at module level
            enum_cls = _emulator_attr(type(value).__module__, type(value).__name__)
            members = getattr(enum_cls, "__members__", {})
            return members[value.name] if value.name in members else value
        own_module = getattr(value, "__module__", None)
        if _is_sdk_name(own_module) and hasattr(value, "__name__"):   # `from nki.language import ndarray` style
            twin = _emulator_attr(own_module, value.__name__)
            return value if twin is None else twin
        try:                                       # a foreign kernel object used as a sub-kernel
            return self.kernel(value, kernel_function(value))
        except TypeError:
            return value
