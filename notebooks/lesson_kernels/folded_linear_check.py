"""Inputs, checks and the per-step profile row of lesson 16 (the folded consumer on the Tensor engine).

Modeled MFU = 2*R*H*N flops / (modeled time x peak), peak = LNC x 128 x 128 PE x 2 flops x the
Tensor-engine clock (the cost model's constants, from the trn2 architecture guide). trn2 throttles
the Tensor engine: a burst starts capped at ~50% of peak and ramps to full over ~3 us (Neuron
Explorer overview page; the model applies it, nkisim/costmodel/tensor_throttle.py). Each row also
prices the step without the throttle, so it shows what the throttle costs.
"""
from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass

import torch
from torch import nn

import nkisim
from kernels import fold_affine_into_linear, res_layernorm_fold
from nkisim.costmodel import constants
from nkisim.limits import PARTITIONS

EPS = 1e-6


@dataclass
class Problem:
    """One consumer: Linear(LayerNorm(x)) with the affine, and its folded pair for the kernels."""

    x: torch.Tensor          # [R, H] fp32: the residual stream after the add
    want: torch.Tensor       # [R, N] fp32: linear(norm(x)), the unfolded PyTorch result
    z: torch.Tensor          # [R, H] bf16: the fold kernel's affine-free output
    weight: torch.Tensor     # [N, H] bf16: W * gamma
    bias: torch.Tensor       # [N, 1] fp32: W @ beta + c, as a column (one value per PSUM partition)
    unfolded_bias: torch.Tensor  # [N, 1] fp32: c alone, a plausible mistake

    @property
    def flops(self) -> int:
        rows, hidden = self.z.shape
        return 2 * rows * hidden * self.weight.shape[0]


def make_problem(rows: int, hidden: int, n_out: int, seed: int = 0) -> Problem:
    """A LayerNorm with gamma/beta far from 1/0 and its consumer Linear; z from the fold kernel."""
    gen = torch.Generator().manual_seed(seed)
    norm, linear = nn.LayerNorm(hidden, eps=EPS), nn.Linear(hidden, n_out)
    with torch.no_grad():
        norm.weight.copy_(1 + 0.5 * torch.randn(hidden, generator=gen))
        norm.bias.copy_(0.3 * torch.randn(hidden, generator=gen))
        linear.weight.copy_(torch.randn(n_out, hidden, generator=gen) / hidden**0.5)
        linear.bias.copy_(0.1 * torch.randn(n_out, generator=gen))
        a = torch.randn(rows, hidden, generator=gen)
        b = (0.5 * torch.randn(1, rows, hidden, generator=gen)).bfloat16()
        x = a + b[0].float()
        _, z = res_layernorm_fold(a, b, EPS)
        folded = fold_affine_into_linear(norm.weight, norm.bias, linear)
        return Problem(x=x, want=linear(norm(x)), z=z, weight=folded.weight.bfloat16(),
                       bias=folded.bias.float().reshape(-1, 1), unfolded_bias=linear.bias.float().reshape(-1, 1))


def check(y: torch.Tensor, problem: Problem, rel_tol: float = 2e-2) -> float:
    """Assert y against Linear(LayerNorm(x)) with the affine; return max |y - want| / max |want|."""
    assert y.dtype == torch.bfloat16 and y.shape == problem.want.shape, (y.dtype, tuple(y.shape))
    rel = ((y.float() - problem.want).abs().max() / problem.want.abs().max()).item()
    assert rel <= rel_tol, f"max |y - Linear(LayerNorm(x))| is {rel:.3g} of the output scale (> {rel_tol})"
    return rel


def unthrottled() -> AbstractContextManager[None]:
    """Within the block, the cost model never throttles the Tensor engine (its cap starts at the full peak)."""
    return constants.overridden({"tensor_throttle_floor": 1.0})


def peak_flops_per_s(lnc: int) -> float:
    """Dense bf16 peak of LNC NeuronCores: a 128 x 128 PE array, one multiply-add per PE per cycle."""
    return lnc * PARTITIONS * PARTITIONS * 2 * constants.TENSOR_CLOCK_HZ


@dataclass
class StepProfile:
    label: str
    model: nkisim.ProfileSummary        # the model's figure (the Tensor engine throttled as documented)
    unthrottled: nkisim.ProfileSummary  # the same without the throttle
    flops: int
    lnc: int

    def mfu(self, summary: nkisim.ProfileSummary) -> float:
        return 100.0 * self.flops / (summary.total_time_us * 1e-6) / peak_flops_per_s(self.lnc)

    @property
    def throttle_cost_us(self) -> float:
        """What the Tensor engine's throttle adds to the modeled time."""
        return self.model.total_time_us - self.unthrottled.total_time_us

    def row(self) -> str:
        busy = self.model.engine_active_time_percent.get("Tensor", 0.0)
        return (f"{self.label:<26} {self.model.total_time_us:8.1f} µs  {self.throttle_cost_us:+8.1f} µs  "
                f"{busy:10.1f}%  {self.mfu(self.model):5.1f}%  {self.model.bound_by}")


HEADER = ("step                           time        throttle   Tensor busy    MFU  bound by\n"
          "[trn2 cost model (estimate); the Tensor engine throttled as documented; 'throttle': the time it adds]")


def profile_step(label: str, run: nkisim.Run, flops: int, lnc: int) -> StepProfile:
    """The step's trace priced twice: as modeled, and with the Tensor engine never throttled."""
    model = nkisim.estimate(run.trace, run.sbuf_peak_bytes)
    with unthrottled():
        free = nkisim.estimate(run.trace, run.sbuf_peak_bytes)
    return StepProfile(label, model, free, flops, lnc)
