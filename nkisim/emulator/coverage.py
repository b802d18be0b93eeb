"""Which documented NKI 0.6 APIs nkisim emulates, and a clear error for the ones it does not.

Every documented name resolves (never an AttributeError, `nkisim/api_surface.py` lists them):
  * emulated        - a real implementation (the default for anything the shims define);
  * validated only  - arguments are checked and the instruction traced, but no values are computed
                      (a function decorated with `validated_only(why)`);
  * not emulated    - a `NotEmulated` stand-in (`NOT_EMULATED` below): importing it works, using it
                      (calling it, reading its attributes) raises `NkiValidationError` naming the API
                      and why.
When an API gains an implementation, delete its line from `NOT_EMULATED` (a test fails while a
real implementation is shadowed by a stale entry) and run `python tools/api_coverage.py --write`.
"""
from __future__ import annotations

from typing import Any, Callable, NoReturn, TypeVar

from .errors import NkiValidationError, kernel_location

EMULATED, VALIDATED_ONLY, NOT_EMULATED_STATUS = "emulated", "validated only", "not emulated"

_TRN3 = "NeuronCore-v4 (trn3) only; nkisim emulates trn2 (NeuronCore-v3), which does not have it"
_RNG = "the hardware pseudo-random generator's algorithm is not documented, so no emulation can reproduce its numbers"
_COLLECTIVE = ("a collective between NeuronCores of different ranks; nkisim emulates one logical NeuronCore "
               "(its one or two LNC programs), not a multi-rank cluster")
_PENDING = "not implemented in nkisim yet"
_MX = "MX (microscaling) packed types are not emulated yet"
_LOWERING = ("experimental nl API whose lowering to trn2 instructions is not documented (no engine, cost or "
             "rounding to reproduce)")

NOT_EMULATED: dict[str, str] = {
    # other instructions
    "nki.isa.iota": _PENDING,
    "nki.isa.affine_select": _PENDING,
    "nki.isa.scalar_tensor_tensor": _PENDING,
    "nki.isa.tensor_tensor_scan": _PENDING,
    "nki.isa.max8": _PENDING,
    "nki.isa.nc_find_index8": _PENDING,
    "nki.isa.nc_match_replace8": _PENDING,
    "nki.isa.bn_stats": _PENDING,
    "nki.isa.bn_aggr": _PENDING,
    "nki.isa.tensor_partition_reduce": _PENDING,
    "nki.isa.tensor_scalar_cumulative": _PENDING,
    "nki.isa.tensor_scalar_reduce": _PENDING,
    "nki.isa.tensor_copy_predicated": _PENDING,
    "nki.isa.range_select": _PENDING,
    "nki.isa.select_reduce": _PENDING,
    "nki.isa.sequence_bounds": _PENDING,
    "nki.isa.local_gather": _PENDING,
    "nki.isa.nc_n_gather": _PENDING,
    "nki.isa.nonzero_with_count": _PENDING,
    "nki.isa.topk": _PENDING,
    "nki.isa.dma_compute": _PENDING,
    # registers, dynamic loops, collectives between the two LNC programs
    "nki.isa.register_alloc": _PENDING,
    "nki.isa.register_load": _PENDING,
    "nki.isa.register_move": _PENDING,
    "nki.isa.register_store": _PENDING,
    "nki.isa.VirtualRegister": _PENDING,
    "nki.language.dynamic_range": _PENDING,
    "nki.language.fori_loop": _PENDING,
    "nki.language.while_loop": _PENDING,
    "nki.isa.nc_stream_shuffle": _PENDING,
    "nki.isa.core_barrier": _PENDING,
    "nki.isa.sendrecv": _PENDING,
    # NeuronCore-v4 (trn3) only
    "nki.isa.nc_matmul_mx": _TRN3,
    "nki.isa.quantize_mx": _TRN3,
    "nki.isa.activate2": _TRN3,
    "nki.isa.exponential": _TRN3,
    "nki.isa.rand2": _TRN3,
    "nki.language.abs_max": _TRN3,
    "nki.language.abs_min": _TRN3,
    "nki.isa.get_nc_sub_version": "the sub-version number of a trn2 target is not documented",
    # random numbers
    "nki.isa.rng": _RNG,
    "nki.isa.dropout": _RNG,
    "nki.isa.set_rng_seed": _RNG,
    "nki.isa.rand_set_state": _RNG,
    "nki.isa.rand_get_state": _RNG,
    "nki.language.rand": _RNG,
    "nki.language.random_seed": _RNG,
    "nki.language.dropout": _RNG,
    # nl element-wise APIs without a documented lowering, and operator constants of other targets
    **{f"nki.language.{name}": _LOWERING for name in ("ceil", "floor", "trunc", "cos", "tan", "fmod", "mod")},
    "nki.language.where": _PENDING,
    "nki.language.gather_flattened": _PENDING,
    "nki.language.prelu": "PReLU's slope is set only through activate2's relu_param, which is " + _TRN3,
    "nki.language.bypass": "the no-op operator of activate2, which is " + _TRN3,
    "nki.language.average": "its semantics are not documented on the reference page",
    # data types
    "nki.language.tfloat32": "tfloat32 storage and rounding on trn2 engines are not documented precisely enough",
    "nki.language.float8_e5m2_x4": _MX,
    "nki.language.float8_e4m3fn_x4": _MX,
    "nki.language.float4_e2m1fn_x4": _MX,
    # multi-rank collectives (nki.collectives)
    **{f"nki.collectives.{name}": _COLLECTIVE for name in (
        "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all", "all_to_all_v",
        "collective_permute", "collective_permute_implicit", "collective_permute_implicit_reduce",
        "collective_permute_implicit_current_processing_rank_id", "rank_id", "ReplicaGroup")},
}


class NotEmulated:
    """Stands in for a documented API nkisim does not emulate: it can be imported, passed around
    and compared, but calling it, indexing it or reading an attribute raises `NkiValidationError`."""

    __slots__ = ("api", "why")

    def __init__(self, api: str, why: str) -> None:
        object.__setattr__(self, "api", api)
        object.__setattr__(self, "why", why)

    def fail(self) -> NoReturn:
        raise NkiValidationError(f"{self.api} is not emulated by nkisim: {self.why} "
                                 f"(nkisim/README.md, 'API coverage') ({kernel_location()})")

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self.fail()

    def __getattr__(self, attr: str) -> NoReturn:
        if attr.startswith("__"):
            raise AttributeError(attr)
        self.fail()

    def __getitem__(self, key: Any) -> NoReturn:
        self.fail()

    def __repr__(self) -> str:
        return f"<{self.api}: not emulated by nkisim>"


def stand_in(module: str) -> Callable[[str], Any]:
    """A module `__getattr__` that serves the `NotEmulated` stand-ins of `module`'s documented names."""

    def __getattr__(attr: str) -> Any:
        why = NOT_EMULATED.get(f"{module}.{attr}")
        if why is None:
            raise AttributeError(f"module {module!r} has no attribute {attr!r}")
        return NotEmulated(f"{module}.{attr}", why)

    return __getattr__


F = TypeVar("F", bound=Callable[..., Any])


def validated_only(why: str) -> Callable[[F], F]:
    """Mark an implementation that checks and traces but computes no values; `why` says why."""

    def mark(fn: F) -> F:
        fn.__nkisim_coverage__ = (VALIDATED_ONLY, why)
        return fn

    return mark


def status(obj: Any) -> tuple[str, str]:
    """(status, note) of a resolved API object."""
    if isinstance(obj, NotEmulated):
        return NOT_EMULATED_STATUS, obj.why
    marked = getattr(obj, "__nkisim_coverage__", None) if callable(obj) else None
    if isinstance(marked, tuple):
        return marked
    return EMULATED, ""
