"""Argument checks at the boundary of nkisim's public functions (CONTRIBUTING.md, "Public API").

A user mistake in a call of `nkisim.run`, `estimate`, `show_kernel_diff`, ... raises here, naming the
function, the argument, what it got and what it accepts, instead of a raw AttributeError from inside.
Under the emulator and the cost model: imports nothing of nkisim.
"""
from __future__ import annotations

from typing import Any


def got(value: Any) -> str:
    """What a caller passed, for a message: 'None', 'int 42', 'list', 'Run'."""
    if value is None:
        return "None"
    kind = type(value).__qualname__
    return f"{kind} {value!r}" if isinstance(value, (int, float, str)) and len(repr(value)) <= 40 else kind


def check_kind(function: str, name: str, value: Any, kinds: type | tuple[type, ...], accepts: str,
               hint: str = "") -> None:
    """TypeError unless `value` is one of `kinds` (a bool is never an int here)."""
    if isinstance(value, kinds) and not (isinstance(value, bool) and bool not in _as_tuple(kinds)):
        return
    raise TypeError(f"{function}: {name} must be {accepts}, got {got(value)}{hint}")


def check_count(function: str, name: str, value: Any, low: int = 0) -> None:
    """An int >= low (a bool is not a count)."""
    check_kind(function, name, value, int, f"an int >= {low}")
    if value < low:
        raise ValueError(f"{function}: {name}={value} must be an int >= {low}")


def check_labelled(function: str, name: str, value: Any, kinds: type, accepts: str) -> None:
    """A non-empty {label: value} dict whose labels are strings and whose values are `kinds`."""
    check_kind(function, name, value, dict, f"a non-empty dict {{label: {accepts}}}")
    if not value:
        raise ValueError(f"{function}: {name} is empty; it needs at least one {{label: {accepts}}}")
    for label, item in value.items():
        check_kind(function, f"{name} label {label!r}", label, str, "a string")
        check_kind(function, f"{name}[{label!r}]", item, kinds, accepts)


def _as_tuple(kinds: type | tuple[type, ...]) -> tuple[type, ...]:
    return kinds if isinstance(kinds, tuple) else (kinds,)
