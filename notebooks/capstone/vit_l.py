"""One ViT-L/16 encoder block's kernel calls, profiled with `nkisim.profile` (the published model's shapes).

ViT-L/16 as published: 16 images x 201 tokens = 3216 token rows, width 1024, MLP width 4096.
- training: gelu_fwd and gelu_bwd on the MLP activation [3216, 4096] bf16;
- inference: the fold kernel before attention (K1) and before the MLP (K3), each on [R, 1024] with
  R = 3216 rounded up to a multiple of LNC * 128, one bf16 branch.
On CPU the profile is a dry run priced by the trn2 cost model (estimate); on a trn2 instance it is a
Neuron Explorer measurement. Each summary's `source` says which.
"""
from __future__ import annotations

import torch

import kernels
import nkisim

from .folded import padded_rows

IMAGES, TOKENS, HIDDEN, MLP_HIDDEN = 16, 201, 1024, 4096
ROWS = IMAGES * TOKENS  # 3216
LAYERNORM_EPS = 1e-6    # the published ViT's LayerNorm eps (timing does not depend on it)


def profile_encoder_block(lnc: int = 2, seed: int = 0) -> dict[str, nkisim.ProfileSummary]:
    """{label: ProfileSummary} for gelu_fwd, gelu_bwd (one core each) and one fold call on `lnc` cores."""
    gen = torch.Generator().manual_seed(seed)
    mlp_act = torch.randn(ROWS, MLP_HIDDEN, generator=gen).to(torch.bfloat16)
    grad_out = torch.randn(ROWS, MLP_HIDDEN, generator=gen).to(torch.bfloat16)
    fold_rows = padded_rows(ROWS, lnc)
    residual = torch.randn(fold_rows, HIDDEN, generator=gen)
    branch = torch.randn(1, fold_rows, HIDDEN, generator=gen).to(torch.bfloat16)
    return {
        f"gelu_fwd [{ROWS}, {MLP_HIDDEN}] bf16 LNC=1": nkisim.profile(kernels.gelu_fwd, mlp_act),
        f"gelu_bwd [{ROWS}, {MLP_HIDDEN}] bf16 LNC=1": nkisim.profile(kernels.gelu_bwd, mlp_act, grad_out),
        f"fold [{fold_rows}, {HIDDEN}] LNC={lnc}": nkisim.profile(
            kernels.res_layernorm_fold_kernel, residual, branch, LAYERNORM_EPS, kernels.FOLD_SBUF_BUDGET, lnc=lnc
        ),
    }


def summary_line(label: str, summary: nkisim.ProfileSummary) -> str:
    """One rounded line per profile, always with its source label (and an estimate's range over the
    cost model's uncertain constants)."""
    span = ""
    if summary.total_time_range is not None:
        span = " (range {:.0f}..{:.0f})".format(*(t * 1e6 for t in summary.total_time_range))
    return (f"{label:30s} {summary.total_time_us:7.1f} µs{span}  bound by {summary.bound_by or '-':11s} "
            f"MBU {summary.mbu_estimated_percent:4.1f}%  [{summary.source}]")
