"""End-to-end ViT-L figures the capstone quotes (kernel-designs.md §1, "Published correctness" and
"Published performance"). Hardware measurements by the kernels' author, labelled with
`nkisim.costmodel.published.SOURCE`; never cost-model output.

Kept here only because `nkisim.costmodel.published` does not carry the end-to-end rows yet; they
belong there next to the standalone kernel figures.
"""
from __future__ import annotations

from nkisim.costmodel.published import SOURCE

__all__ = ["LOSS_CURVE_MAX_DIFF", "SOURCE", "TRAINING_THROUGHPUT"]

# GELUErf in all 24 MLP blocks of DINOv3 ViT-L/16: 20-step loss curve vs nn.GELU.
LOSS_CURVE_MAX_DIFF = 2.3e-3

# DINOv3 ViT-L/16 training, bf16, torch.compile(backend="neuron"), SDK 2.31, same-session A/B:
# (configuration, nn.GELU img/s, GELUErf img/s, delta %).
TRAINING_THROUGHPUT = (
    ("single core, batch 16", 28.58, 30.30, 6.0),
    ("FSDP2 data-parallel 4, per-rank batch 32", 112.6, 121.9, 8.3),
)
