"""torch_neuronx.nki_op on the emulator: eager, autograd, torch.compile(fullgraph=True)."""
import nki
import nki.isa as nisa
import nki.language as nl
import pytest
import torch
from torch_neuronx import nki_op


@pytest.fixture(autouse=True)
def one_core(monkeypatch):
    """The ops launch their kernel unbracketed. In a graph, NKI 0.7's compiler checks that the kernel's LNC
    equals its own (NCC_EVRF066; neuronx-cc defaults to 2 on trn2): NEURON_LOGICAL_NC_CONFIG sets both."""
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")


@nki.jit
def scale_kernel(x, factor):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=factor)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki_op("nkisim_tests::triple", mutates_args={})
def triple(x: torch.Tensor) -> torch.Tensor:
    return scale_kernel(x, 3.0)


triple.register_autograd(lambda ctx, grad: triple(grad), setup_context=lambda ctx, inputs, output: None)


def test_eager_custom_op_runs_the_kernel():
    x = torch.randn(64, 8, dtype=torch.bfloat16)
    y = torch.ops.nkisim_tests.triple(x)
    assert y.dtype == torch.bfloat16 and torch.equal(y, (x.float() * 3).bfloat16())


def test_autograd_uses_the_registered_backward():
    x = torch.randn(32, 4, requires_grad=True)
    triple(x).sum().backward()
    assert torch.equal(x.grad, torch.full_like(x, 3.0))


def test_torch_compile_fullgraph_one_graph_no_breaks():
    def f(x):
        return triple(x) + 1.0

    x = torch.randn(32, 4)
    explain = torch._dynamo.explain(f)(x)
    assert explain.graph_count == 1 and explain.graph_break_count == 0
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")   # traces the op with fake tensors
    assert torch.allclose(compiled(x), x * 3 + 1)
