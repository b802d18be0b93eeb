"""Emulator speed: exact GELU over [3216, 4096] bf16 on nkisim vs torch.nn.functional.gelu.

Issue 3's target: the emulated kernel (one Scalar-engine activation per 128-row tile, 26 tiles)
runs within 3x of torch's own GELU on the same CPU tensor, on an idle machine. The two run side by
side, alternating call by call so both see the same machine state; the script prints each median
in wall time and in CPU time of this process (`time.process_time`, all its threads), their
ratios, and the conditions: CPU count, load average before and after, torch's intra-op threads.
Under load, wall times vary by more than 10x; compare runs by their load average.

    python benchmarks/emulator_speed.py [--threads N]

--threads sets torch's intra-op threads for both sides (default: torch's own choice, one per core).
On a loaded 2-core machine the emulator's ~130 tile-sized torch ops each wait for a second thread
to be scheduled, which costs it far more than torch's few whole-tensor ops: compare --threads 1.
"""
from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from typing import Callable

import torch

import nkisim
from kernels import gelu_fwd  # one nl.gelu activation per 128-row tile

SHAPE = (3216, 4096)
RUNS = 15
TARGET_RATIO = 3.0


def seconds(fn: Callable[[], object]) -> tuple[float, float]:
    """(wall, CPU) seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def side_by_side(*fns: Callable[[], object]) -> list[tuple[float, float]]:
    """(wall, CPU) median seconds of each function, measured in alternation after one warm-up call each."""
    for fn in fns:
        fn()
    times: list[list[tuple[float, float]]] = [[] for _ in fns]
    for _ in range(RUNS):
        for fn, samples in zip(fns, times):
            samples.append(seconds(fn))
    return [(statistics.median(w for w, _ in s), statistics.median(c for _, c in s)) for s in times]


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, help="torch intra-op threads for both sides (default: torch's)")
    a = parser.parse_args()
    if a.threads is not None:
        if a.threads < 1:
            parser.error(f"--threads must be at least 1, got {a.threads}")
        torch.set_num_threads(a.threads)
    before = load_average()
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    assert torch.equal(gelu_fwd(x), torch.nn.functional.gelu(x)), "emulated GELU differs from torch"
    (emu_w, emu_c), (ref_w, ref_c), (dry_w, dry_c) = side_by_side(
        lambda: gelu_fwd(x), lambda: torch.nn.functional.gelu(x), lambda: nkisim.run(gelu_fwd, x, dry_run=True))
    print(f"shape {list(SHAPE)} bf16, {len(nkisim.last_trace())} instructions; medians of {RUNS}, alternating")
    print(f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), torch threads "
          f"{torch.get_num_threads()}, Python {platform.python_version()}; load average (1, 5, 15 min) "
          f"{before} before, {load_average()} after")
    print(f"{'':26} {'wall ms':>9} {'CPU ms':>9}")
    print(f"{'torch.nn.functional.gelu':26} {ref_w * 1e3:9.1f} {ref_c * 1e3:9.1f}")
    print(f"{'nkisim gelu kernel':26} {emu_w * 1e3:9.1f} {emu_c * 1e3:9.1f}")
    print(f"{'nkisim dry run (trace)':26} {dry_w * 1e3:9.1f} {dry_c * 1e3:9.1f}")
    ratio = emu_w / ref_w
    print(f"ratio emulated / torch     {ratio:8.2f}x wall, {emu_c / ref_c:.2f}x CPU (target, wall on an idle "
          f"machine: <= {TARGET_RATIO:g}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'})")


if __name__ == "__main__":
    main()
