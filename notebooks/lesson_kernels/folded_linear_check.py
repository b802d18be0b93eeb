"""Inputs, checks and the per-step profile row of lesson 16 (the folded consumer on the Tensor engine).

Modeled MFU = 2*R*H*N flops / (modeled time x peak), peak = LNC x 128 x 128 PE x 2 flops x the
Tensor-engine clock (the cost model's constants, from the trn2 architecture guide). The Tensor
engine's speed is uncalibrated: trn2 throttles a busy Tensor engine, starting at ~50% of peak and
ramping to full over ~3 us (Neuron Explorer overview page, cited in nkisim/costmodel/constants.py);
the model runs it at full speed. Each row therefore gives a range: full speed (the model's
figure) and half speed (the throttled start).
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn

import nkisim
from kernels import fold_affine_into_linear, res_layernorm_fold
from nkisim.costmodel import constants
from nkisim.limits import PARTITIONS

EPS = 1e-6
THROTTLED_SPEED = 0.5   # the Tensor engine's documented starting speed when it becomes busy


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


@contextlib.contextmanager
def tensor_engine_speed(speed: float):
    """Run the cost model with the Tensor engine at `speed` x peak (the rule reads it at call time)."""
    saved = constants.TENSOR_ENGINE_SPEED
    constants.TENSOR_ENGINE_SPEED = speed
    try:
        yield
    finally:
        constants.TENSOR_ENGINE_SPEED = saved


def peak_flops_per_s(lnc: int) -> float:
    """Dense bf16 peak of LNC NeuronCores: a 128 x 128 PE array, one multiply-add per PE per cycle."""
    return lnc * PARTITIONS * PARTITIONS * 2 * constants.TENSOR_CLOCK_HZ


@dataclass
class StepProfile:
    label: str
    full: nkisim.ProfileSummary        # the model's figure (Tensor engine at full speed)
    throttled: nkisim.ProfileSummary   # the Tensor engine at its throttled starting speed
    flops: int
    lnc: int

    def mfu(self, summary: nkisim.ProfileSummary) -> float:
        return 100.0 * self.flops / (summary.total_time_us * 1e-6) / peak_flops_per_s(self.lnc)

    def row(self) -> str:
        busy = [s.engine_active_time_percent.get("Tensor", 0.0) for s in (self.full, self.throttled)]
        return (f"{self.label:<26} {self.full.total_time_us:8.1f} µs  Tensor busy {percent_span(*busy):>11}  "
                f"MFU {percent_span(self.mfu(self.throttled), self.mfu(self.full)):>11}  bound by {self.full.bound_by}")


def percent_span(low: float, high: float) -> str:
    """"1.8-3.6%", or "1.8%" when both ends print alike (the Tensor engine's speed does not move it)."""
    a, b = f"{low:.1f}", f"{high:.1f}"
    return f"{a}%" if a == b else f"{a}-{b}%"


HEADER = ("step                           time      Tensor busy (full-throttled)  MFU (throttled-full)\n"
          "[trn2 cost model (estimate); Tensor-engine speed uncalibrated: 50%-100% of peak;\n"
          " one figure where both speeds give the same]")


def profile_step(label: str, run: nkisim.Run, flops: int, lnc: int) -> StepProfile:
    """The step's trace priced twice: at the model's Tensor-engine speed and at the throttled one."""
    full = nkisim.estimate(run.trace, run.sbuf_peak_bytes)
    with tensor_engine_speed(THROTTLED_SPEED):
        throttled = nkisim.estimate(run.trace, run.sbuf_peak_bytes)
    return StepProfile(label, full, throttled, flops, lnc)
