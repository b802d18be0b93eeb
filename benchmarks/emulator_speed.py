"""Emulator speed: exact GELU over [3216, 4096] bf16 on nkisim vs torch.nn.functional.gelu.

Issue 3's target: the emulated kernel (one Scalar-engine activation per 128-row tile, 26 tiles)
runs within 3x of torch's own GELU on the same CPU tensor. Prints the median of a few runs of
each, side by side, and their ratio. Run: .venv/bin/python benchmarks/emulator_speed.py
"""
from __future__ import annotations

import statistics
import time

import nkisim

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402
import torch  # noqa: E402

SHAPE = (3216, 4096)
RUNS = 7


@nki.jit
def gelu_tiles(x):
    """A minimal exact-GELU kernel: DMA in, one nl.gelu activation, DMA out, per 128-row tile."""
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in nl.static_range(0, rows, pmax):
        n = min(pmax, rows - r0)
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:n], src=x[r0:r0 + n, :])
        nisa.activation(dst=tile[0:n], op=nl.gelu, data=tile[0:n])
        nisa.dma_copy(dst=out[r0:r0 + n, :], src=tile[0:n])
    return out


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
    assert torch.equal(gelu_tiles(x), torch.nn.functional.gelu(x)), "emulated GELU differs from torch"
    emulated = median_seconds(gelu_tiles, x)
    reference = median_seconds(torch.nn.functional.gelu, x)
    dry = median_seconds(lambda t: nkisim.run(gelu_tiles, t, dry_run=True), x)
    print(f"shape {list(SHAPE)} bf16, {len(nkisim.last_trace())} instructions, torch threads {torch.get_num_threads()}")
    print(f"torch.nn.functional.gelu  {reference * 1e3:8.1f} ms (median of {RUNS})")
    print(f"nkisim gelu kernel        {emulated * 1e3:8.1f} ms (median of {RUNS})")
    print(f"nkisim dry run (trace)    {dry * 1e3:8.1f} ms")
    print(f"ratio emulated / torch    {emulated / reference:8.2f}x (target: <= 3x)")


if __name__ == "__main__":
    main()
