"""Emulator speed: exact GELU over [3216, 4096] bf16 on nkisim vs torch.nn.functional.gelu.

Issue 3's target: the emulated kernel (one Scalar-engine activation per 128-row tile, 26 tiles)
runs within 3x of torch's own GELU on the same CPU tensor. Prints the median of a few runs of
each, side by side, and their ratio. Run: .venv/bin/python benchmarks/emulator_speed.py
"""
from __future__ import annotations

import statistics
import time

import torch

import nkisim
from kernels import gelu_fwd  # one nl.gelu activation per 128-row tile

SHAPE = (3216, 4096)
RUNS = 7


def median_seconds(fn, x) -> float:
    fn(x)  # warm-up
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    x = torch.randn(*SHAPE, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    assert torch.equal(gelu_fwd(x), torch.nn.functional.gelu(x)), "emulated GELU differs from torch"
    emulated = median_seconds(gelu_fwd, x)
    reference = median_seconds(torch.nn.functional.gelu, x)
    dry = median_seconds(lambda t: nkisim.run(gelu_fwd, t, dry_run=True), x)
    print(f"shape {list(SHAPE)} bf16, {len(nkisim.last_trace())} instructions, torch threads {torch.get_num_threads()}")
    print(f"torch.nn.functional.gelu  {reference * 1e3:8.1f} ms (median of {RUNS})")
    print(f"nkisim gelu kernel        {emulated * 1e3:8.1f} ms (median of {RUNS})")
    print(f"nkisim dry run (trace)    {dry * 1e3:8.1f} ms")
    print(f"ratio emulated / torch    {emulated / reference:8.2f}x (target: <= 3x)")


if __name__ == "__main__":
    main()
