"""The kernel-language rules of the emulated NKI, checked on a kernel's code before it runs.

NKI 0.6's front end specializes a kernel by interpreting its Python source and accepts a subset of
Python; NKI 0.7 traces the kernel with Python itself ("meta-programming code follows standard Python
semantics"), so most 0.6 rules do not apply to it (`nki_versions.TABLE` says which do). nkisim runs
the source with Python either way, so without these checks a kernel could use a construct the 0.6
front end rejects and still pass here. The checks read the kernel function and every helper it
reaches (plain Python functions and `nki.jit` kernels named by its globals or closures, the way the
compiler inlines them, and the methods of the user classes it names or takes as arguments), once per
code object and version (cached). Each rule cites the page that documents it; each error names the
rule and points at the offending line.

Rules that need a value rather than the source (a tensor compared or combined with Python operators;
a tensor as a condition, which is always true and warns) are checked on `NkiTensor` itself (`tensor.py`). Reading global or closure
state is legal; the walk returns what the kernel reads, and `compile_cache` checks at every launch
that a cached compilation would not run with a stale value.
"""
from __future__ import annotations

import ast
import dis
import enum
import functools
import inspect
import os
import sys
import textwrap
import types
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from . import nki_versions
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
# Language guide (NKI 0.6): "the keys must be string values".
GUIDE_DICTS = "nki/get-started/nki-language-guide.html (dictionaries)"

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


# per emulated version: kernel function -> the data it reads
_reads: "dict[str, weakref.WeakKeyDictionary[Callable, tuple[ExternalRead, ...]]]" = {
    v: weakref.WeakKeyDictionary() for v in nki_versions.VERSIONS}


def check_kernel(fn: Callable) -> tuple[ExternalRead, ...]:
    """Raise `NkiValidationError` if `fn` or a helper it reaches breaks a language rule of the
    emulated NKI; return the global and closure variables holding data that they read. Checked once
    per function object and version (a kernel's globals are read at its first launch)."""
    version = nki_versions.active()
    cached = _reads[version].get(fn)
    if cached is not None:
        return cached
    seen: set[types.CodeType] = set()
    reads: dict[tuple[int, str], ExternalRead] = {}
    pending = [fn]
    while pending:
        f = pending.pop()
        if f.__code__ in seen:
            continue
        seen.add(f.__code__)
        _check_source(f.__code__, version)
        for read in _check_bindings(f):
            reads.setdefault(read.identity, read)
            if isinstance(read.value(), type):
                pending.extend(_class_helpers(read.value(), read.where))
        pending.extend(_helpers(f))
    _reads[version][fn] = tuple(r for r in reads.values() if _is_data(r.value()))
    return _reads[version][fn]


def check_arguments(values: tuple, where: str) -> None:
    """The classes of kernel arguments that are user objects (an NKIObject config, say) follow the
    class rules, and their methods the language rules, as the kernel's own code does; `where` is the
    launching line."""
    for value in values:
        if isinstance(value, (tuple, list)):
            check_arguments(tuple(value), where)
        elif _is_user_class(type(value)):
            for method in _class_helpers(type(value), where):
                check_kernel(method)


@functools.lru_cache(maxsize=4096)
def _check_source(code: types.CodeType, version: str) -> None:
    """The syntax rules of `version`, from the function's source (skipped when the source is
    unavailable). `version` is the emulated one, passed to key the cache."""
    tree, first_line = _parse(code)
    if tree is None:
        return
    where = lambda node: f"{os.path.basename(code.co_filename)}:{first_line + node.lineno - 1}"
    prefix = f"NKI {nki_versions.release(version)} language"
    for node in ast.walk(tree):
        rule = _syntax_rule(node)
        if rule is not None:
            raise NkiValidationError(f"{prefix}: {rule} ({where(node)})")
    if nki_versions.applies("string-dict-keys"):
        node = _int_key_assignment(tree)
        if node is not None:
            raise NkiValidationError(
                f"{prefix}: dictionary key {ast.unparse(node.slice)} assigned to dict '{ast.unparse(node.value)}'; "
                f"NKI dictionaries support only string keys ({GUIDE_DICTS}) ({where(node)})")


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
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
        if any(n.split(".")[0] == "neuronxcc" for n in names):
            return f"import of neuronxcc inside a kernel is a compilation error since NKI 0.4.0 ({MIGRATION_PAGE})"
    if nki_versions.active() == nki_versions.V07:
        return None             # NKI 0.7 traces the kernel as Python: the remaining rules are 0.6's
    return _front_end_06_rule(node)


def _front_end_06_rule(node: ast.AST) -> str | None:
    """A construct of `node` that NKI 0.6's front end rejects (each one a 0.6-only row of the table)."""
    if isinstance(node, ast.Compare) and nki_versions.applies("is-comparison"):
        for op in node.ops:
            if isinstance(op, (ast.Is, ast.IsNot)):
                word = "is" if isinstance(op, ast.Is) else "is not"
                return (f"'{word}' comparison; the NKI compiler does not support is / is not (since NKI 0.3.0), "
                        f"use == / != ({MIGRATION_PAGE})")
    if isinstance(node, (ast.GeneratorExp, ast.Yield, ast.YieldFrom)) and nki_versions.applies("generators"):
        what = "generator expression" if isinstance(node, ast.GeneratorExp) else "'yield' (a generator function)"
        return (f"{what}; the NKI 0.6 front end does not support generators (NKI 0.7 adds them), use a list "
                f"comprehension or a loop ({GENERATOR_PAGE})")
    if isinstance(node, (ast.Global, ast.Nonlocal)) and nki_versions.applies("no-global-statements"):
        word = "global" if isinstance(node, ast.Global) else "nonlocal"
        return (f"'{word} {', '.join(node.names)}' writes state outside the kernel; NKI kernels must be pure "
                f"functions of their arguments (compiled kernels are cached) ({PURITY_PAGE})")
    if isinstance(node, ast.Dict) and nki_versions.applies("string-dict-keys"):
        for key in node.keys:
            if isinstance(key, ast.Constant) and not isinstance(key.value, str):
                return (f"dictionary key {key.value!r}; NKI dictionaries support only string keys "
                        f"({MIGRATION_PAGE})")
    if isinstance(node, ast.ClassDef) and nki_versions.applies("nkiobject-classes"):
        bases = [b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "?") for b in node.bases]
        if bases != ["NKIObject"]:
            return _class_message(node.name, bases)
    return None


def _class_message(name: str, bases: list[str]) -> str:
    return (f"class {name}({', '.join(bases)}); a class used in an NKI kernel must inherit from NKIObject and no "
            f"other class (NKI 0.7 adds plain classes and inheritance) ({CLASS_PAGE})")


def _int_key_assignment(tree: ast.AST) -> ast.Subscript | None:
    """`d[0] = v` (or `d[i] = v` with i a `range` loop variable) on a name bound to a dict display or
    dict(): a non-string key given by assignment (the 0.6 dict rule, reached without a literal)."""
    dicts, counters = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            value = node.value
            is_dict = isinstance(value, (ast.Dict, ast.DictComp)) or (
                isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "dict")
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if is_dict:
                dicts.update(t.id for t in targets if isinstance(t, ast.Name))
        if (isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call)
                and isinstance(node.iter.func, (ast.Name, ast.Attribute))
                and getattr(node.iter.func, "id", getattr(node.iter.func, "attr", "")).endswith("range")):
            counters.add(node.target.id)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name) and node.value.id in dicts):
            key = node.slice
            if ((isinstance(key, ast.Constant) and not isinstance(key.value, str))
                    or (isinstance(key, ast.Name) and key.id in counters)):
                return node
    return None


def return_location(fn: types.FunctionType) -> str:
    """'file.py:LINE' of the kernel's return statement (the last one), else of its def."""
    code = fn.__code__
    tree, first_line = _parse(code)
    returns = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Return)] if tree is not None else []
    line = first_line + max(returns) - 1 if returns else code.co_firstlineno
    return f"{os.path.basename(code.co_filename)}:{line}"


def _check_bindings(fn: types.FunctionType) -> list[ExternalRead]:
    """Global and closure reads: no legacy `neuronxcc.nki`; the ones holding data or a class are returned."""
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
            legacy = _legacy_name(value)
            if legacy is not None:
                raise NkiValidationError(
                    f"NKI {nki_versions.release()} language: the kernel uses {name!r}, {legacy} of the legacy "
                    f"neuronxcc package; neuronxcc.nki inside a kernel is a compilation error since NKI 0.4.0, "
                    f"use nki.* ({MIGRATION_PAGE}) ({read.where})")
            if _is_data(value) or isinstance(value, type):
                reads.append(read)
    return reads


def _legacy_name(value: Any) -> str | None:
    """What `value` is in the legacy `neuronxcc` package ("module neuronxcc.nki.language", "an object of
    neuronxcc.nki.language"), or None: a module, or an object (function, enum member, dtype) defined there."""
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}" if value.__name__.split(".")[0] == "neuronxcc" else None
    for module in (getattr(value, "__module__", None), type(value).__module__):
        if isinstance(module, str) and module.split(".")[0] == "neuronxcc":
            return f"an object of {module}"
    return None


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


def _is_user_class(cls: type) -> bool:
    module = sys.modules.get(cls.__module__)
    filename = getattr(module, "__file__", None) or ""
    return bool(filename) and _is_user_code(filename)


@functools.lru_cache(maxsize=1024)
def _class_methods(cls: type) -> tuple[types.FunctionType, ...]:
    """The functions a user class defines (methods, static and class methods, property accessors)
    that have source: the compiler reaches them through the class as it inlines their calls."""
    found = []
    for klass in cls.__mro__:
        if not _is_user_class(klass):
            continue
        for value in vars(klass).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            accessors = (value.fget, value.fset) if isinstance(value, property) else (value,)
            found += [f for f in accessors if isinstance(f, types.FunctionType)    # not dataclass-generated code,
                      and not f.__code__.co_filename.startswith("<")           # nor what Enum copies in
                      and _is_user_code(f.__code__.co_filename)]
    return tuple(found)


def _class_helpers(cls: type, where: str) -> tuple[types.FunctionType, ...]:
    """The methods of a user class the kernel uses; under NKI 0.6, first the class rule: it inherits
    from NKIObject and no other class (an Enum is translated to one, as the language guide shows)."""
    if not _is_user_class(cls):
        return ()
    if nki_versions.applies("nkiobject-classes") and not issubclass(cls, enum.Enum):
        bases = [b.__name__ for b in cls.__bases__]
        if bases != ["NKIObject"]:
            raise NkiValidationError(
                f"NKI {nki_versions.release()} language: {_class_message(cls.__name__, bases)} ({where})")
    return _class_methods(cls)


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

