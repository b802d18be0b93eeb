"""The documented NKI API surface, per version: every public name on the API reference pages.

Source: the API reference of Neuron SDK 2.32.0 / NKI 0.6.0 (aws-neuron-sdk `nki/api/*.rst` and the
stubs they render, `nki/api/nki/{,isa/,language/,collectives/}__init__.py`, release commit a3247f5b),
published at https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/index.html, and the
names NKI 0.7.0 (Neuron SDK 2.33) adds or removes: the ones its release notes and migration guide
name, with their API pages (`nkisim.emulator.nki_versions.TABLE`, one row per name). The 2.33 API
index could not be read whole here, so a 0.7 name those pages do not mention is not listed.
Names only (no text is copied); `doc_page()` gives each one's page.

`python -m nkisim.api_surface --write` resolves every name in the emulator's shims and writes the coverage table
in nkisim/README.md (status from `nkisim.emulator.coverage`); `tests/nkisim/test_api_surface.py`
checks that every name exists and that the table is current.
"""
from __future__ import annotations

import importlib
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from nkisim.emulator.nki_versions import ROWS, VERSIONS, active, emulating

DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api"

_NKI = ("jit", "simulate")

_ISA = (
    # instructions (nki.isa.rst, "NKI ISA")
    "nc_matmul", "nc_matmul_mx", "nc_transpose", "activation", "activation_reduce", "activate2",
    "tensor_reduce", "tensor_partition_reduce", "tensor_tensor", "tensor_tensor_scan", "scalar_tensor_tensor",
    "tensor_scalar", "tensor_scalar_reduce", "tensor_scalar_cumulative", "tensor_copy", "tensor_copy_predicated",
    "exponential", "reciprocal", "quantize_mx", "iota", "dropout", "affine_select", "range_select",
    "select_reduce", "sequence_bounds", "memset", "bn_stats", "bn_aggr", "local_gather", "nc_n_gather",
    "dma_copy", "dma_transpose", "dma_compute", "max8", "nc_find_index8", "nc_match_replace8",
    "nc_stream_shuffle", "register_alloc", "register_load", "register_move", "register_store",
    "core_barrier", "sendrecv", "rng", "rand2", "rand_set_state", "rand_get_state", "set_rng_seed",
    "nonzero_with_count", "topk",
    # NKI 0.7 scalars and dependency kinds (nki_versions.TABLE)
    "NkiScalar", "scalar_load", "scalar_store", "dependency",
    # config enums, target, constants
    "engine", "dma_engine", "reduce_cmd", "dge_mode", "oob_mode", "matmul_perf_mode",
    "nc_version", "get_nc_version", "get_nc_sub_version", "VirtualRegister", "NkiInstruction",
    "NkiValidationError",
    # module-level engine aliases (nki/api/nki/isa/__init__.py)
    "tensor_engine", "vector_engine", "scalar_engine", "gpsimd_engine", "unknown_engine",
)

_LANGUAGE = (
    # creation
    "ndarray", "zeros", "ones", "full", "zeros_like", "empty_like", "shared_constant",
    "shared_identity_matrix", "rand", "random_seed",
    # tensor class and types
    "NkiTensor", "NKIObject", "DType", "MemoryRegion",
    # tensor operations
    "load", "load_transpose2d", "store", "copy", "matmul", "transpose",
    # math
    "abs", "abs_max", "abs_min", "add", "arctan", "ceil", "cos", "divide", "exp", "floor", "log",
    "maximum", "minimum", "multiply", "negative", "power", "reciprocal", "rsqrt", "sign", "sin", "sqrt",
    "square", "subtract", "tan", "tanh", "trunc", "fmod", "mod",
    # activation and backpropagation
    "relu", "sigmoid", "silu", "silu_dx", "gelu", "gelu_dx", "gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx",
    "gelu_apprx_tanh", "mish", "softplus", "softmax", "erf", "erf_dx",
    # normalization and regularization
    "dropout", "rms_norm",
    # reductions
    "all", "max", "mean", "min", "prod", "sum", "var",
    # comparison, logical, bitwise
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
    # tensor manipulation, indexing
    "broadcast_to", "ds", "expand_dims", "where", "gather_flattened",
    # iterators, control flow
    "affine_range", "dynamic_range", "sequential_range", "static_range", "fori_loop", "while_loop",
    # memory hierarchy
    "psum", "sbuf", "hbm", "private_hbm", "shared_hbm", "is_psum", "is_sbuf", "is_hbm", "is_on_chip",
    # others
    "device_print", "no_reorder", "program_id", "num_programs", "program_ndim",
    # data types
    "bool_", "int8", "int16", "int32", "uint8", "uint16", "uint32", "float16", "float32", "bfloat16",
    "tfloat32", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "float8_e5m2_x4",
    "float8_e4m3fn_x4", "float4_e2m1fn_x4",
    "int64", "uint64",    # NKI 0.7 only (nki_versions.TABLE)
    # constants
    "tile_size", "prelu", "bypass", "average",
    # NKI 0.7 tiled/blocked on-chip layout (nki_versions.TABLE)
    "tiles", "blocks", "alloc_tiles", "alloc_blocks", "NkiGrid", "NkiTileGrid", "NkiBlockGrid",
    "contiguous_indices", "interleaved_indices", "alloc_stream_buffers", "NkiStreamBuffers",
)

_TILE_SIZE = ("pmax", "psum_fmax", "psum_bank_fmax", "psum_bank_fmax_bytes", "psum_num_banks", "sbuf_size_bytes",
              "sbuf_fmax", "sbuf_fmax_bytes", "gemm_stationary_fmax", "gemm_moving_fmax", "bn_stats_fmax",
              "psum_min_align", "sbuf_min_align", "total_available_sbuf_size")

# NkiTensor attributes and view methods (nki.language.NkiTensor page)
_NKI_TENSOR = ("shape", "strides", "offset", "name", "dtype", "buffer", "ndim", "size",
               "is_contiguous", "get_pattern", "is_indirect", "__getitem__", "permute", "broadcast",
               "expand_dim", "squeeze_dim", "reshape_dim", "flatten_dims", "reshape", "rearrange", "slice",
               "select", "vector_select", "ap", "view", "reinterpret_cast", "indirect")

_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_v", "reduce_scatter", "all_to_all", "all_to_all_v",
                "collective_permute", "collective_permute_implicit", "collective_permute_implicit_reduce",
                "collective_permute_implicit_current_processing_rank_id", "rank_id", "ReplicaGroup",
                # NKI 0.7 prepare/trigger splits (nki_versions.TABLE)
                "all_to_all_v_prepare", "all_to_all_v_trigger", "all_gather_v_prepare", "all_gather_v_trigger",
                # NKI 0.7's partition op of ReplicaGroup.from_partition_op (nki_versions.TABLE)
                "rg_partition_op")

# NKI 0.7's per-kernel configuration, passed to nki.jit (nki_versions.TABLE)
_COMPILER = ("CompileConfig", "SpecializationConfig", "AddressRotation")

# Used by public NKI 0.6 code but not on the API reference pages: `nki.dtype` and `nki.typing`
# (nki/migration/index.rst, "nki.typing module"), `nki.isa.constants` (nki-library imports its enums).
_ALSO_USED = {"nki": ("dtype", "typing", "collectives"), "nki.typing": ("tensor",),
              "nki.isa.constants": ("engine", "dge_mode", "oob_mode", "reduce_cmd", "matmul_perf_mode")}

DOCUMENTED: dict[str, tuple[str, ...]] = {
    "nki": _NKI,
    "nki.isa": _ISA,
    "nki.language": _LANGUAGE,
    "nki.language.tile_size": _TILE_SIZE,
    "nki.language.NkiTensor": _NKI_TENSOR,
    "nki.collectives": _COLLECTIVES,
    "nki.compiler": _COMPILER,
}


def all_names(version: str | None = None) -> list[str]:
    """Every documented or publicly used name of NKI `version` (default: the emulated one), fully
    qualified (`nki.isa.nc_matmul`), in page order; version="all" gives the names of every version."""
    names = [f"{module}.{name}" for module, members in DOCUMENTED.items() for name in members]
    names += [f"{module}.{name}" for module, members in _ALSO_USED.items() for name in members]
    if version == "all":
        return names
    return [n for n in names if n not in ROWS or (version or active()) in ROWS[n].versions]


def versions_of(qualified: str) -> tuple[str, ...]:
    """The NKI versions that have `qualified`."""
    return ROWS[qualified].versions if qualified in ROWS else VERSIONS


def doc_page(qualified: str) -> str:
    """The reference page documenting `qualified` (its module's page for names without their own)."""
    pages = ROWS[qualified].page.split("; ") if qualified in ROWS else []
    own = [url for url in pages if "/generated/" in url or "/_modules/" in url]
    if own:
        return own[0]
    module, _, name = qualified.rpartition(".")
    if module == "nki.language.tile_size":
        return f"{DOCS}/nki.language.tile_size.html"
    if module == "nki.language.NkiTensor":
        return f"{DOCS}/generated/nki.language.NkiTensor.html"
    if module == "nki.typing" or qualified == "nki.typing":
        return "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html"
    if qualified == "nki.collectives":
        return f"{DOCS}/nki.collectives.html"
    if module == "nki.isa.constants" or qualified == "nki.dtype":
        return ""          # not on the reference pages; used by nki-library
    return f"{DOCS}/generated/{qualified}.html"


# --- the coverage table ------------------------------------------------------------------------------
README = Path(__file__).with_name("README.md")
_BEGIN, _END = "<!-- api-coverage:begin (generated by `python -m nkisim.api_surface --write`) -->", \
    "<!-- api-coverage:end -->"


def resolve(qualified: str) -> Any:
    """The object the active `nki` shims give for `qualified` (AttributeError if it is missing)."""
    parts = qualified.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(qualified)


def coverage_rows() -> list[tuple[str, str, str]]:
    """(API, status, note) for every documented name of either version, resolved in nkisim's shims
    under a version that has it; the note of a name one version lacks says which has it."""
    from nkisim.emulator.coverage import status

    rows = []
    for name in all_names("all"):
        versions = versions_of(name)
        with emulating(versions[-1]):
            state, note = status(resolve(name), name)
        if versions != VERSIONS:
            only = f"NKI {' and '.join(versions)} only"
            note = f"{only}; {note}" if note else only
        rows.append((name, state, note))
    return rows


def coverage_table() -> str:
    rows = coverage_rows()
    counts = Counter(state for _, state, _ in rows)
    lines = [_BEGIN, "",
             f"{len(rows)} names: " + ", ".join(f"{counts[s]} {s}" for s in ("emulated", "validated only", "not emulated")),
             "", "| API | status | note |", "|---|---|---|"]
    for name, state, note in rows:
        page = doc_page(name)
        api = f"[`{name}`]({page})" if page else f"`{name}`"
        lines.append(f"| {api} | {state} | {note} |")
    lines += ["", _END]
    return "\n".join(lines)


def readme_with_table(text: str) -> str:
    """README text with its generated section replaced by the current table."""
    start, end = text.index(_BEGIN), text.index(_END) + len(_END)
    return text[:start] + coverage_table() + text[end:]


if __name__ == "__main__":
    import nkisim

    nkisim.install()
    if sys.argv[1:] == ["--write"]:
        README.write_text(readme_with_table(README.read_text()))
    else:
        print(coverage_table())
