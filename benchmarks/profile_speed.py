"""Profiling speed: how many instructions per second nkisim traces and the trn2 cost model schedules,
on a ladder of sizes, so that the growth with kernel size is visible.

    python benchmarks/profile_speed.py [--max-instructions N] [--json]

Kernels: the workshop's own `gelu_fwd` ([128 t, 512] bf16, 3 instructions per 128-row tile),
`res_layernorm_fold_kernel` ([128 t, 384] fp32 + one bf16 branch) and `speed_kernels.tiled_matmul`
([K=1024, M=128 t] x [1024, 2048] fp32), t doubling from 8 tiles (matmul: 1) until a kernel passes
half of --max-instructions. (A dry run still allocates, untouched, numpy arrays of its arguments'
shapes: narrow rows keep that virtual memory small at 100,000 instructions.) Each size is a dry run on torch meta tensors (`nkisim.run(...,
dry_run=True)`), then one `schedule()` of its trace, then `nkisim.estimate()` (what `profile_model`
adds to the trace: three schedules, at the nominal constants and both ends of their ranges, and
the summary); a size whose runs take under half a second is run up to five times, and the fastest
time of each step is kept. Times are the CPU time of this process (`time.process_time`), not wall time: the
machine is shared, and CPU time is what the work costs. The conditions are printed with them
(CPU count, load average before and after, Python version).

--json prints one document:
    {"conditions": {"cpu_count", "cpus_usable", "load_average_before", "load_average_after",
                    "python", "platform", "timer"},
     "rows": [{"kernel", "size", "instructions", "trace_s", "trace_instructions_per_s",
               "schedule_s", "schedule_instructions_per_s", "estimate_s"}, ...]}
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))   # speed_kernels

import kernels  # noqa: E402  (makes `nki` importable)
import nkisim  # noqa: E402
from nkisim.costmodel.scheduler import schedule  # noqa: E402
from speed_kernels import tiled_matmul  # noqa: E402

TIMER = "time.process_time (CPU seconds of this process)"
REPEATS, REPEAT_BELOW_S = 5, 0.5
FOLD_EPS = 1e-6


def _meta(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.empty(*shape, dtype=dtype, device="meta")


# (kernel name, first size, launch arguments at size t)
LADDER: list[tuple[str, int, Callable[[int], tuple[Any, tuple]]]] = [
    ("gelu_fwd", 8, lambda t: (kernels.gelu_fwd, (_meta(128 * t, 512, dtype=torch.bfloat16),))),
    ("res_layernorm_fold_kernel", 8, lambda t: (kernels.res_layernorm_fold_kernel,
                                                (_meta(128 * t, 384), _meta(1, 128 * t, 384, dtype=torch.bfloat16),
                                                 FOLD_EPS, kernels.FOLD_SBUF_BUDGET))),
    ("tiled_matmul", 1, lambda t: (tiled_matmul, (_meta(1024, 128 * t), _meta(1024, 2048)))),
]


def conditions() -> dict[str, Any]:
    """The machine as this run sees it (the load average is sampled again at the end)."""
    return {"cpu_count": os.cpu_count(), "cpus_usable": len(os.sched_getaffinity(0)),
            "load_average_before": [round(x, 2) for x in os.getloadavg()], "load_average_after": None,
            "python": platform.python_version(), "platform": platform.platform(), "timer": TIMER}


def measure(name: str, tiles: int, kernel: Any, args: tuple) -> dict[str, Any]:
    """One size of one kernel: the fastest of up to REPEATS runs of each step (a small size is run
    again while the runs so far took under REPEAT_BELOW_S, so a millisecond of noise counts less)."""
    runs = [_once(name, tiles, kernel, args)]
    while len(runs) < REPEATS and sum(r["trace_s"] + r["schedule_s"] + r["estimate_s"] for r in runs) < REPEAT_BELOW_S:
        runs.append(_once(name, tiles, kernel, args))
    best = dict(runs[0])
    for step in ("trace", "schedule"):
        best[f"{step}_s"] = min(r[f"{step}_s"] for r in runs)
        best[f"{step}_instructions_per_s"] = max(r[f"{step}_instructions_per_s"] for r in runs)
    best["estimate_s"] = min(r["estimate_s"] for r in runs)
    return best


def _once(name: str, tiles: int, kernel: Any, args: tuple) -> dict[str, Any]:
    """Dry-run trace, one schedule, one estimate, each in CPU seconds."""
    t0 = time.process_time()
    trace = nkisim.run(kernel, *args, dry_run=True).trace
    t1 = time.process_time()
    schedule(trace)
    t2 = time.process_time()
    nkisim.estimate(trace)
    t3 = time.process_time()
    n = len(trace)
    return {"kernel": name, "size": tiles, "instructions": n, "trace_s": t1 - t0,
            "trace_instructions_per_s": n / max(t1 - t0, 1e-9), "schedule_s": t2 - t1,
            "schedule_instructions_per_s": n / max(t2 - t1, 1e-9), "estimate_s": t3 - t2}


def ladder(max_instructions: int) -> Iterator[dict[str, Any]]:
    """Every kernel at doubling sizes, up to the first size past half of `max_instructions` (after
    one unrecorded run at its first size: a kernel's first launch also checks its source)."""
    for name, first, launch in LADDER:
        measure(name, first, *launch(first))
        tiles = first
        while True:
            row = measure(name, tiles, *launch(tiles))
            yield row
            if row["instructions"] * 2 > max_instructions:
                break
            tiles *= 2


def report(max_instructions: int) -> dict[str, Any]:
    doc = {"conditions": conditions(), "rows": list(ladder(max_instructions))}
    doc["conditions"]["load_average_after"] = [round(x, 2) for x in os.getloadavg()]
    return doc


def text(doc: dict[str, Any]) -> str:
    c = doc["conditions"]
    lines = [f"profile speed: {TIMER}",
             f"machine: {c['cpu_count']} CPUs ({c['cpus_usable']} usable), load average (1, 5, 15 min) "
             f"{c['load_average_before']} before, {c['load_average_after']} after; Python {c['python']}, "
             f"{c['platform']}",
             f"{'kernel':<26} {'tiles':>6} {'instructions':>12} {'trace s':>8} {'instr/s':>9} "
             f"{'schedule s':>10} {'instr/s':>9} {'estimate s':>10}"]
    for r in doc["rows"]:
        lines.append(f"{r['kernel']:<26} {r['size']:>6} {r['instructions']:>12,} {r['trace_s']:>8.2f} "
                     f"{r['trace_instructions_per_s']:>9,.0f} {r['schedule_s']:>10.2f} "
                     f"{r['schedule_instructions_per_s']:>9,.0f} {r['estimate_s']:>10.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-instructions", type=int, default=100_000,
                        help="stop each kernel's ladder past half of this many instructions (default 100000)")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    a = parser.parse_args()
    if a.max_instructions < 1:
        parser.error(f"--max-instructions must be at least 1, got {a.max_instructions}")
    doc = report(a.max_instructions)
    print(json.dumps(doc, indent=1) if a.json else text(doc))


if __name__ == "__main__":
    main()
