"""Which documented NKI APIs (0.6 and 0.7) nkisim emulates, and a clear error for the ones it does not.

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

from . import nki_versions
from .errors import NkiRemovedApiError, NkiValidationError, kernel_location

EMULATED, VALIDATED_ONLY, NOT_EMULATED_STATUS = "emulated", "validated only", "not emulated"

_TRN3 = "NeuronCore-v4 (trn3) only; nkisim emulates trn2 (NeuronCore-v3), which does not have it"
_COLLECTIVE = ("a collective between NeuronCores of different ranks; nkisim emulates one logical NeuronCore "
               "(its one or two LNC programs), not a multi-rank cluster")

NOT_EMULATED: dict[str, str] = {
    "nki.language.abs_max": _TRN3,
    "nki.language.abs_min": _TRN3,
    "nki.isa.get_nc_sub_version": "the sub-version number of a trn2 target is not documented",
    # operator constants of other targets
    "nki.language.prelu": "PReLU's slope is set only through activate2's relu_param, which is " + _TRN3,
    "nki.language.bypass": "the no-op operator of activate2, which is " + _TRN3,
    # data types
    "nki.language.tfloat32": "tfloat32 storage and rounding on trn2 engines are not documented precisely enough",
    "nki.language.uint64": "declared in the 2.33 nki.language module source, but no readable 2.33 page says which "
                           "instructions take a 64-bit unsigned tensor (nl.int64 is emulated as its pages describe)",
    # multi-rank collectives (nki.collectives), with NKI 0.7's prepare/trigger splits
    **{f"nki.collectives.{name}": _COLLECTIVE for name in (
        "all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all", "all_to_all_v",
        "collective_permute", "collective_permute_implicit", "collective_permute_implicit_reduce",
        "collective_permute_implicit_current_processing_rank_id", "rank_id", "ReplicaGroup",
        "all_to_all_v_prepare", "all_to_all_v_trigger", "all_gather_v_prepare", "all_gather_v_trigger")},
    "nki.collectives.rg_partition_op": "how ReplicaGroup.from_partition_op groups ranks for " + _COLLECTIVE,
}

# Names earlier NKI releases removed, with the replacement the migration guide gives
# (SDK:nki/migration/index.rst): reading one raises `NkiRemovedApiError` at the kernel line.
_NO_MGRID = "removed in NKI 0.2.0 (with masks): index with integers and slices, or with .ap() access patterns"
REMOVED: dict[str, str] = {
    "nki.language.par_dim": "removed with block dimensions (NKI 0.2.0): the partition dim is always first; fold a "
                            "block dim into the free dims ((128, 8, 512) for (8, par_dim(128), 512)) or use a list "
                            "of tiles",
    "nki.language.mgrid": _NO_MGRID,
    "nki.language.arange": _NO_MGRID,
    **{f"nki.isa.tensor_copy_dynamic_{side}": "removed in NKI 0.4.0: use nisa.tensor_copy with an .ap(scalar_offset="
       "...) view" for side in ("src", "dst")},
}

# Implemented as a clear refusal (the API exists, calling it or making a tensor of it raises the
# reason; emulator/newer_cores.py): not emulated, for the coverage table.
REFUSED: dict[str, str] = {
    **{f"nki.isa.{name}": _TRN3 for name in ("nc_matmul_mx", "quantize_mx", "activate2", "exponential", "rand2")},
    **{f"nki.language.{name}": "MX packed dtype of nc_matmul_mx, which is " + _TRN3
       for name in ("float8_e5m2_x4", "float8_e4m3fn_x4", "float4_e2m1fn_x4")},
}
# Emulated, with a caveat the coverage table shows.
NOTES: dict[str, str] = {
    **{f"nki.language.{name}": "static indices and slices, and runtime indices on HBM grids (an NkiScalar or (1, 1) "
       "SBUF tensor for one coordinate, a (K, 1) one for K rows: gather / scatter DMA operands); runtime indices "
       "on on-chip grids and empty_like(transpose_axes=) of several tiles at once are not emulated (a clear error); the choices the "
       "readable pages leave open are listed in emulator/tile_grids.py"
       for name in ("tiles", "blocks", "alloc_tiles", "alloc_blocks", "NkiGrid", "NkiTileGrid", "NkiBlockGrid")},
    **{f"nki.language.{name}": "one step of a tensor, tile grid or block grid per index, a partial last tile or block "
       "clamped; address= (where each slot goes) is not emulated (a clear error), nor transpose_axes= for a step of "
       "several tiles (as empty_like); emulator/stream_buffers.py"
       for name in ("alloc_stream_buffers", "NkiStreamBuffers")},
    **{f"nki.language.{name}": "Python's range: NKI 0.7 deprecates the three as plain range, unrolled while the "
       "kernel is traced (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-loops.html)"
       for name in ("affine_range", "sequential_range", "static_range")},
    "nki.language.average": "an identifier only: NKI 0.6's tensor_partition_reduce op, read as the fp32 mean over the "
                            "partitions (the page lists it without defining it)",
    "nki.isa.topk": "sorted=False (the default) writes the results in no promised order: nkisim scrambles them; "
                    "sorted=True is not emulated (its order is not in the page's visible text); the last written "
                    "position's slots past k hold the uninitialised sentinel (emulator/isa_search.py)",
    "nki.language.NkiTensor": "the tensor type (isinstance, attributes, views); its constructor NkiTensor(shape, "
                              "dtype, storage, ...) is not emulated (a clear error): allocate with nl.ndarray",
    "nki.isa.core_barrier": "between the two cores of an LNC=2 launch; NKI 0.7's use at LNC=1 (two launches on the "
                            "paired physical cores) is not emulated: nkisim runs one launch at a time (a clear error)",
    "nki.isa.scalar_tensor_tensor": "NKI 0.7's fused reduction (reduce_cmd, reduce_op, reduce_res) is not emulated: "
                                    "its semantics are not on the page",
    **{f"nki.isa.{name}": "documented rules and distribution; the random bits are not the hardware's "
       "(emulator/isa_random.py)" for name in ("rng", "dropout", "set_rng_seed", "rand_set_state", "rand_get_state")},
    **{f"nki.language.{name}": f"lowers to nisa.{isa} (the lowering is nkisim's, undocumented); the random bits are "
       "not the hardware's" for name, isa in (("rand", "rng + tensor_scalar"), ("random_seed", "set_rng_seed"),
                                               ("dropout", "dropout"))},
    **{f"nki.language.{name}": f"lowers to one {isa} (the lowering is nkisim's: the SDK does not document it, so "
       "its engine and cost are estimates); values are numpy's, computed in fp32"
       for names, isa in ((("floor", "ceil", "trunc"), "Vector tensor_scalar"),
                          (("mod", "fmod"), "Vector tensor_tensor, or tensor_scalar with a number"),
                          (("cos", "tan"), "Scalar activation")) for name in names},
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


def not_in_this_version(key: str, what: str = "") -> str:
    """Why `what` (default: the row's own key, an API name) is refused: the emulated version lacks row `key`."""
    return (f"{what or key} is not in NKI {nki_versions.release()}: {nki_versions.unavailable(key)} "
            f"({kernel_location()})")


def stand_in(module: str, versioned: dict[str, Any] | None = None) -> Callable[[str], Any]:
    """A module `__getattr__` that serves `module`'s names of one NKI version only (`versioned`, their
    implementations; rows of `nki_versions.TABLE`) and the `NotEmulated` stand-ins of its documented names."""
    versioned = versioned or {}

    def __getattr__(attr: str) -> Any:
        qualified = f"{module}.{attr}"
        if qualified in nki_versions.ROWS:
            if not nki_versions.applies(qualified):
                raise NkiRemovedApiError(not_in_this_version(qualified))
            if attr in versioned:
                return versioned[attr]
        if qualified in REMOVED:
            raise NkiRemovedApiError(f"{qualified} is not in NKI {nki_versions.release()}: {REMOVED[qualified]} "
                                     f"({kernel_location()})")
        why = NOT_EMULATED.get(qualified)
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


def status(obj: Any, name: str = "") -> tuple[str, str]:
    """(status, note) of the resolved API object `obj` documented as `name`."""
    if name in REFUSED:
        return NOT_EMULATED_STATUS, REFUSED[name]
    if isinstance(obj, NotEmulated):
        return NOT_EMULATED_STATUS, obj.why
    marked = getattr(obj, "__nkisim_coverage__", None) if callable(obj) else None
    if isinstance(marked, tuple):
        return marked
    return EMULATED, NOTES.get(name, "")
