"""Which NKI the emulator speaks (0.7 by default, 0.6 on request), and the one table of what
belongs to which version.

Neuron SDK 2.33 ships NKI 0.7.0, which specializes kernels by tracing them with Python; SDK 2.32
ships NKI 0.6.0, whose front end interprets a subset of Python. 2.33 keeps the old front end behind
`NKI_COMPILER_FRONTEND=custom` (deprecated in 2.33, to be removed in the next release):
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/announcements/neuron2.x/announce-nki-specialization-change.html

Every rule or API that exists in one version only is a row of `TABLE`, with the page that documents
it; the emulator asks `applies(key)` instead of comparing versions. Rows keyed by an API's
qualified name (`nki.language.dynamic_range`) are served by the shims only in the versions they
list; in the others the name raises `NkiRemovedApiError` with the row's `instead`.
"""
from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Iterator

V06, V07 = "0.6", "0.7"
VERSIONS = (V06, V07)
DEFAULT = V07
RELEASE = {V06: "0.6.0", V07: "0.7.0"}
SDK = {V06: "2.32", V07: "2.33"}
FRONTEND_ENV = "NKI_COMPILER_FRONTEND"
CUSTOM_FRONTEND = "custom"      # the documented value that keeps NKI 0.6's specialization on SDK 2.33

_DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en"
RELEASE_NOTES_07 = f"{_DOCS}/v2.33.1/release-notes/components/nki.html"
MIGRATION_07 = f"{_DOCS}/v2.33.1/nki/migration/index.html#migrating-from-nki-0-6-0-to-nki-0-7-0"
ANNOUNCEMENT_07 = f"{_DOCS}/latest/about-neuron/announcements/neuron2.x/announce-nki-specialization-change.html"
MIGRATION_06 = f"{_DOCS}/v2.32.0/nki/migration/index.html"
GUIDE_06 = f"{_DOCS}/v2.32.0/nki/get-started/nki-language-guide.html"
EVRF066 = f"{_DOCS}/latest/compiler/error-codes/EVRF066.html"
LNC_06 = f"{_DOCS}/v2.32.0/nki/get-started/about/lnc.html"
LNC_07 = f"{_DOCS}/v2.33.1/nki/get-started/about/lnc.html"
SCALAR_07 = f"{_DOCS}/latest/nki/deep-dives/nki-scalar.html"
JIT_07 = f"{_DOCS}/v2.33.1/nki/api/generated/nki.jit.html"
COMPILER_07 = f"{_DOCS}/v2.33.1/nki/api/nki.compiler.html"
_API_06 = f"{_DOCS}/v2.32.0/nki/api/generated"
_API_07 = f"{_DOCS}/v2.33.0/nki/api/generated"
_GENERATED = f"{_DOCS}/latest/nki/api/generated"
STREAMING_07 = f"{_DOCS}/latest/nki/guides/tutorials/tiled-grid-streaming.html"


@dataclass(frozen=True)
class Row:
    """A rule or API that belongs to some NKI versions only."""

    key: str                      # a rule name, or an API's qualified name
    versions: tuple[str, ...]     # the NKI versions that have it
    what: str
    page: str
    instead: str = ""             # for an API: what a version without it offers instead


_SCALAR_07 = ("only NKI 0.7's tracer front end has it, the parser front end (NKI 0.6, NKI_COMPILER_FRONTEND=custom) "
              "rejects it; use nisa.register_load / register_store and a VirtualRegister there")
_TILE_GRIDS = "the tile-grid layout APIs arrive with NKI 0.7; index and slice NkiTensor views"
_STREAMS = ("stream buffers arrive with NKI 0.7's tile grids; allocate num_slots tiles with nl.ndarray and pick "
            "tiles[k % num_slots] yourself")
_SHARDS = "the shard-slice helpers arrive with NKI 0.7's tile grids; slice by nl.program_id() yourself"
_SPLIT = "the prepare/trigger split of a variable-length collective arrives with NKI 0.7; call it unsplit"
_COMPILER = ("per-kernel compiler configuration (nki.compiler, nki.jit's compile_config= and specialization_config=) "
             "arrives with NKI 0.7; NKI 0.6's nki.jit takes its options as keyword arguments")

TABLE: tuple[Row, ...] = (
    # --- the kernel language (frontend.py) ------------------------------------------------------
    Row("is-comparison", (V06,), "'is' / 'is not' in kernel code is not supported (use == / !=); under NKI 0.7 "
        "kernels are Python and `is` is Python's", f"{MIGRATION_06} (NKI 0.3.0: Replace is / is not with == / !=)"),
    Row("generators", (V06,), "no generator expressions or `yield`; NKI 0.7 adds them",
        f"{RELEASE_NOTES_07} (constructs the previous specialization did not support, such as generators)"),
    Row("string-dict-keys", (V06,), "dictionary keys are strings only", f"{GUIDE_06} (Dictionaries)"),
    Row("nkiobject-classes", (V06,), "a class used in a kernel inherits from NKIObject and no other class (an Enum "
        "is translated); NKI 0.7 adds class inheritance and plain classes", f"{GUIDE_06} (Class Support)"),
    Row("no-global-statements", (V06,), "no `global` / `nonlocal` (kernels are pure functions); under NKI 0.7 "
        "they are Python statements run while tracing", f"{GUIDE_06} (Kernel Caching)"),
    Row("structural-equality", (V06,), "`==` on NKI objects compares their fields; NKI 0.7 follows Python "
        "(identity, unless the class defines __eq__, as a dataclass does)",
        f"{GUIDE_06} (Class Support: Equality in NKI is structural); {ANNOUNCEMENT_07}"),
    # --- launches (kernel.py) -----------------------------------------------------------------
    Row("lnc-equals-runtime", (V06,), "a launch's LNC is its bracket (default 1) and equals "
        "NEURON_LOGICAL_NC_CONFIG when that is set (one LNC per runtime process)", LNC_06),
    Row("lnc-degree-check", (V07,), "NCC_EVRF066: a kernel whose LNC differs from the compiler's is rejected; an "
        "unbracketed launch (and nkisim.run without lnc=) takes its LNC from NEURON_LOGICAL_NC_CONFIG",
        f"{EVRF066}; {LNC_07}; {JIT_07}"),
    Row("jit-config-objects", (V07,), "nki.jit takes compile_config= (nki.compiler.CompileConfig) and "
        "specialization_config= (nki.compiler.SpecializationConfig)", f"{JIT_07}; {COMPILER_07}", _COMPILER),
    # --- API parameters (the 2.33 reference pages) -------------------------------------------
    Row("isa-activation-engine", (V07,), "nisa.activation and nisa.activate2 take engine= (default "
        "nisa.engine.scalar); the GpSimd engine runs them on NeuronCore-v4 and newer only, and the fused reduction "
        "(the accumulator) is the Scalar engine's only. NKI 0.6 has no engine= parameter",
        f"{_API_07}/nki.isa.activation.html; {_API_07}/nki.isa.activate2.html"),
    Row("partition-reduce-mean-xor", (V07,), "tensor_partition_reduce's ops are add, mean, max, bitwise_or, "
        "bitwise_and and bitwise_xor. nkisim reads `mean` as nl.mean (the only nl name of that reduction; max "
        "stays nl.maximum as before). NKI 0.6's page lists add, average, max, bitwise_or, bitwise_and: nkisim "
        "reads `average` as nl.average, the fp32 mean over the partitions",
        f"{_API_07}/nki.isa.tensor_partition_reduce.html; {_API_06}/nki.isa.tensor_partition_reduce.html"),
    Row("per-api-free-dims", (V07,), "per-API tile ranks: tensor_partition_reduce data/dst, memset dst and "
        "reciprocal data/dst at most 4 free dims, tensor_scalar_reduce data/dst and tensor_copy_predicated "
        "dst/predicate/tensor src at most 3, bn_aggr data at most 4 and dst at most 2, max8 src at most 4 and dst "
        "at most 2 (counted on the tile's shape, not on the merged access pattern); the 2.32 pages state no such "
        "limit, except max8's (row max8-ranks)",
        f"{_API_07}/nki.isa.tensor_partition_reduce.html; {_API_07}/nki.isa.memset.html; "
        f"{_API_07}/nki.isa.tensor_scalar_reduce.html; {_API_07}/nki.isa.bn_aggr.html; "
        f"{_API_07}/nki.isa.reciprocal.html; {_API_07}/nki.isa.tensor_copy_predicated.html; "
        f"{_API_07}/nki.isa.max8.html"),
    Row("max8-ranks", (V07,), "nisa.max8's src may have up to 4 free dims (rank 5) and its dst up to 2 (rank 3, "
        "still 8 elements per partition), the limits of row per-api-free-dims; NKI 0.6's page: src up to 3-D, dst "
        "always 2-D", f"{_API_07}/nki.isa.max8.html; {_API_06}/nki.isa.max8.html"),
    Row("topk-sorted", (V07,), "nisa.topk takes sorted= (default False) and states no order for the results; NKI "
        "0.6's page has no sorted= and promises ascending values, which AWS's nki-library says trn2 does not give "
        "(nkisim scrambles the order under both versions: emulator/isa_search.py)",
        f"{_API_07}/nki.isa.topk.html; {_API_06}/nki.isa.topk.html"),
    Row("copy-predicated-scalar-src", (V07,), "nisa.tensor_copy_predicated: reverse_pred=True only with a scalar "
        "src; a scalar src matches dst in kind only (a Python float needs a float dst dtype, a Python int an integer "
        "one) and is materialized in dst's dtype. NKI 0.6's page has neither rule (a scalar src is copied to dst)",
        f"{_API_07}/nki.isa.tensor_copy_predicated.html; {_API_06}/nki.isa.tensor_copy_predicated.html"),
    Row("mean-partition-axis", (V07,), "nl.mean(x, axis=0) reduces across the partitions (not mixed with free "
        "axes in one call; the result keeps dim 0 as size one whatever keepdims says); NKI 0.6's nl.mean takes "
        "free axes only. nkisim lowers it to one GpSimd tensor_partition_reduce with op mean",
        f"{_API_07}/nki.language.mean.html; {_API_06}/nki.language.mean.html"),
    Row("stt-fused-reduce", (V07,), "nisa.scalar_tensor_tensor's signature gains reduce_cmd (default "
        "reset_reduce), reduce_op and reduce_res; what they compute is not in the visible part of the page, so "
        "nkisim refuses non-default values as not emulated",
        f"{_API_07}/nki.isa.scalar_tensor_tensor.html"),
    Row("fori-loop-scalar-index", (V07,), "nl.fori_loop hands its body an NkiScalar i unless a bound is a "
        "VirtualRegister (NKI 0.6: always a VirtualRegister)",
        f"{_API_07}/nki.language.fori_loop.html; {_API_06}/nki.language.fori_loop.html"),
    Row("empty-like-transpose-address", (V07,), "nl.empty_like takes transpose_axes= (the shape permuted for a "
        "later dma_transpose) and address=", f"{_API_07}/nki.language.empty_like.html",
        "nl.empty_like's transpose_axes= and address= arrive with NKI 0.7; allocate with nl.ndarray(shape, dtype, "
        "buffer, address=...)"),
    Row("tensor-data", (V07,), "NkiTensor.data is the tensor itself, so an nl.ndarray tile and a tile-grid selection "
        "are both operands by .data (the NkiTileGrid page's example passes nl.ndarray(...).data to nisa.dma_copy)",
        f"{_API_07}/nki.language.NkiTileGrid.html",
        "NkiTensor.data arrives with NKI 0.7's tile grids; pass the NkiTensor itself"),
    Row("hbm-address-free-offset", (V07,), "nl.ndarray's address= of an HBM tensor is a 1-tuple (free_offset,); "
        "NKI 0.6's page gives one form, (partition_offset, free_offset), for every buffer",
        f"{_API_07}/nki.language.ndarray.html; {_API_06}/nki.language.ndarray.html"),
    Row("core-barrier-lnc1", (V07,), "nisa.core_barrier synchronises the two physical cores of an HBM stack at LNC "
        "degree 1 too (then each core is its own Logical NeuronCore running its own launch); NKI 0.6's page allows it "
        "only with LNC enabled", f"{_API_07}/nki.isa.core_barrier.html; {_API_06}/nki.isa.core_barrier.html"),
    Row("depends-on-kind", (V07,), "NkiInstruction.depends_on takes kind= (a nki.isa.dependency member): "
        "dependency.runtime, a hardware semaphore wait that orders the pair across engines; dependency.schedule, an "
        "issue-order constraint for the compiler's schedulers with no synchronisation (instructions on different "
        "engines may still overlap); leaving kind out keeps NKI 0.6's runtime dependency and is deprecated",
        f"{_API_07}/nki.isa.NkiInstruction.html; {_DOCS}/v2.32.0/nki/api/generated/nki.isa.NkiInstruction.html"),
    # --- APIs (served by the shims in these versions only) ------------------------------------
    Row("nki.language.dynamic_range", (V06,), "a hardware loop with register bounds (deprecated in NKI 0.6)",
        f"{ANNOUNCEMENT_07}; {MIGRATION_07}", "removed in NKI 0.7: use nl.fori_loop(lower, upper, body_fun)"),
    Row("while-register", (V06,), "`while reg:` on a VirtualRegister, a loop on device (deprecated in NKI 0.6)",
        f"{ANNOUNCEMENT_07}; {MIGRATION_07}", "removed in NKI 0.7: use nl.while_loop(init, body_fun)"),
    Row("register-any-dtype", (V07,), "a register loads any NKI dtype up to 32 bits (NKI 0.6's guide lists "
        "u8, u16, u32, i8, i16, i32 and fp32)", f"{_DOCS}/v2.33.0/nki/api/generated/nki.isa.register_load.html; "
        f"{GUIDE_06} (Dynamic Control Flow)"),
    Row("nki.isa.dependency", (V07,), "the kind of an NkiInstruction.depends_on dependency: runtime or schedule",
        f"{_API_07}/nki.isa.NkiInstruction.html; {_GENERATED}/nki.isa.dependency.html",
        "nki.isa.dependency arrives with NKI 0.7; NKI 0.6's depends_on(*producers) always adds a runtime "
        "(semaphore) dependency"),
    Row("nki.isa.NkiScalar", (V07,), "an integer computed on device, the future replacement of VirtualRegister",
        f"{MIGRATION_07}; {_GENERATED}/nki.isa.NkiScalar.html", _SCALAR_07),
    Row("nki.isa.scalar_load", (V07,), "a 1x1 int32/int64 tile into an NkiScalar",
        f"{_GENERATED}/nki.isa.scalar_load.html; {SCALAR_07}", _SCALAR_07),
    Row("nki.isa.scalar_store", (V07,), "an NkiScalar into a 1x1 tile of its width",
        f"{_GENERATED}/nki.isa.scalar_store.html; {SCALAR_07}", _SCALAR_07),
    Row("nki.language.int64", (V07,), "a 64-bit signed integer dtype of DMA and scalars: nisa.scalar_load reads an "
        "int64 1x1 tile into an NkiScalar of that width (only + - *; it offsets HBM access patterns, not on-chip "
        "ones, and cannot bound nl.fori_loop: its compare-and-branch is 32-bit); compute instructions refuse it",
        f"{_API_07}/nki.language.fori_loop.html; {_GENERATED}/nki.isa.scalar_load.html; "
        f"{_GENERATED}/nki.isa.scalar_store.html; {_GENERATED}/nki.isa.NkiScalar.html",
        "nl.int64 arrives with NKI 0.7; NKI 0.6's integer dtypes end at 32 bits (nl.int32, nl.uint32)"),
    Row("nki.language.uint64", (V07,), "a 64-bit unsigned integer dtype, declared in the 2.33 nki.language module "
        "source; no readable 2.33 page says which instructions take it (not emulated)",
        f"{_DOCS}/v2.33.0/_modules/nki/language.html",
        "nl.uint64 arrives with NKI 0.7; NKI 0.6's integer dtypes end at 32 bits (nl.int32, nl.uint32)"),
    *(Row(f"nki.language.{name}", (V07,), "tiled/blocked on-chip memory layout API",
          f"{RELEASE_NOTES_07}; {_GENERATED}/nki.language.{name}.html", _TILE_GRIDS)
      for name in ("tiles", "blocks", "alloc_tiles", "alloc_blocks", "NkiGrid", "NkiTileGrid", "NkiBlockGrid")),
    *(Row(f"nki.language.{name}", (V07,), "a pool of on-chip slots a kernel rotates through while it streams one dim "
          "of a tensor or tile grid (the tile-grid tutorials' software pipelining)",
          f"{_GENERATED}/nki.language.{name}.html; {STREAMING_07}", _STREAMS)
      for name in ("alloc_stream_buffers", "NkiStreamBuffers")),
    *(Row(f"nki.language.{name}", (V07,), what, f"{_GENERATED}/nki.language.{name}.html", _SHARDS)
      for name, what in (("contiguous_indices", "the adjacent coordinate slice one shard owns"),
                         ("interleaved_indices", "the round-robin coordinate slice one shard owns"))),
    *(Row(f"nki.collectives.{name}", (V07,), "prepare/trigger split of a variable-length collective",
          f"{RELEASE_NOTES_07}; {_GENERATED}/nki.collectives.{name}.html", _SPLIT)
      for name in ("all_to_all_v_prepare", "all_to_all_v_trigger", "all_gather_v_prepare", "all_gather_v_trigger")),
    Row("nki.collectives.rg_partition_op", (V07,), "how ReplicaGroup.from_partition_op groups ranks (bitwise_and, "
        "div, mod)", f"{_API_07}/nki.collectives.ReplicaGroup.html; {_DOCS}/v2.33.0/_modules/nki/collectives.html",
        "rg_partition_op and ReplicaGroup.from_partition_op arrive with NKI 0.7; list the rank-lists of a "
        "ReplicaGroup"),
    *(Row(f"nki.compiler.{name}", (V07,), what, f"{COMPILER_07}; {_GENERATED}/nki.compiler.{name}.html", _COMPILER)
      for name, what in (("CompileConfig", "per-kernel options for the compiler after specialization"),
                         ("SpecializationConfig", "per-kernel options for the specialization (tracing) phase"),
                         ("AddressRotation", "whether the backend may move a memory location's address"))),
)
ROWS: dict[str, Row] = {row.key: row for row in TABLE}
_KEYS = {v: frozenset(r.key for r in TABLE if v in r.versions) for v in VERSIONS}


def from_environment() -> str:
    """The version `NKI_COMPILER_FRONTEND` selects: `custom` keeps NKI 0.6's front end, unset is 0.7."""
    value = os.environ.get(FRONTEND_ENV, "").strip()
    if value == "":
        return DEFAULT
    if value == CUSTOM_FRONTEND:
        return V06
    raise ValueError(f"{FRONTEND_ENV}={value!r}: the documented value is {CUSTOM_FRONTEND!r} (the NKI 0.6 front end "
                     f"on Neuron SDK 2.33); unset it for NKI 0.7 ({ANNOUNCEMENT_07})")


def normalise(nki: str) -> str:
    """'0.7', '0.7.0' -> '0.7'; a clear error for anything else."""
    for version in VERSIONS:
        if nki in (version, RELEASE[version]):
            return version
    raise ValueError(f"nki={nki!r}: nkisim emulates NKI {' or '.join(VERSIONS)} "
                     f"(Neuron SDK {' / '.join(SDK[v] for v in VERSIONS)})")


def _initial() -> str:
    try:
        return from_environment()
    except ValueError:
        return DEFAULT         # install() reports the unknown value


_active = _initial()


_explicit: str | None = None      # the version an install(nki=...) chose: later plain install() calls keep it


def select(nki: str | None = None) -> str:
    """Make `nki` the emulated version; None keeps an earlier explicit choice, else takes what
    `NKI_COMPILER_FRONTEND` says. Returns the version."""
    global _active, _explicit
    if nki is not None:
        _explicit = normalise(nki)
    _active = _explicit or from_environment()
    return _active


def active() -> str:
    return _active


def release(version: str | None = None) -> str:
    """'0.7.0' for the active (or the given) version."""
    return RELEASE[version or _active]


def applies(key: str) -> bool:
    """Whether the rule or API `key` (a row of TABLE) belongs to the emulated version."""
    if key not in ROWS:
        raise KeyError(f"{key!r} is not a row of nki_versions.TABLE")
    return key in _KEYS[_active]


def unavailable(key: str) -> str:
    """Why `key` is not in the emulated version: the row's replacement and page."""
    row = ROWS[key]
    return f"{row.instead} ({row.page})"


@contextlib.contextmanager
def emulating(nki: str) -> Iterator[str]:
    """Emulate `nki` inside the block (tests, and a kernel written for one version)."""
    global _active
    outer, _active = _active, normalise(nki)
    try:
        yield _active
    finally:
        _active = outer
