"""Calibration report: the trn2 cost model vs the published trn2 measurements of the workshop kernels.

    python benchmarks/calibration.py [--json | --markdown]

Fits the model's three uncertain DMA constants (per-engine rate, per-transfer fixed cost and the
assumed HBM write efficiency, each inside the range its constants.py row states) on the published
GELU figures: total_time and dma_active_time_percent of gelu_fwd and gelu_bwd, and the four variants
of gelu_fwd published as "no change" (each within ±3% of it). Then checks them held out: fitted on
the forward kernel's figures only, predict the backward one, and the reverse. The hidden figures
(ACTIVATE and TENSOR_TENSOR times) are never fitted: they are predictions of the documented cycle
rules. Also models the published no-effect variants, the predicted two-queue variant and the
LayerNorm fold with software DGE.

--json prints one JSON document (the schema below); the book's Calibration page and the README
table render from `report()`. Every modeled number is a trn2 cost model estimate from a dry-run
trace; every published number is quoted with its source. Reports a variant published as "no
change" that leaves +-3% of the baseline; exits 1 when the stored constants are not the fit's result.

    {"calibration": [{"config", "metric", "unit", "published", "modeled", "holdout_modeled"}, ...],
     "variants": [{"name", "modeled_us", "vs_baseline_pct"}, ...],
     "fold_software_dge": {"first_add_us", "published_first_add_us", "total_us_none", "total_us_swdge"}}
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import hashlib
import json
import sys
from functools import lru_cache
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "notebooks"))  # the lesson-7 variants (lesson_kernels)

import kernels  # noqa: E402  (makes `nki` importable)
import nkisim  # noqa: E402
from kernels import gelu_bwd, gelu_fwd  # noqa: E402
from nkisim.costmodel import constants as K  # noqa: E402
from nkisim.costmodel.fitting import TOLERANCE, Fit, Model, Target, fit  # noqa: E402
from nkisim.profile import published  # noqa: E402
from nkisim.profile.summary import ProfileSummary, estimate  # noqa: E402
from nkisim.costmodel.variants import with_dge_mode  # noqa: E402

CONFIG = {"gelu_fwd": "gelu_fwd [3216, 4096] bf16", "gelu_bwd": "gelu_bwd [3216, 4096] bf16"}
FIGURES = {"gelu_fwd": published.GELU_FWD, "gelu_bwd": published.GELU_BWD}
# (summary key, metric label, unit); the first two are fitted, the rest are predictions
METRICS = (("total_time_us", "total_time", "µs"),
           ("dma_active_time_percent", "dma_active_time_percent", "%"),
           ("activate_time_us", "Scalar ACTIVATE time", "µs"),
           ("vector_tensor_tensor_time_us", "Vector TENSOR_TENSOR time", "µs"))
NO_CHANGE = "(published: no change)"   # in the names of the variants published as making no difference
NO_CHANGE_BAND_PCT = TOLERANCE["vs_baseline_pct"][1]   # ... which must stay within this of the baseline
# The fit is computed once per version of the code it depends on (all of it under these paths) and
# kept in FIT_CACHE, so the Calibration page, this script and the tests of one build share it.
FIT_INPUTS = ("kernels", "nkisim", "notebooks/lesson_kernels", "benchmarks/calibration.py")
FIT_CACHE = ROOT / "build" / "calibration"
FOLD_SHAPE = dict(rows=1280, hidden=768, branches=1)  # LNC=2: 5 tiles per core, 4 DMAs per tile = 40 DMAs


def dry_trace(kernel, *args, lnc: int = 1) -> nkisim.Trace:
    """The emulator's instruction trace of one launch, without computing values."""
    return nkisim.run(kernel, *args, lnc=lnc, dry_run=True).trace


def gelu_input(shape=published.GELU_SHAPE) -> torch.Tensor:
    return torch.empty(shape, dtype=torch.bfloat16)   # a dry run needs shapes, not values


@lru_cache(maxsize=1)
def gelu_traces() -> dict[str, nkisim.Trace]:
    x = gelu_input()
    return {"gelu_fwd": dry_trace(gelu_fwd, x), "gelu_bwd": dry_trace(gelu_bwd, x, x)}


def predictions() -> dict[str, dict[str, float]]:
    """Each kernel's modeled summary, and each "no change" variant's change against gelu_fwd (%)."""
    out = {k: estimate(t, with_range=False).to_dict() for k, t in gelu_traces().items()}
    base = out["gelu_fwd"]["total_time_us"]
    for name, trace in variant_traces().items():
        if NO_CHANGE in name:
            out[name] = {"vs_baseline_pct": 100 * (estimate(trace, with_range=False).total_time_us / base - 1)}
    return out


def targets(kernels_: tuple[str, ...]) -> list[Target]:
    """The published figures of these kernels; gelu_fwd's include its variants published as "no change"."""
    out = [Target(k, key, FIGURES[k][key]) for k in kernels_ for key in TOLERANCE if key in FIGURES[k]]
    if "gelu_fwd" in kernels_:
        out += [Target(name, "vs_baseline_pct", 0.0) for name in variant_traces() if NO_CHANGE in name]
    return out


@lru_cache(maxsize=1)
def fits() -> dict[str, Fit]:
    """The fit on both kernels (what constants.py stores) and the two leave-one-out fits: read from
    FIT_CACHE if this version of the code computed them already, else computed and stored there (one
    process computes while the others wait for it)."""
    path = FIT_CACHE / f"fits-{code_fingerprint()}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.is_file():
            return {name: Fit(**f) for name, f in json.loads(path.read_text()).items()}
        model = Model(predictions)
        out = {"both": fit(model, targets(("gelu_fwd", "gelu_bwd"))),
               "gelu_fwd": fit(model, targets(("gelu_fwd",))),
               "gelu_bwd": fit(model, targets(("gelu_bwd",)))}
        path.write_text(json.dumps({name: dataclasses.asdict(f) for name, f in out.items()}))
        return out


def code_fingerprint() -> str:
    """sha256 over the path and content of every Python file under FIT_INPUTS."""
    digest = hashlib.sha256()
    for name in FIT_INPUTS:
        top = ROOT / name
        for path in sorted(top.rglob("*.py")) if top.is_dir() else [top]:
            digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def stored_params() -> dict[str, float]:
    return {name: getattr(K, row.attr) for name in fits()["both"].params
            for row in K.TABLE if row.name == name}


def calibration_rows() -> list[dict]:
    """Modeled (stored constants) and held-out (fitted on the other kernel) vs published."""
    modeled = predictions()
    other = {"gelu_fwd": "gelu_bwd", "gelu_bwd": "gelu_fwd"}
    rows = []
    for kernel, figures in FIGURES.items():
        holdout = fits()[other[kernel]].predictions[kernel]
        for key, label, unit in METRICS:
            if key in figures:
                rows.append({"config": CONFIG[kernel], "metric": label, "unit": unit,
                             "published": figures[key], "modeled": _round(modeled[kernel][key]),
                             "holdout_modeled": _round(holdout[key])})
    return rows


@lru_cache(maxsize=1)
def variant_traces() -> dict[str, nkisim.Trace]:
    """The published no-effect variants, the predicted two-queue variant and LNC=2, as traces."""
    from lesson_kernels.gelu_tuning import (gelu_fwd_double_buffered, gelu_fwd_two_queues, gelu_fwd_unrolled,
                                            gelu_fwd_wide)

    x = gelu_input()
    base = gelu_traces()["gelu_fwd"]
    return {"gelu_fwd (as published)": base,
            "double buffering (published: no change)": dry_trace(gelu_fwd_double_buffered, x),
            "static unrolling (published: no change)": dry_trace(gelu_fwd_unrolled, x),
            "wider free dim, 2 rows per partition (published: no change)": dry_trace(gelu_fwd_wide, x),
            "dge_mode=hwdge, Sync queue (published: no change)": with_dge_mode(base, "hwdge"),
            "loads and stores on two queues (prediction)": dry_trace(gelu_fwd_two_queues, x),
            "LNC=2, rows split over 2 cores (prediction)": dry_trace(gelu_fwd, x, lnc=2)}


def variant_rows() -> list[dict]:
    out, base = [], None
    for name, trace in variant_traces().items():
        t = estimate(trace, with_range=False).total_time_us
        base = base if base is not None else t
        out.append({"name": name, "modeled_us": _round(t), "vs_baseline_pct": _round(100 * (t - base) / base)})
    return out


def time_range(trace: nkisim.Trace) -> tuple[float, float]:
    """total_time (µs) with every uncertain constant at the fast end, and at the slow end."""
    lo, hi = estimate(trace).total_time_range
    return lo * 1e6, hi * 1e6


def prediction_ranges() -> dict[str, tuple[float, float]]:
    """total_time low/high (µs) of the estimates no published figure calibrates: the predicted
    variants and the LayerNorm fold (every uncertain constant at either end of its range)."""
    out = {name: time_range(t) for name, t in variant_traces().items() if "prediction" in name}
    out["LayerNorm fold, dge_mode.none (LNC=2)"] = time_range(fold_trace())
    return out


def fold_trace() -> nkisim.Trace:
    r, h, b = FOLD_SHAPE["rows"], FOLD_SHAPE["hidden"], FOLD_SHAPE["branches"]
    a = torch.empty((r, h), dtype=torch.float32)
    br = torch.empty((b, r, h), dtype=torch.bfloat16)
    return dry_trace(kernels.res_layernorm_fold_kernel, a, br, 1e-6, kernels.FOLD_SBUF_BUDGET, lnc=2)


def first_add_us(summary: ProfileSummary) -> float:
    """When core 0's first Vector add starts (µs): how long the fold waits for its first loads."""
    return 1e6 * min(s.start for s in summary.timeline.slots
                     if s.core == 0 and s.engine == "Vector" and s.opcode == "TENSOR_TENSOR")


def fold_rows() -> dict[str, float]:
    """The LayerNorm fold as shipped (dge_mode.none) and the same trace with software DGE."""
    trace = fold_trace()
    none, swdge = estimate(trace, with_range=False), estimate(with_dge_mode(trace, "swdge"), with_range=False)
    return {"first_add_us": _round(first_add_us(swdge)),
            "published_first_add_us": published.FOLD_FIRST_ADD_WAIT_US,
            "total_us_none": _round(none.total_time_us), "total_us_swdge": _round(swdge.total_time_us)}


def report() -> dict:
    """The whole calibration as one JSON-ready document (the schema in this module's docstring)."""
    return {"calibration": calibration_rows(), "variants": variant_rows(), "fold_software_dge": fold_rows()}


def variant_misses(doc: dict) -> list[str]:
    """The variants published as "no change" that the model puts outside ±3% of the baseline."""
    return [f"{v['name']}: {v['vs_baseline_pct']:+.1f}% (published: no change; band ±{NO_CHANGE_BAND_PCT:g}%)"
            for v in doc["variants"] if NO_CHANGE in v["name"] and abs(v["vs_baseline_pct"]) > NO_CHANGE_BAND_PCT]


def problems(doc: dict) -> list[str]:
    """What the script exits 1 for: constants.py not holding the fit's result."""
    out = []
    fitted, stored = fits()["both"].params, stored_params()
    for name, value in fitted.items():
        if abs(stored[name] / value - 1) > 0.02:
            out.append(f"constants.py stores {name} = {stored[name]:g}, the fit gives {value:g}")
    return out


def markdown_calibration_table(rows: list[dict]) -> str:
    """The README / Calibration page table: published, modeled, held out, each with its delta."""
    lines = ["| config | metric | published | trn2 cost model (estimate) | delta | held out | delta |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        fitted = " (fitted)" if r["metric"] in ("total_time", "dma_active_time_percent") else " (prediction)"
        lines.append(f"| {r['config']} | {r['metric']}{fitted} | {_fmt(r['published'], r['unit'])} | "
                     f"{_fmt(r['modeled'], r['unit'])} | {_delta(r, 'modeled')} | "
                     f"{_fmt(r['holdout_modeled'], r['unit'])} | {_delta(r, 'holdout_modeled')} |")
    return "\n".join(lines)


def markdown_variants_table(rows: list[dict]) -> str:
    lines = ["| variant of gelu_fwd | trn2 cost model (estimate) | vs gelu_fwd |", "|---|---|---|"]
    lines += [f"| {v['name']} | {v['modeled_us']:,.1f} µs | {v['vs_baseline_pct']:+.1f}% |" for v in rows]
    return "\n".join(lines)


def _delta(row: dict, key: str) -> str:
    if row["unit"] == "%":
        return f"{row[key] - row['published']:+.1f} pt"
    return f"{100 * (row[key] / row['published'] - 1):+.1f}%"


def _fmt(v: float, unit: str) -> str:
    return f"{v:,.1f} {unit}" if unit != "%" else f"{v:.1f}%"


def _round(v: float) -> float:
    return round(float(v), 2)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="trn2 cost model vs published trn2 figures")
    p.add_argument("--json", action="store_true", help="print the report as one JSON document")
    p.add_argument("--markdown", action="store_true", help="print the Markdown tables (README, book)")
    args = p.parse_args(argv)
    doc = report()
    if args.json:
        print(json.dumps(doc, indent=1, ensure_ascii=False))
    else:
        print(f"## GELU: modeled and held out vs published ({published.SOURCE})\n")
        print(markdown_calibration_table(doc["calibration"]))
        print("\n## Variants of gelu_fwd\n")
        print(markdown_variants_table(doc["variants"]))
        f = doc["fold_software_dge"]
        print(f"\n## LayerNorm fold, software DGE: first add at {f['first_add_us']:.1f} µs "
              f"(published ~{f['published_first_add_us']:.0f} µs); total {f['total_us_none']:.1f} µs with "
              f"dge_mode.none, {f['total_us_swdge']:.1f} µs with software DGE")
    for m in variant_misses(doc):
        print("outside the no-change band (see the Calibration page): " + m, file=sys.stderr)
    missed = problems(doc)
    for m in missed:
        print("PROBLEM: " + m, file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
