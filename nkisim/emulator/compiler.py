"""`nki.compiler` (NKI 0.7): the per-kernel configuration objects `nki.jit` takes as `compile_config=`
and `specialization_config=`, and the `AddressRotation` policy
(https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/api/nki.compiler.html, its source
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/_modules/nki/compiler.html and
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/api/generated/nki.jit.html).

The options steer neuronx-cc (address rotation, legalization, dead-code elimination, prefetch and
allocation fallback), not a kernel's results, so nkisim checks their names and types and records
them on the kernel (`Kernel.compile_config`), nothing more. An option left out keeps the compiler's
default (the pages' `...`). Two options name checks: `barrier_check` turns on the compiler's LNC core
barrier checker, while nkisim checks core_barrier pairing and cross-core races in every launch,
whatever it says; `allow_nested_config_override` is emulated (kernel.py, `check_nested_config`).
"""
from __future__ import annotations

import enum
from typing import Any, ClassVar

from .coverage import validated_only
from .errors import NkiArgumentError, kernel_location


class AddressRotation(enum.Enum):
    """Whether the backend may rotate a memory location's address: per allocation origin (AUTO), always
    (ENABLE) or never (DISABLE)."""

    AUTO = "auto"
    ENABLE = "enable"
    DISABLE = "disable"


class _Config:
    """Keyword-only options, each of one documented type; unset options read as `...`."""

    FIELDS: ClassVar[dict[str, type]] = {}

    def __init__(self, **options: Any) -> None:
        name = type(self).__name__
        for option, value in options.items():
            kind = self.FIELDS.get(option)
            if kind is None:
                raise NkiArgumentError(f"nki.compiler.{name}: unknown option '{option}' (its options: "
                                       f"{', '.join(self.FIELDS)}) ({kernel_location()})")
            if not isinstance(value, kind):        # 1 is not a bool here: isinstance(1, bool) is False
                raise NkiArgumentError(f"nki.compiler.{name}: {option} must be a {kind.__name__}, got "
                                       f"{type(value).__name__} {value!r} ({kernel_location()})")
        self._options = dict(options)

    def __getattr__(self, option: str) -> Any:
        if option in type(self).FIELDS:
            return self._options.get(option, ...)
        raise AttributeError(f"nki.compiler.{type(self).__name__} has no option {option!r}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other._options == self._options

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self._options.items(), key=lambda kv: kv[0]))))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self._options.items())})"


@validated_only("its options are checked and recorded on the kernel; they steer neuronx-cc, not results, but for "
                "nki_alloc_fallback=False, which makes an SBUF spill the out-of-memory error its page describes")
class CompileConfig(_Config):
    """Options for the compiler after specialization (`@nki.jit(compile_config=CompileConfig(...))`)."""

    FIELDS = {"address_rotation": AddressRotation, "non_ssa_legalization": bool, "dead_code_elim": bool,
              "barrier_check": bool, "prefetch_auto": bool, "nki_alloc_fallback": bool}


class SpecializationConfig(_Config):
    """Options for the specialization phase (`@nki.jit(specialization_config=SpecializationConfig(...))`).
    `allow_nested_config_override=True` on the top-level kernel inlines a nested jit kernel whose config
    differs, with a warning, instead of raising."""

    FIELDS = {"allow_nested_config_override": bool}


__all__ = ["CompileConfig", "SpecializationConfig", "AddressRotation"]
