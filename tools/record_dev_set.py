"""Record the cost model's development-set traces: public NKI kernels, run unmodified on nkisim.

    python tools/record_dev_set.py --checkout aws-neuron/aws-neuron-sdk=PATH [--checkout ...] [--only NAME]

Each entry of `ENTRIES` names a public repository, a file in it, a kernel function and its arguments'
shapes. PATH is a clone or mirror of that repository (a git directory: its HEAD is read) or a plain
tree (then give its commit as PATH@COMMIT). The kernel file is imported from a temporary copy of
that tree, outside this repository, and launched unchanged through `nkisim.run(..., dry_run=True)`;
only the resulting instruction trace (what the cost model reads: engines, shapes, bytes,
dependencies; no kernel code) is stored, lzma-compressed, under benchmarks/dev_set/traces/, with
its provenance in benchmarks/dev_set/manifest.json. benchmarks/calibration.py reads them. The
attention_cte vectors of the first validation family are read from nki-library's test file
(tools/attention_cte_vectors.py); their figures are written into benchmarks/dev_set/figures.json too.
"""
from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import lzma
import pickle
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import kernels  # noqa: E402,F401  (makes `nki` importable)
import nkisim  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from attention_cte_vectors import TEST_FILE, Attention, Vector, reading, vectors  # noqa: E402  (tools/)
from checkouts import tree_of  # noqa: E402  (tools/)

DEV_SET = ROOT / "benchmarks" / "dev_set"
MANIFEST = DEV_SET / "manifest.json"
FIGURES = DEV_SET / "figures.json"
VALIDATION_FAMILY = "nki-library (validation)"
ATTENTION = "attention_cte"          # the name prefix of the attention_cte vectors' traces
SDK, NKILIB, AUTOTUNE = "aws-neuron/aws-neuron-sdk", "aws-neuron/nki-library", "awslabs/nki-autotune"


@dataclass(frozen=True)
class Entry:
    name: str                      # the trace's file name (without suffix)
    repo: str                      # owner/name on GitHub
    package_root: str              # the folder of the repository put on sys.path, as its own tests do
    module: str                    # the kernel's module, imported from there (or its file, "dir/file.py", where
                                   # the file name is no module name: nki-autotune's "kernel_hand_90.92mfu.py")
    function: str
    # (the imported module) -> (positional arguments, keyword arguments, LNC): tensors are empty (a dry run
    # needs shapes), other arguments are the repository's own types, taken from its module
    arguments: Callable[[ModuleType], tuple[list, dict, int]]
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    also_on_path: tuple[str, ...] = ()   # further folders of the repository its imports need (its own packages)


def _walkthrough(step: str, function: str, m: int) -> Entry:
    # The docs' matmul walkthrough (kernel-optimization page) profiles lhsT [8192, 4096] x rhs [8192, 8192]
    # fp32; its page blocks still return an nl.hbm tensor, which NKI 0.3.0+ rejects, so the same four
    # kernels are taken from the docs' maintained example file.
    shapes = ((8192, m), (8192, 8192))
    return Entry(f"matmul_{step}_M{m}", SDK, "nki/examples/matrix_multiplication", "matrix_multiplication_nki_kernels",
                 function, lambda _: ([torch.empty(s, dtype=torch.float32) for s in shapes], {}, 1), shapes, "float32")


def _rmsnorm_quant(tokens: int, hidden: int, dtype: str, norm: str, lower_bound: float) -> Entry:
    # nki-library's test vectors: hidden [1, S, H], RMS weight [1, H], row quantisation to fp8, LNC=2
    shapes = ((1, tokens, hidden), (1, hidden))

    def arguments(module: ModuleType) -> tuple[list, dict, int]:
        args = module.RmsNormQuantKernelArgs(quantization_type=module.QuantizationType.ROW, lower_bound=lower_bound,
                                             norm_type=module.NormType[norm], eps=1e-6)
        # numpy arguments, as nki-library's tests pass them (its fp8 output has no torch dtype)
        return [*(np.zeros(s, dtype=NUMPY_DTYPES[dtype]) for s in shapes), args, None], {}, 2

    return Entry(f"rmsnorm_quant_S{tokens}_H{hidden}_{dtype}_{norm.lower()}_lb{lower_bound}", NKILIB, "src",
                 "nkilib_src.nkilib.core.rmsnorm.rmsnorm_quant", "rmsnorm_quant_kernel", arguments, shapes, dtype)


def _attention_cte(v: Attention) -> Entry:
    # the layouts and optional inputs the test builds (build_attention_cte_input): q [bs, S_q, d] if tp_q else
    # [bs, d, S_q], k likewise with tp_k, v [bs_kv, S_kv, d], sink [bs, 1] fp32, prior_used_len int32 [1]
    q = (v.bs, v.seqlen_q, v.d) if v.tp_q else (v.bs, v.d, v.seqlen_q)
    k = (v.bs_kv, v.seqlen_kv, v.d) if v.tp_k else (v.bs_kv, v.d, v.seqlen_kv)
    kv = (v.bs_kv, v.seqlen_kv, v.d)
    prior = ((v.bs_kv, v.prior[0], v.d) if v.tp_k else (v.bs_kv, v.d, v.prior[0]), (v.bs_kv, v.prior[0], v.d)) if v.prior else ()

    def arguments(_: ModuleType) -> tuple[list, dict, int]:
        zeros = lambda s, dt=NUMPY_DTYPES[v.dtype]: np.zeros(s, dtype=dt)  # noqa: E731
        kwargs = dict(q=zeros(q), k=zeros(k), v=zeros(kv), scale=v.scale, causal_mask=v.causal,
                      k_prior=zeros(prior[0]) if prior else None, v_prior=zeros(prior[1]) if prior else None,
                      prior_used_len=np.full((1,), v.prior[1], dtype=np.int32) if prior else None,
                      sink=zeros((v.bs, 1), np.float32) if v.sink else None, sliding_window=v.sliding_window,
                      tp_q=v.tp_q, tp_k=v.tp_k, tp_out=v.tp_out, cp_offset=None, global_cp_deg=None,
                      cp_strided_q_slicing=False, cache_softmax=False, softmax_dtype="float32", mm_out_dtype="float32",
                      bound_min=None, bound_max=None)
        return [], kwargs, v.lnc

    return Entry(v.name, NKILIB, "src", "nkilib_src.nkilib.core.attention.attention_cte", "attention_cte", arguments,
                 (q, k, kv, *prior), v.dtype)


def _autotune(name: str, module: str, function: str) -> Entry:
    # awslabs/nki-autotune's matmul-family kernels at their one shape, 2048^3 bf16, compiled at LNC=1 (its
    # runner/compile.py default); kernel_transforms.py imports the repository's own nkigym package
    shapes = ((2048, 2048), (2048, 2048))
    return Entry(f"autotune_{name}", AUTOTUNE, ".", module, function,
                 lambda _: ([torch.empty(s, dtype=torch.bfloat16) for s in shapes], {}, 1), shapes, "bfloat16",
                 also_on_path=("nkigym/src",))


# awslabs/nki-autotune kernels whose trn2 MFU the repository records as measured (a second validation family)
AUTOTUNE_ENTRIES = (
    _autotune("kernel_15_2048", "kernel_transforms", "kernel_15"),
    _autotune("matmul_lhsT_rhs_hand_2048", "kernel_library/matmul/lhsT_rhs/kernel_hand_90.92mfu.py",
              "matmul_lhsT_rhs_nkigym"),
    _autotune("matmul_lhs_rhs_handtuned_2048", "kernel_library/matmul/lhs_rhs/kernel_handtuned_89.26mfu.py",
              "matmul_lhs_rhs_nkigym"),
    _autotune("rmsnorm_matmul_online_2048", "kernel_library/rmsnorm_matmul/kernel_hand_online.py",
              "rmsnorm_matmul_online"),
)
def _mamba(version: str, channels: int, seq_len: int) -> Entry:
    # the NKI docs' fused Mamba tutorial (nki/guides/tutorials/fused_mamba.rst) profiles the example file's
    # kernels on fp32 delta, u [1, channels, seq_len], A [channels, 16], B, C [1, 16, seq_len] (batch 1, state
    # size 16), launched without a grid (LNC=1)
    shapes = ((1, channels, seq_len), (1, channels, seq_len), (channels, 16), (1, 16, seq_len), (1, 16, seq_len))
    return Entry(f"mamba_{version}_C{channels}_S{seq_len}", SDK, "nki/examples/fused_mamba", "mamba_nki_kernels",
                 f"mamba_{version}", lambda _: ([torch.empty(s, dtype=torch.float32) for s in shapes], {}, 1),
                 shapes, "float32")


# the fused Mamba tutorial's figures the model has the mechanisms for (a third validation family): mamba_v1 at
# its two published shapes, mamba_v2 at 512 tokens, and mamba_v3 at five of the scaling table's nine lengths
# (mamba_v2 beyond 512 tokens spills SBUF, which the page shows and the model does not reproduce)
MAMBA_ENTRIES = (
    _mamba("v1", 256, 512), _mamba("v1", 4096, 512), _mamba("v2", 4096, 512),
    *(_mamba("v3", 4096, s) for s in (512, 1024, 2048, 4096, 8192)),
)
NUMPY_DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16, "float32": np.float32}
# The first validation family: nki-library's attention_cte test vectors with published figures (attention_cte_vectors.py).
# Its other kernels with published figures do not run unmodified: mlp (mlp_cte's tests) does not import at
# d2ad3a5 (IndentationError, mlp.py:203) and at 0759719 calls math unimported (NameError, mlp_parameters.py:641);
# mlp_tkg's kernel modules pass a raw dge_mode=3 (`_DGE_MODE_NONE = 3`, as do qkv_tkg and the norm_tkg
# subkernels), which NKI 0.3.0+ rejects ("Raw integer enum constants no longer accepted");
# find_nonzero_indices_with_count publishes none (every tpbSgCyclesSum is None).
ENTRIES = (
    # at the published M, and at a small M for the kernels a fit uses (a fit evaluates the model a few hundred
    # times; benchmarks/calibration.py scales their times by M, where tests show the model linear in M)
    *(_walkthrough(step, fn, m) for step, fn, ms in (("tiled", "nki_matmul_tiled_", (4096, 256)),
                                                      ("hoisted", "nki_matmul_hoist_load_", (4096, 1024)),
                                                      ("blocked", "nki_matmul_block_free_dimension_", (4096, 1024)),
                                                      ("final", "nki_matmul_fully_optimized_", (4096,)))
      for m in ms),
    # the shapes of nki-library's test vectors with published figures, and of its design spec's targets
    *(_rmsnorm_quant(s, 16384, "bfloat16", norm, lb) for s, norm, lb in (
        (2, "NO_NORM", 0.0), (2, "NO_NORM", 0.5), (2, "RMS_NORM", 0.0), (2, "RMS_NORM", 0.5), (160, "RMS_NORM", 0.0),
        (160, "NO_NORM", 0.0), (2048, "RMS_NORM", 0.0))),
    *(_rmsnorm_quant(s, h, "float16", "RMS_NORM", 0.0) for s, h in ((2048, 8192), (32768, 8192), (2048, 16384),
                                                                    (32768, 16384))),
    *AUTOTUNE_ENTRIES,
    *MAMBA_ENTRIES,
)


def record(entry: Entry, tree: Path) -> nkisim.Trace:
    roots = [str(tree / folder) for folder in (entry.package_root, *entry.also_on_path)]
    sys.path[:0] = roots
    try:
        module = _import(entry, tree)
    finally:
        del sys.path[:len(roots)]
    args, kwargs, lnc = entry.arguments(module)
    return nkisim.run(getattr(module, entry.function), *args, lnc=lnc, dry_run=True, **kwargs).trace


def _import(entry: Entry, tree: Path) -> ModuleType:
    if not entry.module.endswith(".py"):
        return importlib.import_module(entry.module)
    spec = importlib.util.spec_from_file_location(f"dev_set_{entry.name}", tree / entry.package_root / entry.module)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _source_path(entry: Entry) -> str:
    module = entry.module if entry.module.endswith(".py") else f"{entry.module.replace('.', '/')}.py"
    return module if entry.package_root == "." else f"{entry.package_root}/{module}"


def save(entry: Entry, trace: nkisim.Trace, commit: str) -> dict:
    (DEV_SET / "traces").mkdir(parents=True, exist_ok=True)
    with lzma.open(DEV_SET / "traces" / f"{entry.name}.trace.xz", "wb") as f:
        pickle.dump(trace, f, protocol=pickle.HIGHEST_PROTOCOL)
    return {"repo": entry.repo, "commit": commit, "path": _source_path(entry), "function": entry.function,
            "shapes": [list(s) for s in entry.shapes], "dtype": entry.dtype, "lnc": trace.lnc,
            "instructions": len(trace)}


def validation_figure(v: Vector, commit: str) -> dict:
    """The figures.json entry of one attention_cte test vector (the first validation family: never fitted)."""
    a, entry = v.attention, _attention_cte(v.attention)
    return {"family": VALIDATION_FAMILY, "kernel": "attention_cte", "id": "tpb_" + a.name.removeprefix("attention_cte_"),
            "shapes": [list(s) for s in entry.shapes], "dtype": a.dtype, "lnc": a.lnc, "trace": a.name,
            "metric": "total_time_us", "published": v.figure_ps / 1e6, "unit": "µs",
            "source": f"{NKILIB}@{commit}:{TEST_FILE}:{v.line}", "reading": reading(v), "includes_preamble": True,
            "kind": "regression threshold", "fitted": False,
            "not_fitted_because": "a validation figure (never fitted: the check of kernels the model was not fitted on)"}


def write_validation_figures(found: list[Vector], commit: str) -> None:
    """Replace the attention_cte validation family's figures in figures.json by those of these vectors, where the family was."""
    figures = json.loads(FIGURES.read_text())
    at = next((i for i, f in enumerate(figures) if f["family"] == VALIDATION_FAMILY), len(figures))
    kept = [f for f in figures if f["family"] != VALIDATION_FAMILY]
    kept[at:at] = [validation_figure(v, commit) for v in found]
    FIGURES.write_text(json.dumps(kept, indent=1, ensure_ascii=False) + "\n")


def write_manifest(manifest: dict) -> None:
    MANIFEST.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


def drop_stale_vectors(manifest: dict, current: set[str]) -> None:
    """Remove the traces of attention_cte vectors the test file no longer has (or that left the size bound)."""
    for stale in [n for n in manifest if n.startswith(ATTENTION) and n not in current]:
        del manifest[stale]
        (DEV_SET / "traces" / f"{stale}.trace.xz").unlink()
    write_manifest(manifest)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkout", action="append", default=[], metavar="OWNER/NAME=PATH[@COMMIT]",
                   help="where a repository's files are (a git directory, or a tree with its commit)")
    p.add_argument("--only", action="append", default=[], metavar="PREFIX",
                   help="record only the entries whose name starts with this")
    args = p.parse_args(argv)
    checkouts = dict(c.split("=", 1) for c in args.checkout)
    chosen = lambda name: not args.only or name.startswith(tuple(args.only))  # noqa: E731
    wanted = [e for e in ENTRIES if chosen(e.name)]
    # the attention_cte vectors are read from nki-library's test file, so from its checkout
    attention = not args.only or any(o.startswith(ATTENTION) or ATTENTION.startswith(o) for o in args.only)
    repos = {e.repo for e in wanted} | ({NKILIB} if attention else set())
    missing = sorted(repos - set(checkouts))
    if missing:
        p.error(f"no --checkout for {', '.join(missing)}")
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.is_file() else {}
    for repo in sorted(repos):
        with tree_of(checkouts[repo]) as (tree, commit):
            found = vectors((tree / TEST_FILE).read_text()) if repo == NKILIB and attention else []
            entries = [e for e in wanted if e.repo == repo] + [_attention_cte(v.attention) for v in found
                                                               if chosen(v.attention.name)]
            for entry in entries:
                manifest[entry.name] = save(entry, record(entry, tree), commit)
                write_manifest(manifest)
                print(f"{entry.name}: {manifest[entry.name]['instructions']} instructions ({repo}@{commit[:7]})")
            if found:
                write_validation_figures(found, commit)
                if all(chosen(v.attention.name) for v in found):
                    drop_stale_vectors(manifest, {v.attention.name for v in found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
