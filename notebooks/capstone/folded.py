"""Inference of a trained TinyViT with every LayerNorm running as the residual-add + LayerNorm fold kernel.

The residual stream stays fp32 from the embedding to the head; every branch (attention, MLP) runs
in bf16 and hands its bf16 output to the next fold call, which adds it into the stream and emits the
affine-free bf16 `z` for the next consumers. Each LayerNorm's gamma/beta live in its consumers
(folded at construction): norm1 -> attn.qkv and norm2 -> mlp.fc1 run as the fold kernel followed by
`kernels.folded_linear` on the Tensor engine (`FoldThenLinear`); the final norm -> head uses
`kernels.FoldedPreNorm` (a PyTorch consumer). Only the public `kernels` API is used.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from kernels import FoldedPreNorm, fold_affine_into_linear, folded_linear, res_layernorm_fold

from .vit import Attention, TinyViT, accuracy

BRANCH_DTYPE = torch.bfloat16
TILE_ROWS = 128  # partitions of an SBUF tile on trn2: the fold kernel's rows per tile


def padded_rows(rows: int, lnc: int = 2) -> int:
    """Smallest multiple of LNC*128 >= rows: each of the LNC cores takes whole 128-row tiles."""
    multiple = lnc * TILE_ROWS
    return -(-rows // multiple) * multiple


def pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """[r, H] -> [rows, H] with zero rows appended (zero rows normalize to z = 0, never NaN)."""
    return torch.cat([t, t.new_zeros(rows - t.shape[0], t.shape[1])]) if rows > t.shape[0] else t


def attention_core(attn: Attention) -> Attention:
    """A copy of `attn` without its unfolded qkv projection, so z can only reach the folded one."""
    core = copy.deepcopy(attn)
    core.qkv = None
    return core


class FoldThenLinear(nn.Module):
    """fold kernel -> folded_linear: forward(a, b) -> (x_new, z @ W'.T + c') with W' = W * gamma (bf16)
    and c' = W @ beta + c (fp32), folded once at construction from the fp32 layers."""

    def __init__(self, norm: nn.LayerNorm, linear: nn.Linear) -> None:
        super().__init__()
        folded = fold_affine_into_linear(norm.weight, norm.bias, linear)
        self.eps = float(norm.eps)
        self.register_buffer("weight", folded.weight.detach().to(BRANCH_DTYPE))
        self.register_buffer("bias", folded.bias.detach().float())

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x_new, z = res_layernorm_fold(a, b, self.eps)
        return x_new, folded_linear(z, self.weight, self.bias)


class FoldKernelViT(nn.Module):
    """A frozen copy of `model` whose encoder runs the fold kernel between fp32 stream and bf16 branches.

    forward(images) -> logits [N, classes] (bf16). Inference only; `lnc` must match the kernel's
    launch (NEURON_LOGICAL_NC_CONFIG, default 2) because it sets the row padding.
    """

    def __init__(self, model: TinyViT, lnc: int = 2) -> None:
        super().__init__()
        frozen = copy.deepcopy(model).eval().requires_grad_(False)
        self.lnc = lnc
        self.embed = frozen.embed  # fp32: it starts the residual stream
        # gamma/beta are folded while the consumers are still fp32; the folded weights are then
        # rounded to bf16 once (folded_linear keeps the folded bias in fp32).
        self.pre_attn = nn.ModuleList(FoldThenLinear(b.norm1, b.attn.qkv) for b in frozen.blocks)
        self.pre_mlp = nn.ModuleList(FoldThenLinear(b.norm2, b.mlp.fc1) for b in frozen.blocks)
        self.final = FoldedPreNorm(frozen.norm, [frozen.head]).to(BRANCH_DTYPE)
        # The rest of each branch in bf16: attention core + proj (Attention.attend), then act + fc2.
        self.attn = nn.ModuleList(attention_core(b.attn).to(BRANCH_DTYPE) for b in frozen.blocks)
        self.mlp_tail = nn.ModuleList(
            nn.Sequential(copy.deepcopy(b.mlp.act), copy.deepcopy(b.mlp.fc2)).to(BRANCH_DTYPE) for b in frozen.blocks
        )
        self.eval().requires_grad_(False)  # the folded consumers are new layers: freeze them too

    @torch.no_grad()
    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens = self.embed(images.float())  # [N, T, H] fp32
        n_images, n_tokens, hidden = tokens.shape
        rows = n_images * n_tokens
        total = padded_rows(rows, self.lnc)

        def as_branch(t: torch.Tensor) -> torch.Tensor:  # [N, T, H] -> [1, total, H] bf16
            return pad_rows(t.reshape(rows, hidden).to(BRANCH_DTYPE), total).unsqueeze(0)

        def as_images(t: torch.Tensor) -> torch.Tensor:  # [total, C] -> [N, T, C], padding dropped
            return t[:rows].reshape(n_images, n_tokens, -1)

        x = pad_rows(tokens.reshape(rows, hidden), total)  # the fp32 residual stream
        branch = torch.zeros(1, total, hidden, dtype=BRANCH_DTYPE)  # nothing to add before norm1 of block 0
        for pre_attn, attn, pre_mlp, mlp_tail in zip(self.pre_attn, self.attn, self.pre_mlp, self.mlp_tail):
            x, qkv = pre_attn(x, branch)
            x, hidden_act = pre_mlp(x, as_branch(attn.attend(as_images(qkv))))
            branch = as_branch(mlp_tail(as_images(hidden_act)))
        _, (logits,) = self.final(x, branch)
        return as_images(logits)[:, 0]  # the class token's logits


@dataclass(frozen=True)
class LogitComparison:
    """How close a candidate's logits are to a reference's on one labelled batch."""

    max_abs_diff: float
    logit_scale: float      # largest |reference logit|: what max_abs_diff is relative to
    cosine: float
    top1_agreement: float   # fraction of images with the same arg-max class
    reference_accuracy: float
    candidate_accuracy: float

    def lines(self) -> list[str]:
        """A few rounded, human-readable lines, the same on every run and CPU: no timings, and the
        logit difference to two decimals (its third digit moves between AVX2 and AVX-512 builds of torch)."""
        return [
            f"logits: max |diff| = {self.max_abs_diff:.2f} (largest |logit| {self.logit_scale:.2f}), "
            f"cosine = {self.cosine:.4f}",
            f"top-1 agreement: {self.top1_agreement:.1%}",
            f"accuracy: reference {self.reference_accuracy:.1%}, candidate {self.candidate_accuracy:.1%}",
        ]


def compare_logits(reference: torch.Tensor, candidate: torch.Tensor, labels: torch.Tensor) -> LogitComparison:
    """Compare two [N, classes] logit tensors (any float dtypes) computed from the same images."""
    ref, cand = reference.double(), candidate.double()
    return LogitComparison(
        max_abs_diff=(cand - ref).abs().max().item(),
        logit_scale=ref.abs().max().item(),
        cosine=F.cosine_similarity(cand.flatten(), ref.flatten(), dim=0).item(),
        top1_agreement=(cand.argmax(-1) == ref.argmax(-1)).double().mean().item(),
        reference_accuracy=accuracy(ref, labels),
        candidate_accuracy=accuracy(cand, labels),
    )
