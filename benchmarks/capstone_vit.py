"""The capstone (notebooks/17_capstone_vit.ipynb), headless: both kernels inside a tiny ViT.

    .venv/bin/python benchmarks/capstone_vit.py [--steps 20] [--batch 32] [--eval-images 64] [--lnc 2]

1. trains a tiny ViT twice on the same batches, with nn.GELU and with GELUErf (swap_gelu), and checks
   the loss curves against the published ViT-L bound;
2. checks torch.compile captures the swapped model in 1 graph with 0 graph breaks;
3. freezes the trained model and runs its encoder on the fold kernel (fp32 residual, bf16 branches,
   gamma/beta folded into qkv / fc1 / head), comparing logits and top-1 with plain PyTorch;
4. profiles one ViT-L encoder block's kernels (cost-model estimate off trn2) and prints the published
   end-to-end training speedups (hardware measurements) next to them.
Model, data, training and the fold-kernel encoder come from notebooks/capstone/, the notebook's code.
Exits non-zero if a check fails.
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "notebooks"))

import kernels  # noqa: E402  (makes `nki` importable: the Neuron SDK on trn2, else nkisim)
from capstone import vit, vit_l  # noqa: E402
from nkisim.profile import published  # noqa: E402
from capstone.folded import FoldKernelViT, compare_logits, padded_rows  # noqa: E402


def train_both(steps: int, batch: int) -> tuple[vit.TinyViT, list[float], list[float]]:
    """(trained GELUErf model, nn.GELU losses, GELUErf losses) from one seed and one batch list."""
    plain = vit.build_vit(seed=0)
    swapped = copy.deepcopy(plain)
    print(f"swap_gelu replaced {kernels.swap_gelu(swapped)} nn.GELU modules")
    batches = vit.make_batches(steps, batch, seed=1)
    plain_losses = vit.train(plain, batches, progress=vit.progress_log("nn.GELU"))
    erf_losses = vit.train(swapped, batches, progress=vit.progress_log("GELUErf"))
    return swapped, plain_losses, erf_losses


def graph_breaks(model: torch.nn.Module) -> tuple[int, int]:
    """(graphs, graph breaks) of torch._dynamo.explain on two images."""
    explanation = torch._dynamo.explain(model)(vit.make_images(2, seed=0)[0])
    return explanation.graph_count, explanation.graph_break_count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--eval-images", type=int, default=64)
    parser.add_argument("--lnc", type=int, choices=(1, 2), default=2, help="LNC of the ViT-L fold profile")
    args = parser.parse_args()
    torch.set_num_threads(1)  # as in the notebook: same numbers every run, and faster on a busy 2-core machine
    torch.use_deterministic_algorithms(True)
    print(kernels.backend_info())
    failures: list[str] = []

    print("\n== 1. training: nn.GELU vs GELUErf on the same batches")
    model, plain_losses, erf_losses = train_both(args.steps, args.batch)
    max_diff = max(abs(a - b) for a, b in zip(plain_losses, erf_losses))
    print(f"final loss {plain_losses[-1]:.4f} vs {erf_losses[-1]:.4f}; max |diff| over {args.steps} steps {max_diff:.1e}")
    print(f"published ViT-L/16, 20 steps: within {published.LOSS_CURVE_MAX_DIFF:.1e} ({published.SOURCE})")
    if max_diff >= published.LOSS_CURVE_MAX_DIFF:
        failures.append(f"loss curves differ by {max_diff:.1e}")

    print("\n== 2. torch.compile")
    graphs, breaks = graph_breaks(model)
    print(f"torch._dynamo.explain: {graphs} graph(s), {breaks} graph break(s)")
    if (graphs, breaks) != (1, 0):
        failures.append(f"{graphs} graphs / {breaks} breaks, expected 1 / 0")

    print("\n== 3. inference with the fold kernel")
    model.eval().requires_grad_(False)
    reference = vit.build_vit(seed=0).eval()
    reference.load_state_dict(model.state_dict())
    images, labels = vit.make_images(args.eval_images, seed=2)
    rows = args.eval_images * model.cfg.tokens
    print(f"{rows} token rows, padded to {padded_rows(rows)} for the fold kernel (LNC=2 x 128-row tiles)")
    with torch.no_grad():
        comparison = compare_logits(reference(images), FoldKernelViT(model)(images), labels)
    print("\n".join(comparison.lines()))
    if comparison.max_abs_diff >= 0.05 * comparison.logit_scale or comparison.top1_agreement < 0.95:
        failures.append("fold-kernel logits outside bf16 tolerance")

    print("\n== 4. one ViT-L encoder block's kernels")
    for label, summary in vit_l.profile_encoder_block(lnc=args.lnc).items():
        print(vit_l.summary_line(label, summary))
    print(f"end-to-end DINOv3 ViT-L/16 training, nn.GELU -> GELUErf [{published.SOURCE}]:")
    for config, native, erf, delta in published.TRAINING_THROUGHPUT:
        print(f"  {config:42s} {native:6.2f} -> {erf:6.2f} img/s ({delta:+.1f}%)")

    for failure in failures:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
