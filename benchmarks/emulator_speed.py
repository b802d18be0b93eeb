"""Emulator speed: exact GELU over [3216, 4096] bf16 on nkisim vs torch.nn.functional.gelu.

Issue 3's target: the emulated kernel (one Scalar-engine activation per 128-row tile, 26 tiles)
runs within 3x of torch's own GELU on the same CPU tensor. The two run side by side, alternating
call by call so both see the same machine state; the script prints each median and their ratio.
Run: .venv/bin/python benchmarks/emulator_speed.py
"""
from __future__ import annotations

import statistics
import time
from typing import Callable

import torch

import nkisim
from kernels import gelu_fwd  # one nl.gelu activation per 128-row tile

SHAPE = (3216, 4096)
RUNS = 15
TARGET_RATIO = 3.0


def seconds(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def side_by_side(*fns: Callable[[], object]) -> list[float]:
    """Median seconds of each function, measured in alternation after one warm-up call each."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(RUNS):
        for fn, samples in zip(fns, times):
            samples.append(seconds(fn))
    return [statistics.median(samples) for samples in times]


def main() -> None:
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    assert torch.equal(gelu_fwd(x), torch.nn.functional.gelu(x)), "emulated GELU differs from torch"
    emulated, reference, dry = side_by_side(
        lambda: gelu_fwd(x), lambda: torch.nn.functional.gelu(x), lambda: nkisim.run(gelu_fwd, x, dry_run=True))
    print(f"shape {list(SHAPE)} bf16, {len(nkisim.last_trace())} instructions, torch threads {torch.get_num_threads()}")
    print(f"torch.nn.functional.gelu  {reference * 1e3:8.1f} ms (median of {RUNS}, alternating)")
    print(f"nkisim gelu kernel        {emulated * 1e3:8.1f} ms")
    print(f"nkisim dry run (trace)    {dry * 1e3:8.1f} ms")
    ratio = emulated / reference
    print(f"ratio emulated / torch    {ratio:8.2f}x (target: <= {TARGET_RATIO:g}x: {'met' if ratio <= TARGET_RATIO else 'MISSED'})")


if __name__ == "__main__":
    main()
