"""folded_linear: numerics (partial tiles, LNC), the fold -> consumer pair vs Linear(LayerNorm), schedule, limits."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import nkisim
from kernels import fold_affine_into_linear, folded_linear, folded_linear_kernel, res_layernorm_fold
from kernels.limits import (
    FOLDED_LINEAR_MAX_H,
    FOLDED_LINEAR_MAX_N,
    KernelInputError,
    folded_linear_weight_group,
)
from kernels.reference import bf16_ulp


def _inputs(rows: int, hidden: int, n_out: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(rows, hidden, generator=gen).bfloat16()
    weight = (torch.randn(n_out, hidden, generator=gen) / hidden**0.5).bfloat16()
    bias = torch.randn(n_out, generator=gen)
    return z, weight, bias


def _within_one_bf16_rounding(y: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> None:
    ref = z.double() @ weight.double().T + bias.double()
    assert y.dtype == torch.bfloat16 and y.shape == ref.shape
    # fp32 accumulation, one rounding to bf16: within one bf16 ulp of the exact result (+ fp32 noise).
    excess = (y.double() - ref).abs() - bf16_ulp(ref.float()).double()
    assert excess.max().item() <= 1e-4


@pytest.mark.parametrize(
    "rows, hidden, n_out",
    [(256, 256, 256), (200, 130, 70), (1, 5, 3), (700, 384, 300), (129, 128, 129)],
)
@pytest.mark.parametrize("lnc", ["1", "2"])
def test_matches_fp32_accumulation_with_partial_tiles(
    monkeypatch: pytest.MonkeyPatch, lnc: str, rows: int, hidden: int, n_out: int
) -> None:
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", lnc)
    z, weight, bias = _inputs(rows, hidden, n_out, seed=rows + hidden)
    with torch.no_grad():
        y = folded_linear(z, weight, bias)
    _within_one_bf16_rounding(y, z, weight, bias)


def test_fold_then_folded_linear_matches_linear_of_layernorm_with_affine(lnc2: int) -> None:
    torch.manual_seed(0)
    hidden, n_out, eps = 384, 192, 1e-6
    norm = nn.LayerNorm(hidden, eps=eps)
    linear = nn.Linear(hidden, n_out)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.normal_()
    a = torch.randn(256, hidden)
    b = torch.randn(1, 256, hidden).bfloat16()
    folded = fold_affine_into_linear(norm.weight, norm.bias, linear)
    with torch.no_grad():
        want = linear(norm(a + b[0].float()))
        _, z = res_layernorm_fold(a, b, eps)
        y = folded_linear(z, folded.weight.bfloat16(), folded.bias.float())
    # bf16 z and bf16 weights: relative error of a few bf16 ulps of the output scale.
    assert (y.float() - want).abs().max().item() <= 0.03 * want.abs().max().item()
    # The unfolded bias is a plausible mistake; it must be far outside that tolerance.
    with torch.no_grad():
        wrong = folded_linear(z, folded.weight.bfloat16(), linear.bias.detach().float())
    assert (wrong.float() - want).abs().max().item() > 0.1 * want.abs().max().item()


def _run(z: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, budget: int, lnc: int = 2) -> nkisim.Run:
    return nkisim.run(folded_linear_kernel, z, weight, bias.reshape(-1, 1), budget, lnc=lnc)


def test_schedule_matmuls_within_tensor_engine_limits_and_bias_on_evacuation() -> None:
    z, weight, bias = _inputs(1100, 300, 260)   # per program 550 rows: blocks of 512 + 38
    run = _run(z, weight, bias, budget=10**6)
    for program in (0, 1):
        ins = run.trace.program(program)
        matmuls = [i for i in ins if i.isa == "nc_matmul"]
        # 2 row blocks x 3 N tiles x 3 K tiles (128, 128, 44)
        assert len(matmuls) == 2 * 3 * 3
        assert all(i.attrs["stationary_free"] <= 128 and i.attrs["moving_free"] <= 512 for i in matmuls)
        assert {i.attrs["contraction"] for i in matmuls} == {128, 44}
        # Only the first K tile of each accumulation group overwrites PSUM.
        assert sum(not i.attrs["accumulate"] for i in matmuls) == 2 * 3
        evacuations = [i for i in ins if i.isa == "activation"]
        assert len(evacuations) == 2 * 3
        # The weight is loaded once per program: one transpose per (N tile, K tile).
        assert sum(i.name == "load_w" for i in ins) == 3 * 3
    _within_one_bf16_rounding(run.outputs, z, weight, bias)


def test_weight_groups_reload_z_not_weights_and_give_identical_results() -> None:
    z, weight, bias = _inputs(256, 256, 384)   # 3 N tiles, 2 K tiles: 2 * 128 * 2 B = 512 B of weight.T per partition per N tile
    assert folded_linear_weight_group(256, 3, 512) == 1
    resident = _run(z, weight, bias, budget=10**6, lnc=1)
    grouped = _run(z, weight, bias, budget=512, lnc=1)
    assert torch.equal(resident.outputs, grouped.outputs)
    loads = {label: sum(i.name == "load_z" for i in r.trace) for label, r in (("resident", resident), ("grouped", grouped))}
    assert loads["grouped"] == 3 * loads["resident"]
    assert sum(i.name == "load_w" for i in grouped.trace) == sum(i.name == "load_w" for i in resident.trace)


def test_profile_reports_tensor_engine_time() -> None:
    z, weight, bias = _inputs(512, 256, 256)
    prof = nkisim.profile(folded_linear_kernel, z, weight, bias.reshape(-1, 1), 10**6, lnc=2)
    assert prof.opcode_count("MATMUL", "Tensor") == 2 * 2 * 2
    assert prof.opcode_time("MATMUL", "Tensor") > 0


@pytest.mark.parametrize(
    "z_shape, z_dtype, w_shape, w_dtype, b_shape, b_dtype, match",
    [
        ((4, 8, 2), torch.bfloat16, (3, 2), torch.bfloat16, (3,), torch.float32, r"z must be 2-D \[R, H\]"),
        ((4, 8), torch.bfloat16, (8, 3), torch.bfloat16, (8,), torch.float32, r"weight has 3 input features, z has H=8"),
        ((4, 8), torch.bfloat16, (3, 8), torch.bfloat16, (4,), torch.float32, r"bias has 4 elements, weight has N=3"),
        ((4, 8), torch.bfloat16, (3, 8), torch.bfloat16, (3, 1), torch.float32, r"bias must be 1-D \[N\]"),
        ((4, 8), torch.float32, (3, 8), torch.bfloat16, (3,), torch.float32, r"z must be bfloat16, got float32"),
        ((4, 8), torch.bfloat16, (3, 8), torch.float32, (3,), torch.float32, r"weight must be bfloat16"),
        ((4, 8), torch.bfloat16, (3, 8), torch.bfloat16, (3,), torch.bfloat16, r"bias must be float32"),
        ((4, FOLDED_LINEAR_MAX_H + 1), torch.bfloat16, (3, FOLDED_LINEAR_MAX_H + 1), torch.bfloat16, (3,),
         torch.float32, rf"H={FOLDED_LINEAR_MAX_H + 1} > {FOLDED_LINEAR_MAX_H}"),
        ((4, 8), torch.bfloat16, (FOLDED_LINEAR_MAX_N + 1, 8), torch.bfloat16, (FOLDED_LINEAR_MAX_N + 1,),
         torch.float32, rf"N={FOLDED_LINEAR_MAX_N + 1} > {FOLDED_LINEAR_MAX_N}"),
        ((0, 8), torch.bfloat16, (3, 8), torch.bfloat16, (3,), torch.float32, r"need R, H, N >= 1"),
    ],
)
def test_bad_inputs_name_the_problem_and_the_limit(z_shape, z_dtype, w_shape, w_dtype, b_shape, b_dtype, match) -> None:
    z, weight, bias = torch.zeros(z_shape, dtype=z_dtype), torch.zeros(w_shape, dtype=w_dtype), torch.zeros(b_shape, dtype=b_dtype)
    with torch.no_grad(), pytest.raises(KernelInputError, match=match):
        folded_linear(z, weight, bias)


def test_bad_lnc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "4")
    with torch.no_grad(), pytest.raises(KernelInputError, match="LNC=4; trn2 supports LNC 1 or 2"):
        folded_linear(*_inputs(4, 8, 3))


def test_inference_only() -> None:
    z, weight, bias = _inputs(4, 8, 3)
    with pytest.raises(RuntimeError, match="inference only"):
        folded_linear(z, weight.requires_grad_(), bias)
