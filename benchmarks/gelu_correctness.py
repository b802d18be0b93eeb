"""GELU correctness table at the published shape [3216, 4096], next to the published hardware table.

    .venv/bin/python benchmarks/gelu_correctness.py [--rows 3216] [--cols 4096]

Same method as the published table: cosine similarity and max |diff| of gelu_fwd against CPU fp32
torch.nn.functional.gelu, and of gelu_bwd against its autograd derivative, for fp32 and bf16 inputs.
Here the kernels run on whichever NKI backend `kernels` picked (the nkisim CPU emulator off trn2).
"""
from __future__ import annotations

import argparse

import torch

import kernels
from kernels import gelu_bwd, gelu_fwd, reference

PUBLISHED = {  # published measurement, trn2.3xlarge, Neuron SDK 2.31 / NKI 0.5.0 (kernel-designs.md §1)
    ("gelu_fwd", "fp32"): (1.000000, 2.1e-6),
    ("gelu_bwd", "fp32"): (1.000000, 3.1e-6),
    ("gelu_fwd", "bf16"): (0.999998, 3.1e-2),
    ("gelu_bwd", "bf16"): (0.999995, 4.0e-2),
}
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


def measure(rows: int, cols: int, seed: int = 0) -> dict[tuple[str, str], tuple[float, float]]:
    """(cosine, max-abs) per (kernel, dtype) on this machine's backend."""
    gen = torch.Generator().manual_seed(seed)
    x32, g32 = 3 * torch.randn(rows, cols, generator=gen), torch.randn(rows, cols, generator=gen)
    table = {}
    for key, dtype in DTYPES.items():
        x, g = x32.to(dtype), g32.to(dtype)
        table[("gelu_fwd", key)] = reference.cosine_and_max_abs(gelu_fwd(x), reference.gelu_exact(x))
        table[("gelu_bwd", key)] = reference.cosine_and_max_abs(gelu_bwd(x, g), reference.gelu_exact_grad(x, g))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=3216)
    parser.add_argument("--cols", type=int, default=4096)
    args = parser.parse_args()
    measured = measure(args.rows, args.cols)
    print(kernels.backend_info())
    print(f"GELU correctness, [{args.rows}, {args.cols}], reference = CPU fp32 F.gelu / its autograd derivative")
    print(f"{'kernel':<9} {'dtype':<5} | {'this run: cos':>14} {'max abs':>9} | {'published (trn2.3xlarge, NKI 0.5.0): cos':>41} {'max abs':>9}")
    for (kernel, dtype), (cos, max_abs) in measured.items():
        pub_cos, pub_abs = PUBLISHED[(kernel, dtype)]
        print(f"{kernel:<9} {dtype:<5} | {cos:>14.6f} {max_abs:>9.1e} | {pub_cos:>41.6f} {pub_abs:>9.1e}")


if __name__ == "__main__":
    main()
