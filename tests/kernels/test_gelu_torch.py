"""GELU in PyTorch: autograd Function, nn.GELU drop-in, swap_gelu, torch.compile, training."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from kernels import GELUErf, gelu_erf, reference, swap_gelu


def test_gelu_erf_flattens_leading_dims_and_matches_f_gelu_fwd_and_bwd_fp32() -> None:
    x = (2 * torch.randn(2, 3, 5, 40, generator=torch.Generator().manual_seed(0))).requires_grad_(True)
    x_ref = x.detach().clone().requires_grad_(True)
    grad = torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    y = gelu_erf(x)
    y.backward(grad)
    F.gelu(x_ref).backward(grad)
    assert y.shape == x.shape
    torch.testing.assert_close(y, F.gelu(x_ref.detach()), rtol=0, atol=1e-5)
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=0, atol=1e-5)


def test_gelu_erf_handles_non_contiguous_1d_and_empty_inputs() -> None:
    x = torch.randn(8, 6).t()  # non-contiguous view
    torch.testing.assert_close(gelu_erf(x), F.gelu(x), rtol=0, atol=1e-5)
    v = torch.randn(7)
    torch.testing.assert_close(gelu_erf(v), F.gelu(v), rtol=0, atol=1e-5)
    assert gelu_erf(torch.empty(0, 4)).shape == (0, 4)


def test_gelu_erf_bf16_gradients_track_the_fp32_derivative() -> None:
    x = torch.randn(130, 64, generator=torch.Generator().manual_seed(2)).bfloat16().requires_grad_(True)
    y = gelu_erf(x)
    assert y.dtype == torch.bfloat16
    y.sum().backward()
    cos, max_abs = reference.cosine_and_max_abs(x.grad, reference.gelu_exact_grad(x.detach(), torch.ones_like(x)))
    assert cos >= 0.99999 and max_abs <= 5e-2


def test_gelu_erf_rejects_unsupported_dtype_with_the_limit() -> None:
    with pytest.raises(ValueError, match="dtype float16; supported: float32, bfloat16"):
        gelu_erf(torch.zeros(2, 3, dtype=torch.float16))


def _mlp(act: nn.Module, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(16, 32), act, nn.Linear(32, 4))


def test_gelu_erf_module_is_a_drop_in_for_nn_gelu() -> None:
    x = torch.randn(3, 16)
    torch.testing.assert_close(_mlp(GELUErf())(x), _mlp(nn.GELU())(x), rtol=0, atol=1e-5)
    assert GELUErf().approximate == "none" and not list(GELUErf().parameters())


class _Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, 8), nn.Linear(8, 8)
        self.activation = nn.GELU()  # not named `act`: must still be found
        self.gate = nn.GELU(approximate="tanh")
        self.stack = nn.ModuleList([nn.Sequential(nn.Linear(8, 8), nn.GELU())])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stack[0](self.gate(self.fc2(self.activation(self.fc1(x)))))


def test_swap_gelu_replaces_exact_gelus_anywhere_and_reports_tanh_ones() -> None:
    model = nn.Sequential(_Block(), nn.GELU(), _Block())
    x = torch.randn(5, 8)
    expected = model(x)
    with pytest.warns(UserWarning, match=r"left 2 GELU module\(s\) unchanged. nn.GELU\(approximate='tanh'\) "
                                         r".*: 0\.gate, 2\.gate"):
        count = swap_gelu(model)
    assert count == 5
    assert sum(isinstance(m, GELUErf) for m in model.modules()) == 5
    assert sum(isinstance(m, nn.GELU) for m in model.modules()) == 2
    torch.testing.assert_close(model(x), expected, rtol=0, atol=1e-5)


def test_swap_gelu_refuses_a_bare_gelu_module() -> None:
    with pytest.raises(TypeError, match="the model itself is an nn.GELU: use GELUErf"):
        swap_gelu(nn.GELU())


def test_torch_compile_fullgraph_sees_one_graph_and_no_breaks() -> None:
    model = _mlp(GELUErf())
    x = torch.randn(4, 16)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_count == 1 and explanation.graph_break_count == 0
    compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
    x_c = x.clone().requires_grad_(True)
    x_e = x.clone().requires_grad_(True)
    out_c, out_e = compiled(x_c), model(x_e)
    out_c.sum().backward()
    out_e.sum().backward()
    torch.testing.assert_close(out_c, out_e, rtol=0, atol=0)
    torch.testing.assert_close(x_c.grad, x_e.grad, rtol=0, atol=0)


def test_tiny_model_training_with_gelu_erf_tracks_nn_gelu_step_for_step() -> None:
    native = _mlp(nn.GELU(), seed=3)
    swapped = copy.deepcopy(native)
    assert swap_gelu(swapped) == 1
    gen = torch.Generator().manual_seed(4)
    data, target = torch.randn(64, 16, generator=gen), torch.randn(64, 4, generator=gen)
    losses = {}
    for label, model in (("native", native), ("gelu_erf", swapped)):
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses[label] = []
        for _ in range(8):
            opt.zero_grad()
            loss = F.mse_loss(model(data), target)
            loss.backward()
            opt.step()
            losses[label].append(loss.item())
    assert losses["native"][-1] < losses["native"][0]  # it trains
    diffs = [abs(a - b) for a, b in zip(losses["native"], losses["gelu_erf"])]
    assert max(diffs) < 1e-5, diffs
