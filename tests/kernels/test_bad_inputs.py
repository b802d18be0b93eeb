"""The kernels API on bad or awkward input: a clear error naming the value and the limit, or the
correct result where the input is legal (issue 18's cases)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import kernels
import nkisim
from kernels import reference

EPS = 1e-6


def _fold_inputs(rows: int = 256, hidden: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(rows, hidden), torch.randn(1, rows, hidden).bfloat16()


def test_cpu_and_meta_tensors_mixed_are_refused(lnc2: int) -> None:
    x = torch.randn(128, 16)
    meta = torch.empty(128, 16, device="meta")
    with pytest.raises(ValueError, match=r"gelu_bwd: tensors on different devices \(x on cpu, grad_out on meta\)"):
        torch.ops.nki_workshop.gelu_bwd(x, meta)
    a, b = _fold_inputs()
    with pytest.raises(ValueError, match=r"res_layernorm_fold: tensors on different devices \(a on cpu, b on meta\)"):
        kernels.res_layernorm_fold(a, b.to("meta"), EPS)


@pytest.mark.parametrize("eps", [0.0, -1e-5, float("nan"), float("inf"), 2.0**-90, True, "1e-6"])
def test_eps_outside_rsqrts_valid_range_is_refused(lnc2: int, eps) -> None:
    a, b = _fold_inputs()
    with pytest.raises(kernels.KernelInputError, match=r"eps=.*need a number in \[2\*\*-87, 2\*\*97\]"):
        kernels.res_layernorm_fold(a, b, eps)


def test_gelu_of_infinities_is_the_exact_limit(lnc2: int) -> None:
    x = torch.tensor([[math.inf, -math.inf, 1.0, -1.0]] * 128)
    y = kernels.gelu_erf(x)
    assert y[0, 0] == math.inf and y[0, 1] == 0.0
    assert torch.equal(y, reference.gelu_exact(x))
    dx = torch.ops.nki_workshop.gelu_bwd(x, torch.ones_like(x))
    assert dx[0, 0] == 1.0 and dx[0, 1] == 0.0
    expected = reference.gelu_exact_grad(x, torch.ones_like(x))
    assert torch.equal(dx[:, :2], expected[:, :2]) and torch.allclose(dx, expected, rtol=1e-6, atol=0)


@pytest.mark.parametrize("shape", [(), (0, 8), (8, 0)])
def test_raw_kernels_on_0d_or_empty_inputs_reach_the_kernels_own_check(shape) -> None:
    with pytest.raises((kernels.KernelInputError, AssertionError), match=r"gelu_fwd: x (must be 2-D|has shape)"):
        kernels.gelu_fwd(np.zeros(shape, np.float32))


def test_a_non_integer_lnc_environment_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "two")
    with pytest.raises(kernels.KernelInputError, match=r"NEURON_LOGICAL_NC_CONFIG='two' is not an integer; trn2 "
                                                       r"supports LNC 1 or 2"):
        kernels.gelu_erf(torch.randn(128, 8))


def test_swap_gelu_on_a_function_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="swap_gelu takes an nn.Module"):
        kernels.swap_gelu(torch.nn.functional.gelu)


def test_fold_into_a_conv_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="linear must be an nn.Linear .* got Conv1d"):
        kernels.fold_affine_into_linear(torch.ones(4), torch.zeros(4), nn.Conv1d(4, 4, 1))


@pytest.mark.parametrize("args, name", [((4, 0, 1), "hidden=0"), ((0, 384, 1), "n_tiles=0"),
                                        ((4, 384, 0), "branches=0"), ((4, 384.0, 1), "hidden=384.0")])
def test_fold_group_size_on_bad_sizes(args, name: str) -> None:
    with pytest.raises(AssertionError, match=f"fold_group_size: {name}; need an int >= 1"):
        kernels.fold_group_size(*args)


def test_the_fold_kernel_launched_raw_with_bad_eps_type_names_the_rule() -> None:
    a, b = _fold_inputs()
    with pytest.raises(nkisim.NkiValidationError, match=r"operand1 must be a compile-time number or a tile"):
        nkisim.run(kernels.res_layernorm_fold_kernel, a, b, "1e-6", kernels.FOLD_SBUF_BUDGET, dry_run=True)
