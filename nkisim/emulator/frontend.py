"""The NKI 0.6 front end's language rules, checked on a kernel's code before it runs.

The NKI compiler specializes a kernel by interpreting its Python source, and it accepts a subset of
Python. nkisim runs the source with Python itself, so without these checks a kernel could use a
construct the real front end rejects and still pass here. The checks read the kernel function and
every helper it reaches (plain Python functions and `nki.jit` kernels named by its globals or
closures, the way the compiler inlines them), once per code object (cached). Each rule cites the
page that documents it; each error names the rule and points at the offending line.

Rules that need a value rather than the source (a tensor compared or combined with Python operators;
a tensor as a condition, which is always true and warns) are checked on `NkiTensor` itself (`tensor.py`). Reading global or closure
state is legal; the walk returns what the kernel reads, and `compile_cache` checks at every launch
that a cached compilation would not run with a stale value.
"""
from __future__ import annotations

import ast
import dis
import functools
import inspect
import os
import sys
import textwrap
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .errors import PACKAGE_DIR, NkiValidationError

# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/get-started/nki-language-guide.html
# ("Kernel Caching"): compiled kernels are cached by their input arguments, so kernels must be pure
# functions of them; global variables and closures over mutable objects can make the cache return a
# stale compiled kernel (the page describes a wrong result, not a compile error).
PURITY_PAGE = "nki/get-started/nki-language-guide.html#kernel-caching"
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/migration/index.html
# ("Replace is / is not with == / !=", NKI 0.3.0; "Dictionaries support only string keys", NKI 0.2.0;
# "neuronxcc.nki.* inside kernels - now a compilation error", NKI 0.4.0).
MIGRATION_PAGE = "nki/migration/index.html"
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/announcements/neuron2.x/announce-nki-specialization-change.html
# NKI 0.7.0 lists generators among "constructs the previous specialization did not support".
GENERATOR_PAGE = "about-neuron/announcements/neuron2.x/announce-nki-specialization-change.html"
# Language guide, "Class Support": a class used in a kernel inherits from NKIObject and no other class.
CLASS_PAGE = "nki/get-started/nki-language-guide.html#class-support"

_STDLIB = tuple({os.path.dirname(os.__file__) + os.sep, sys.prefix + os.sep, sys.base_prefix + os.sep})


MISSING = object()      # the value of a deleted global or an empty closure cell


@dataclass(frozen=True)
class ExternalRead:
    """A global or closure variable holding data (not code) that the kernel's code reads."""

    name: str
    kind: str                 # "global" or "closure variable"
    where: str                # 'file.py:LINE' of the first read
    holder: Any               # the globals dict or the closure cell: the variable, not its value now

    @property
    def identity(self) -> tuple[int, str]:
        return id(self.holder), self.name

    def value(self) -> Any:
        """The variable's value now (`MISSING` if it was deleted or is not assigned yet)."""
        if self.kind == "global":
            return self.holder.get(self.name, MISSING)
        try:
            return self.holder.cell_contents
        except ValueError:
            return MISSING


_reads: "weakref.WeakKeyDictionary[Callable, tuple[ExternalRead, ...]]" = weakref.WeakKeyDictionary()


def check_kernel(fn: Callable) -> tuple[ExternalRead, ...]:
    """Raise `NkiValidationError` if `fn` or a helper it reaches breaks an NKI 0.6 language rule;
    return the global and closure variables holding data that they read. Checked once per function
    object (a kernel's globals are read at its first launch)."""
    if fn in _reads:
        return _reads[fn]
    seen: set[types.CodeType] = set()
    reads: dict[tuple[int, str], ExternalRead] = {}
    pending = [fn]
    while pending:
        f = pending.pop()
        if f.__code__ in seen:
            continue
        seen.add(f.__code__)
        _check_source(f.__code__)
        for read in _check_bindings(f):
            reads.setdefault(read.identity, read)
        pending.extend(_helpers(f))
    _reads[fn] = tuple(reads.values())
    return _reads[fn]


@functools.lru_cache(maxsize=4096)
def _check_source(code: types.CodeType) -> None:
    """The syntax rules, from the function's source (skipped when the source is unavailable)."""
    tree, first_line = _parse(code)
    if tree is None:
        return
    where = lambda node: f"{os.path.basename(code.co_filename)}:{first_line + node.lineno - 1}"
    for node in ast.walk(tree):
        rule = _syntax_rule(node)
        if rule is not None:
            raise NkiValidationError(f"NKI 0.6 language: {rule} ({where(node)})")


def _parse(code: types.CodeType) -> tuple[ast.AST | None, int]:
    try:
        lines, first_line = inspect.getsourcelines(code)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None, 0
    # a lambda's source line may hold more than the lambda; check only the function itself
    body = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    return (body if body is not None else tree), max(first_line, 1)


def _syntax_rule(node: ast.AST) -> str | None:
    if isinstance(node, ast.Compare):
        for op in node.ops:
            if isinstance(op, (ast.Is, ast.IsNot)):
                word = "is" if isinstance(op, ast.Is) else "is not"
                return (f"'{word}' comparison; the NKI compiler does not support is / is not (since NKI 0.3.0), "
                        f"use == / != ({MIGRATION_PAGE})")
    if isinstance(node, (ast.GeneratorExp, ast.Yield, ast.YieldFrom)):
        what = "generator expression" if isinstance(node, ast.GeneratorExp) else "'yield' (a generator function)"
        return (f"{what}; the NKI 0.6 front end does not support generators (NKI 0.7 adds them), use a list "
                f"comprehension or a loop ({GENERATOR_PAGE})")
    if isinstance(node, (ast.Global, ast.Nonlocal)):
        word = "global" if isinstance(node, ast.Global) else "nonlocal"
        return (f"'{word} {', '.join(node.names)}' writes state outside the kernel; NKI kernels must be pure "
                f"functions of their arguments (compiled kernels are cached) ({PURITY_PAGE})")
    if isinstance(node, ast.Dict):
        for key in node.keys:
            if isinstance(key, ast.Constant) and not isinstance(key.value, str):
                return (f"dictionary key {key.value!r}; NKI dictionaries support only string keys "
                        f"({MIGRATION_PAGE})")
    if isinstance(node, ast.ClassDef):
        bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "?") for b in node.bases]
        if bases != ["NKIObject"]:
            return (f"class {node.name}({', '.join(bases)}); a class used in an NKI kernel must inherit from "
                    f"NKIObject and no other class ({CLASS_PAGE})")
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        if any(n.split(".")[0] == "neuronxcc" for n in names):
            return f"import of neuronxcc inside a kernel is a compilation error since NKI 0.4.0 ({MIGRATION_PAGE})"
    return None


def return_location(fn: types.FunctionType) -> str:
    """'file.py:LINE' of the kernel's return statement (the last one), else of its def."""
    code = fn.__code__
    tree, first_line = _parse(code)
    returns = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Return)] if tree is not None else []
    line = first_line + max(returns) - 1 if returns else code.co_firstlineno
    return f"{os.path.basename(code.co_filename)}:{line}"


def _check_bindings(fn: types.FunctionType) -> list[ExternalRead]:
    """Global and closure reads: no legacy `neuronxcc.nki`; the ones holding data are returned."""
    cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
    reads = []
    for code in _codes(fn.__code__):
        for ins in _name_loads(code):
            name = ins.argval
            if ins.opname in ("LOAD_DEREF", "LOAD_CLASSDEREF"):
                if name not in cells:        # a variable of an enclosing function inside the kernel
                    continue
                holder, kind = cells[name], "closure variable"
            elif name in fn.__globals__:
                holder, kind = fn.__globals__, "global"
            else:
                continue
            read = ExternalRead(name, kind, f"{os.path.basename(code.co_filename)}:"
                                            f"{ins.positions.lineno or code.co_firstlineno}", holder)
            value = read.value()
            if isinstance(value, types.ModuleType) and value.__name__.split(".")[0] == "neuronxcc":
                raise NkiValidationError(
                    f"NKI 0.6 language: the kernel uses the legacy module {value.__name__}; neuronxcc.nki inside a "
                    f"kernel is a compilation error since NKI 0.4.0, use nki.* ({MIGRATION_PAGE}) ({read.where})")
            if _is_data(value):
                reads.append(read)
    return reads


def _is_data(value: Any) -> bool:
    """A value the compiled kernel depends on: not code (functions, kernels, classes, modules), which
    the walk follows as helpers or which are NKI's own, and not an empty cell."""
    return value is not MISSING and not callable(value) and not isinstance(value, types.ModuleType)


def _codes(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _codes(const)


@functools.lru_cache(maxsize=4096)
def _name_loads(code: types.CodeType) -> tuple[dis.Instruction, ...]:
    return tuple(i for i in dis.get_instructions(code)
                 if i.opname in ("LOAD_GLOBAL", "LOAD_NAME", "LOAD_DEREF", "LOAD_CLASSDEREF"))


def _helpers(fn: types.FunctionType) -> list[types.FunctionType]:
    """User functions the kernel can call by name: globals and closure cells holding functions or
    kernels (their `__wrapped__` function), outside nkisim, the standard library and installed packages."""
    values: list[Any] = [fn.__globals__.get(i.argval) for code in _codes(fn.__code__) for i in _name_loads(code)
                         if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
    for cell in fn.__closure__ or ():
        try:
            values.append(cell.cell_contents)
        except ValueError:
            continue
    found = []
    for value in values:
        value = getattr(value, "__wrapped__", value)
        if isinstance(value, types.FunctionType) and _is_user_code(value.__code__.co_filename):
            found.append(value)
    return found


@functools.lru_cache(maxsize=1024)
def _is_user_code(filename: str) -> bool:
    path = os.path.abspath(filename) if not filename.startswith("<") else filename
    if path.startswith(PACKAGE_DIR) or "site-packages" in path:
        return False
    return not path.startswith(_STDLIB) or filename.startswith("<")

