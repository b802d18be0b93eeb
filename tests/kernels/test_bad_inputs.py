"""The kernels API on bad or awkward input: a clear error naming the function, the argument, what it
got and what it accepts, or the correct result where the input is legal (issue 18's cases, and
issue 27 part 3: one parametrised test per public function)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch import nn

import kernels
import nkisim
from kernels import KernelInputError, KernelTypeError, reference

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




def test_the_fold_kernel_launched_raw_with_bad_eps_type_names_the_rule() -> None:
    a, b = _fold_inputs()
    with pytest.raises(nkisim.NkiValidationError, match=r"operand1 must be a compile-time number or a tile"):
        nkisim.run(kernels.res_layernorm_fold_kernel, a, b, "1e-6", kernels.FOLD_SBUF_BUDGET, dry_run=True)


# --- gelu_erf, GELUErf --------------------------------------------------------------------------------
ARRAY = np.ones((128, 8), np.float32)
NOT_TENSORS = [(ARRAY, r"a numpy.ndarray of shape \(128, 8\), float32 \(convert it with torch.as_tensor\({}\)\)"),
               ([[1.0, 2.0]], r"a list \(convert it with torch.as_tensor\({}\)\)"), (None, "None"), ("x", "a str")]
NOT_TENSOR_IDS = ["numpy", "list", "None", "str"]


@pytest.mark.parametrize("call", [kernels.gelu_erf, kernels.GELUErf()], ids=["gelu_erf", "GELUErf"])
@pytest.mark.parametrize("value, got", NOT_TENSORS, ids=NOT_TENSOR_IDS)
def test_gelu_erf_takes_a_torch_tensor(call, value, got: str) -> None:
    with pytest.raises(KernelTypeError, match=r"gelu_erf: x must be a torch.Tensor, got " + got.format("x")):
        call(value)


def test_gelu_erf_gradient_with_create_graph_works_and_its_double_backward_is_named(lnc2: int) -> None:
    x = torch.randn(128, 8, requires_grad=True)
    (dx,) = torch.autograd.grad(kernels.gelu_erf(x).sum(), x, create_graph=True)
    torch.testing.assert_close(dx, reference.gelu_exact_grad(x.detach(), torch.ones_like(x)), rtol=1e-6, atol=1e-6)
    with pytest.raises(RuntimeError, match=r"gelu_erf: double backward is not supported .* gelu_bwd kernel, which "
                                           r"has no derivative kernel. Use torch.nn.functional.gelu"):
        torch.autograd.grad(dx.sum(), x)


# --- swap_gelu ---------------------------------------------------------------------------------------------
class _TanhNamedGELU(nn.GELU):
    """A subclass of nn.GELU that computes something else: it must not be swapped."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)


@pytest.mark.parametrize("model, match", [
    (torch.nn.functional.gelu, r"swap_gelu: model must be an nn.Module \(a model\), got a builtin_function_or_method"),
    (None, r"swap_gelu: model must be an nn.Module \(a model\), got None"),
    (nn.GELU(), r"the model itself is an nn.GELU: use GELUErf\(\) instead"),
], ids=["function", "None", "bare-GELU"])
def test_swap_gelu_takes_a_model(model, match: str) -> None:
    with pytest.raises(KernelTypeError, match=match):
        kernels.swap_gelu(model)


def test_swap_gelu_leaves_a_gelu_subclass_in_place_and_says_why() -> None:
    model = nn.Sequential(nn.Linear(4, 4), _TanhNamedGELU(), nn.GELU())
    with pytest.warns(UserWarning, match=r"left 1 GELU module\(s\) unchanged. subclasses of nn.GELU, which may "
                                         r"compute something else .*: 1 \(_TanhNamedGELU\)"):
        assert kernels.swap_gelu(model) == 1
    assert type(model[1]) is _TanhNamedGELU and isinstance(model[2], kernels.GELUErf)


def test_swap_gelu_replaces_a_shared_gelu_in_every_slot() -> None:
    shared = nn.GELU()
    model = nn.Module()
    model.a, model.b = shared, shared
    model.stack = nn.Sequential(shared, nn.Linear(4, 4), shared)
    assert kernels.swap_gelu(model) == 4
    slots = (model.a, model.b, model.stack[0], model.stack[2])
    assert all(isinstance(m, kernels.GELUErf) for m in slots)
    assert len({id(m) for m in slots}) == 1, "the sharing is kept: one GELUErf in all four slots"


# --- res_layernorm_fold, ResLayerNormFold ----------------------------------------------------------------
@pytest.mark.parametrize("call", [kernels.res_layernorm_fold, lambda a, b, eps: kernels.ResLayerNormFold()(a, b)],
                         ids=["res_layernorm_fold", "ResLayerNormFold"])
@pytest.mark.parametrize("which", ["a", "b"])
@pytest.mark.parametrize("value, got", NOT_TENSORS, ids=NOT_TENSOR_IDS)
def test_res_layernorm_fold_takes_torch_tensors(lnc2: int, call, which: str, value, got: str) -> None:
    a, b = _fold_inputs()
    args = {"a": a, "b": b, which: value}
    with torch.no_grad(), pytest.raises(KernelTypeError, match=rf"res_layernorm_fold: {which} must be a "
                                                               rf"torch.Tensor, got " + got.format(which)):
        call(args["a"], args["b"], EPS)


@pytest.mark.parametrize("budget", [0, -1, 1.5, "204800", True])
def test_res_layernorm_fold_sbuf_budget_is_a_positive_int(lnc2: int, budget) -> None:
    a, b = _fold_inputs()
    with torch.no_grad(), pytest.raises(KernelInputError, match=rf"res_layernorm_fold: sbuf_budget={budget!r}; "
                                                               r"need an int >= 1"):
        kernels.res_layernorm_fold(a, b, EPS, sbuf_budget=budget)


@pytest.mark.parametrize("eps", [np.float32(1e-6), np.float64(1e-6), 1])
def test_res_layernorm_fold_takes_any_real_eps(lnc2: int, eps) -> None:
    a, b = _fold_inputs()
    with torch.no_grad():
        x_new, z = kernels.res_layernorm_fold(a, b, eps)
        _, z_ref = reference.res_layernorm_fold_reference(a, b, float(eps))
    assert torch.equal(x_new, a + b[0].float())
    assert (z.float() - z_ref).abs().max().item() < 0.02


@pytest.mark.parametrize("b_shape, match", [
    ((256, 64), r"a must be 2-D \[R, H\] and b 3-D \[B, R, H\], got shapes \(256, 64\) and \(256, 64\)"),
    ((1, 128, 64), r"b has rows x width \(128, 64\), a has \(256, 64\); they must match"),
    ((5, 256, 64), r"fold_group_size: branches=5; need an int with 1 <= branches <= 4"),
], ids=["b-2d", "rows", "B=5"])
def test_the_raw_fold_kernel_checks_its_operands(b_shape, match: str) -> None:
    a = torch.randn(256, 64)
    with pytest.raises(AssertionError, match=match):
        nkisim.run(kernels.res_layernorm_fold_kernel, a, torch.zeros(b_shape).bfloat16(), EPS,
                   kernels.FOLD_SBUF_BUDGET, dry_run=True)


@pytest.mark.parametrize("rows, lnc", [(300, 1), (384, 2)])
def test_the_raw_fold_kernel_refuses_rows_it_would_leave_unwritten(rows: int, lnc: int) -> None:
    with pytest.raises(AssertionError, match=rf"res_layernorm_fold_kernel: R={rows} is not divisible by "
                                             rf"LNC\*128 = {lnc * 128}"):
        nkisim.run(kernels.res_layernorm_fold_kernel, torch.randn(rows, 64), torch.zeros(1, rows, 64).bfloat16(),
                   EPS, kernels.FOLD_SBUF_BUDGET, lnc=lnc, dry_run=True)


def test_the_raw_fold_kernel_checks_dtypes() -> None:
    a, b = _fold_inputs()
    with pytest.raises(AssertionError, match=r"a must be float32 and b bfloat16, got bfloat16 and bfloat16"):
        nkisim.run(kernels.res_layernorm_fold_kernel, a.bfloat16(), b, EPS, kernels.FOLD_SBUF_BUDGET, dry_run=True)


# --- fold_group_size, fold_sbuf_bytes_per_tile -------------------------------------------------------------
@pytest.mark.parametrize("args, problem", [
    ((4, 0, 1), r"hidden=0; need an int with 1 <= hidden <= 16384"),
    ((4, 16385, 1), r"hidden=16385; need an int with 1 <= hidden <= 16384"),
    ((0, 384, 1), r"n_tiles=0; need an int >= 1"),
    ((4, 384, 0), r"branches=0; need an int with 1 <= branches <= 4"),
    ((4, 384, 5), r"branches=5; need an int with 1 <= branches <= 4"),
    ((4, 384.0, 1), r"hidden=384.0; need an int"),
    ((4, 384, 1, 0), r"budget=0; need an int >= 1"),
], ids=["H=0", "H-too-wide", "no-tiles", "B=0", "B=5", "float-H", "budget=0"])
def test_fold_group_size_on_bad_sizes(args, problem: str) -> None:
    with pytest.raises(AssertionError, match=f"fold_group_size: {problem}"):
        kernels.fold_group_size(*args)


@pytest.mark.parametrize("args, problem", [
    ((384, 5), r"branches=5; need an int with 1 <= branches <= 4"),
    ((384, 0), r"branches=0"),
    ((0, 1), r"hidden=0; need an int with 1 <= hidden <= 16384"),
    ((384, 2.0), r"branches=2.0"),
], ids=["B=5", "B=0", "H=0", "float-B"])
def test_fold_sbuf_bytes_per_tile_answers_only_within_the_kernels_limits(args, problem: str) -> None:
    with pytest.raises(AssertionError, match=f"fold_sbuf_bytes_per_tile: {problem}"):
        kernels.fold_sbuf_bytes_per_tile(*args)
    assert kernels.fold_sbuf_bytes_per_tile(384, 4) == 384 * (8 + 2 * 4)


# --- fold_affine_into_linear -------------------------------------------------------------------------------
@pytest.mark.parametrize("convert", [np.asarray, lambda t: t.tolist(), tuple], ids=["numpy", "list", "tuple"])
def test_fold_affine_takes_gamma_and_beta_as_arrays_or_lists(convert) -> None:
    torch.manual_seed(0)
    gamma, beta, linear = 1 + torch.randn(8), torch.randn(8), nn.Linear(8, 3)
    expected = kernels.fold_affine_into_linear(gamma, beta, linear)
    actual = kernels.fold_affine_into_linear(convert(gamma), convert(beta), linear)
    assert torch.equal(actual.weight, expected.weight) and torch.equal(actual.bias, expected.bias)


@pytest.mark.parametrize("gamma, beta, linear, error, match", [
    (torch.ones(4), None, nn.Conv1d(4, 4, 1), KernelTypeError,
     r"linear must be an nn.Linear \(the consumer of z\), got a torch.nn.Conv1d"),
    (torch.ones(4), None, None, KernelTypeError, r"linear must be an nn.Linear .*, got None"),
    ("abc", None, nn.Linear(4, 2), KernelTypeError, r"gamma must be None or a vector of 4 numbers .*, got a str"),
    (None, {"a": 1}, nn.Linear(4, 2), KernelTypeError, r"beta must be None or a vector of 4 numbers .*, got a dict"),
    (np.ones(5), None, nn.Linear(4, 2), KernelInputError, r"gamma has shape \(5,\), expected \(4,\)"),
    (None, 0.5, nn.Linear(4, 2), KernelInputError, r"beta has shape \(\), expected \(4,\)"),
], ids=["conv", "None-linear", "str-gamma", "dict-beta", "gamma-length", "scalar-beta"])
def test_fold_affine_names_its_bad_argument(gamma, beta, linear, error, match: str) -> None:
    with pytest.raises(error, match=f"fold_affine_into_linear: {match}"):
        kernels.fold_affine_into_linear(gamma, beta, linear)


# --- FoldedPreNorm -----------------------------------------------------------------------------------------
class _ScaledLayerNorm(nn.LayerNorm):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return 2 * super().forward(x)


class _NamedLayerNorm(nn.LayerNorm):
    """A subclass that keeps LayerNorm's forward (e.g. a library's alias): accepted."""


@pytest.mark.parametrize("norm, consumers, error, match", [
    (nn.RMSNorm(64), [nn.Linear(64, 8)], KernelTypeError,
     r"norm must be an nn.LayerNorm \(the fold kernel computes LayerNorm, not RMSNorm .*\), got a torch.nn.RMSNorm"),
    (None, [nn.Linear(64, 8)], KernelTypeError, r"norm must be an nn.LayerNorm .*, got None"),
    (_ScaledLayerNorm(64), [nn.Linear(64, 8)], KernelTypeError,
     r"norm is a _ScaledLayerNorm, a LayerNorm subclass with its own forward"),
    (nn.LayerNorm((4, 16)), [nn.Linear(64, 8)], KernelInputError, r"the LayerNorm normalizes over \(4, 16\)"),
    (nn.LayerNorm(64), nn.Linear(64, 8), KernelTypeError,
     r"consumers must be an iterable of nn.Linear .*, got a torch.nn.Linear; wrap a single Linear in a list"),
    (nn.LayerNorm(64), nn.Sequential(nn.Linear(64, 8)), KernelTypeError,
     r"consumers must be an iterable of nn.Linear .*, got a torch.nn.Sequential$"),
    (nn.LayerNorm(64), 42, KernelTypeError, r"consumers must be an iterable of nn.Linear, got a int"),
    (nn.LayerNorm(64), [], KernelInputError, r"give at least one consumer nn.Linear"),
    (nn.LayerNorm(64), iter([]), KernelInputError, r"give at least one consumer nn.Linear"),
    (nn.LayerNorm(64), [nn.Linear(64, 8), nn.Conv1d(64, 8, 1)], KernelTypeError,
     r"consumer 1 must be an nn.Linear, got a torch.nn.Conv1d"),
    (nn.LayerNorm(64), [nn.Linear(32, 8)], KernelInputError, r"consumer 0 has in_features=32, the LayerNorm width"),
], ids=["RMSNorm", "None-norm", "subclass-forward", "2-axis", "single-Linear", "Sequential", "int", "empty",
        "empty-generator", "conv-consumer", "width"])
def test_folded_pre_norm_names_its_bad_argument(norm, consumers, error, match: str) -> None:
    with pytest.raises(error, match=f"FoldedPreNorm: {match}"):
        kernels.FoldedPreNorm(norm, consumers)


@pytest.mark.parametrize("wrap", [lambda c: (lin for lin in c), tuple, nn.ModuleList],
                         ids=["generator", "tuple", "ModuleList"])
def test_folded_pre_norm_reads_any_iterable_of_consumers_once(lnc2: int, wrap) -> None:
    torch.manual_seed(0)
    norm, linears = _NamedLayerNorm(64, eps=EPS), [nn.Linear(64, n) for n in (8, 16, 4)]
    module = kernels.FoldedPreNorm(norm, wrap(linears))
    assert len(module.consumers) == 3
    reference_module = kernels.FoldedPreNorm(norm, list(linears))
    a, b = _fold_inputs()
    with torch.no_grad():
        outputs, expected = module(a, b)[1], reference_module(a, b)[1]
    assert all(torch.equal(y, e) for y, e in zip(outputs, expected))


def test_folded_pre_norm_forward_takes_torch_tensors(lnc2: int) -> None:
    module = kernels.FoldedPreNorm(nn.LayerNorm(64), [nn.Linear(64, 8)])
    a, b = _fold_inputs()
    with torch.no_grad(), pytest.raises(KernelTypeError, match=r"res_layernorm_fold: a must be a torch.Tensor, "
                                                               r"got a numpy.ndarray"):
        module(a.numpy(), b)


# --- folded_linear -----------------------------------------------------------------------------------------
def _linear_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.randn(128, 64).bfloat16(), torch.randn(8, 64).bfloat16(), torch.randn(8)


@pytest.mark.parametrize("which", ["z", "weight", "bias"])
@pytest.mark.parametrize("value, got", NOT_TENSORS, ids=NOT_TENSOR_IDS)
def test_folded_linear_takes_torch_tensors(lnc2: int, which: str, value, got: str) -> None:
    z, weight, bias = _linear_inputs()
    args = {"z": z, "weight": weight, "bias": bias, which: value}
    match = (r"bias must be a torch.Tensor \[N\] float32, got None; a consumer folded by fold_affine_into_linear "
             r"always has one" if which == "bias" and value is None
             else rf"{which} must be a torch.Tensor, got " + got.format(which))
    with torch.no_grad(), pytest.raises(KernelTypeError, match=f"folded_linear: {match}"):
        kernels.folded_linear(args["z"], args["weight"], args["bias"])


@pytest.mark.parametrize("budget", [0, 2.5, None])
def test_folded_linear_weight_budget_is_a_positive_int(lnc2: int, budget) -> None:
    with torch.no_grad(), pytest.raises(KernelInputError, match=rf"folded_linear: weight_budget={budget!r}; need an "
                                                               r"int >= 1"):
        kernels.folded_linear(*_linear_inputs(), weight_budget=budget)


# --- kernels.reference -------------------------------------------------------------------------------------
T = torch.ones(4, 8)


@pytest.mark.parametrize("function, args, name", [
    (reference.gelu_exact, (ARRAY,), "x"),
    (reference.gelu_exact_grad, (T, ARRAY), "grad_out"),
    (reference.res_layernorm_fold_reference, (ARRAY, T, EPS), "a"),
    (reference.layernorm_affine_reference, ([1.0, 2.0], None, None, EPS), "x"),
    (reference.bf16_ulp, (ARRAY,), "reference"),
    (reference.cosine_and_max_abs, (T, ARRAY), "expected"),
], ids=["gelu_exact", "gelu_exact_grad", "res_layernorm_fold_reference", "layernorm_affine_reference", "bf16_ulp",
        "cosine_and_max_abs"])
def test_references_take_torch_tensors(function, args, name: str) -> None:
    with pytest.raises(KernelTypeError, match=rf"reference.{function.__name__}: {name} must be a torch.Tensor, got "
                                              r"a (numpy.ndarray|list)"):
        function(*args)


def test_cosine_and_max_abs_needs_equal_sizes() -> None:
    with pytest.raises(KernelInputError, match=r"actual has shape \(4, 8\), expected \(3,\); they must hold the "
                                               r"same number of elements"):
        reference.cosine_and_max_abs(T, torch.ones(3))
