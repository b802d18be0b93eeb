"""Calibration report: the trn2 cost model vs the published trn2 measurements of the workshop kernels.

    .venv/bin/python benchmarks/calibration.py [--markdown]

Prints modeled vs published side by side and exits 1 when a GELU total_time falls outside ±15% of
the published figure or the model does not find the kernel DMA-bound. Every modeled number here is
a trn2 cost model estimate from a dry-run trace; every published number is quoted with its source.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))  # the lesson-7 variants

import kernels  # noqa: E402  (makes `nki` importable)
import nkisim  # noqa: E402
from kernels import gelu_bwd, gelu_fwd  # noqa: E402
from nkisim.profile import published  # noqa: E402
from nkisim.profile.calibration import compare, failures, format_table  # noqa: E402
from nkisim.profile.summary import ProfileSummary, estimate  # noqa: E402
from nkisim.costmodel.variants import with_dge_mode  # noqa: E402

FOLD_SHAPE = dict(rows=1280, hidden=768, branches=1)  # LNC=2: 5 tiles per core, 4 DMAs per tile = 40 DMAs


def modeled(kernel, *args, lnc: int = 1) -> tuple[ProfileSummary, nkisim.Trace]:
    """The cost model's estimate from a dry-run trace (also on a trn2 machine: this is the model)."""
    run = nkisim.run(kernel, *args, lnc=lnc, dry_run=True)
    return estimate(run.trace, run.sbuf_peak_bytes or None), run.trace


def gelu_inputs(shape=published.GELU_SHAPE) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.bfloat16)


def gelu_section() -> tuple[list, dict[str, ProfileSummary]]:
    x = gelu_inputs()
    fwd, fwd_trace = modeled(gelu_fwd, x)
    bwd, _ = modeled(gelu_bwd, x, x)
    rows = compare("gelu_fwd [3216, 4096] bf16", fwd, published.GELU_FWD | {"bound_by": published.GELU_BOUND_BY})
    rows += compare("gelu_bwd [3216, 4096] bf16", bwd, published.GELU_BWD | {"bound_by": published.GELU_BOUND_BY})
    return rows, {"gelu_fwd": fwd, "gelu_bwd": bwd, "_fwd_trace": fwd_trace}


def variants_section(fwd: ProfileSummary, fwd_trace) -> list[tuple[str, float, str]]:
    """(variant, modeled total µs, bound by): the variants published as 'no change', and LNC=2."""
    from lesson_kernels.gelu_tuning import gelu_fwd_double_buffered

    x = gelu_inputs()
    rows, cols = published.GELU_SHAPE
    out = [("gelu_fwd (as published)", fwd.total_time_us, fwd.bound_by)]
    out.append(("double buffering", modeled(gelu_fwd_double_buffered, x)[0].total_time_us, None))
    out.append(("wider free dim ([1608, 8192])", modeled(gelu_fwd, x.reshape(rows // 2, cols * 2))[0].total_time_us, None))
    out.append(("dge_mode=hwdge (Sync queue)", estimate(with_dge_mode(fwd_trace, "hwdge")).total_time_us, None))
    lnc2 = modeled(gelu_fwd, x, lnc=2)[0]
    out.append(("LNC=2, rows split over 2 cores (model prediction)", lnc2.total_time_us, lnc2.bound_by))
    return out


def fold_section() -> dict[str, float]:
    """LayerNorm fold with dge_mode.none (as shipped) vs the same trace with software DGE."""
    r, h, b = FOLD_SHAPE["rows"], FOLD_SHAPE["hidden"], FOLD_SHAPE["branches"]
    a = torch.empty((r, h), dtype=torch.float32)
    br = torch.empty((b, r, h), dtype=torch.bfloat16)
    run = nkisim.run(kernels.res_layernorm_fold_kernel, a, br, 1e-6, kernels.FOLD_SBUF_BUDGET, lnc=2, dry_run=True)
    out = {}
    for mode, trace in (("none", run.trace), ("swdge", with_dge_mode(run.trace, "swdge"))):
        s = estimate(trace)
        slots = s.timeline.slots
        first_add = min(x.start for x in slots if x.core == 0 and x.engine == "Vector" and x.opcode == "TENSOR_TENSOR")
        dge = [x for x in slots if x.opcode == "DGE" and x.core == 0]
        out[mode] = dict(total_us=s.total_time_us, first_add_us=first_add * 1e6, dmas=s.dma_transfer_count,
                         dge_us_per_dma=(sum(x.duration for x in dge) / len(dge) * 1e6) if dge else 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    md = args.markdown
    rows, summaries = gelu_section()
    print(f"## GELU, modeled vs published ({published.SOURCE})\n")
    print(format_table(rows, "published", markdown=md))
    print("\n## Variants of gelu_fwd (published: double buffering, wider free dim, hwdge made no change)\n")
    var = variants_section(summaries["gelu_fwd"], summaries["_fwd_trace"])
    base = var[0][1]
    _header(["variant", "modeled total_time", "vs gelu_fwd"], md)
    for name, t, _ in var:
        line = f"{name} | {t:,.1f} µs | {100 * (t - base) / base:+.1f}%"
        print(f"| {line} |" if md else line)
    fold = fold_section()
    print(f"\n## LayerNorm fold, software DGE vs dge_mode.none "
          f"(R={FOLD_SHAPE['rows']}, H={FOLD_SHAPE['hidden']}, B={FOLD_SHAPE['branches']}, LNC=2)\n")
    _header(["", "DMAs", "DGE per DMA", "first add starts at", "total_time"], md)
    pub = (f"published (software DGE) | ~{published.FOLD_SWDGE_DMA_COUNT} | ~{published.FOLD_SWDGE_US_PER_DMA} µs | "
           f"~{published.FOLD_FIRST_ADD_WAIT_US:.0f} µs | —")
    print(f"| {pub} |" if md else pub)
    for mode, f in fold.items():
        line = (f"model, dge_mode={mode} | {f['dmas']} | {f['dge_us_per_dma']:.2f} µs | {f['first_add_us']:.1f} µs | "
                f"{f['total_us']:,.1f} µs")
        print(f"| {line} |" if md else line)
    fwd = summaries["gelu_fwd"]
    print("\n## Instruction counts, [3216, 4096] bf16 forward\n")
    _header(["", "published native lowering", "published gelu_fwd", "model gelu_fwd"], md)
    for key, native in published.NATIVE_LOWERING_COUNTS.items():
        line = (f"{key[0]} {key[1]} | {native} | {published.GELU_FWD_COUNTS.get(key, 0)} | "
                f"{fwd.instruction_counts.get(key, 0)}")
        print(f"| {line} |" if md else line)
    missed = failures(rows)
    if missed:
        print("\nOUTSIDE THE BAND: " + "; ".join(f"{r.config} {r.metric}" for r in missed))
        return 1
    return 0


def _header(columns: list[str], markdown: bool) -> None:
    print("| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|" if markdown else " | ".join(columns))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description="trn2 cost model vs published trn2 figures")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables (for the book page)")
    return p


if __name__ == "__main__":
    sys.exit(main())
