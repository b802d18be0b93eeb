"""What changed between two versions of a kernel, as a diff a lesson shows before it runs the new one.

`show_kernel_diff(before, after)` takes kernels (the emulator's or the Neuron SDK's `nki.jit`
objects), plain functions, modules or source strings and returns a `KernelDiff`. In a notebook it
renders as a highlighted unified diff (a ```diff block, also on the book page); as text (nbval, a
terminal) it is the diff itself, headed by one line that counts the changed lines.
"""
from __future__ import annotations

import difflib
import inspect
import textwrap
import types
from dataclasses import dataclass
from typing import Any

from .arguments import check_count, check_kind, got
from .emulator.runner import kernel_function


def kernel_source(obj: Any, argument: str = "before") -> tuple[str, str]:
    """(name, dedented source) of a kernel object, a function, a module or a source string; anything
    else is a TypeError naming show_kernel_diff's `argument`."""
    if isinstance(obj, str):
        return "source", textwrap.dedent(obj)
    if isinstance(obj, types.ModuleType):
        return obj.__name__.rsplit(".", 1)[-1], inspect.getsource(obj)
    if not isinstance(obj, types.FunctionType) and (obj is None or type(obj).__module__ == "builtins"):
        raise TypeError(f"show_kernel_diff: {argument} must be a kernel, a function, a module or a source string, "
                        f"got {got(obj)}")
    fn = obj if isinstance(obj, types.FunctionType) else kernel_function(obj, "show_kernel_diff", argument)
    return fn.__name__, textwrap.dedent(inspect.getsource(fn))


@dataclass(frozen=True)
class KernelDiff:
    before: str
    after: str
    lines: tuple[str, ...]  # the unified diff, without its two file-header lines

    @property
    def added(self) -> int:
        return sum(1 for line in self.lines if line.startswith("+"))

    @property
    def removed(self) -> int:
        return sum(1 for line in self.lines if line.startswith("-"))

    def header(self) -> str:
        return f"{self.before} -> {self.after}: +{self.added} -{self.removed} lines"

    def __str__(self) -> str:
        return "\n".join([self.header(), *self.lines]) if self.lines else f"{self.header()} (identical)"

    def __repr__(self) -> str:  # text/plain: what nbval compares and a terminal shows
        return str(self)

    def _repr_markdown_(self) -> str:
        body = "\n".join(self.lines) if self.lines else "(identical)"
        return f"**{self.header()}**\n\n```diff\n{body}\n```"


def show_kernel_diff(before: Any, after: Any, context: int = 3, before_label: str | None = None,
                     after_label: str | None = None) -> KernelDiff:
    """The change from `before` to `after` (kernels, functions, modules or source strings), with
    `context` unchanged lines around each change; the labels default to the functions' names."""
    check_count("show_kernel_diff", "context", context)
    for name, label in (("before_label", before_label), ("after_label", after_label)):
        check_kind("show_kernel_diff", name, label, (str, type(None)), "a string or None")
    before_name, before_text = kernel_source(before, "before")
    after_name, after_text = kernel_source(after, "after")
    diff = difflib.unified_diff(before_text.splitlines(), after_text.splitlines(), n=context, lineterm="")
    lines = tuple(diff)[2:]  # drop the ---/+++ file headers: the header line names both sides
    return KernelDiff(before_label or before_name, after_label or after_name, lines)
