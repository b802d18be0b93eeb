"""torch_neuronx.nki_op on the emulator: eager, autograd, torch.compile(fullgraph=True)."""
import nki
import nki.isa as nisa
import nki.language as nl
import pytest
import torch
from torch_neuronx import nki_op

from nkisim import NkiValidationError


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


# ---- a bare @nki.jit kernel call inside torch.compile ---------------------------------------------------------
# TorchNeuron, How to work with NKI kernels from torch-neuronx: "Inside torch.compile(backend="neuron"): The
# kernel call becomes one node in the captured graph" (nkisim/emulator/compiled_call.py).
@nki.jit
def affine_kernel(x, factor, out_dtype, op, staging, mode, unused):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=staging)
    nisa.dma_copy(dst=t, src=x, dge_mode=mode)
    y = nl.ndarray(x.shape, dtype=out_dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=y, data=t, op0=op, operand0=factor)
    out = nl.ndarray(x.shape, dtype=out_dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=y)
    return out


@nki.jit
def copy_and_clobber(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=x, src=t)        # writes its argument
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=t)
    return out


def _around_bare_calls(x):
    """Kernel calls with every kind of non-tensor argument a kernel is specialised on: a float, an NKI dtype,
    an operator, a memory region, an enum, None; unbracketed and bracketed."""
    a = affine_kernel(x * 1.0, 2.0, nl.bfloat16, nl.multiply, nl.sbuf, nisa.dge_mode.none, None)
    b = affine_kernel[1](x, 3.0, nl.float32, nl.add, nl.sbuf, nisa.dge_mode.none, None)
    return a.float() + b


def _messages(err: BaseException | None) -> list[str]:
    """The messages of an exception and its causes: Dynamo wraps an error raised while it traces."""
    found = []
    while err is not None:
        found.append(str(err))
        err = err.__cause__ or err.__context__
    return found


def test_a_bare_kernel_call_is_one_node_of_the_compiled_graph():
    x = torch.randn(32, 8)
    explain = torch._dynamo.explain(_around_bare_calls)(x)
    assert (explain.graph_count, explain.graph_break_count) == (1, 0)
    eager = _around_bare_calls(x)
    assert torch.equal(eager, (x * 2).bfloat16().float() + (x + 3))
    for backend in ("eager", "aot_eager"):     # the node run as is, and traced by AOT autograd with fake tensors
        torch._dynamo.reset()
        assert torch.equal(torch.compile(_around_bare_calls, backend=backend, fullgraph=True)(x), eager)


def test_a_bare_eager_kernel_call_has_no_gradient_either():
    """Eagerly as inside torch.compile: a backward through a bare call raises, naming nki_op's register_autograd,
    instead of the inputs silently getting no gradient from that path (d/dx (2x + x) is 3, not 1)."""
    x = torch.ones(16, 4, requires_grad=True)
    call = lambda t: affine_kernel(t, 2.0, nl.float32, nl.multiply, nl.sbuf, nisa.dge_mode.none, None)  # noqa: E731
    with pytest.raises(NkiValidationError, match="kernel 'affine_kernel' has no gradient.*register_autograd"):
        (call(x) + x).sum().backward()
    with torch.no_grad():
        assert torch.equal(call(x), x * 2)     # a forward alone, or without grad mode, runs as before
    assert torch.equal(call(x).detach(), x.detach() * 2)


def test_a_bare_kernel_call_is_compiled_for_each_value_of_a_float_argument():
    """A float that changes between calls reaches the graph as a SymFloat (Dynamo's automatic dynamic); the
    kernel is compiled for "the non-tensor argument values of that call" (the how-to), so each value gives its
    own result, also when the value is computed in the graph or the whole function is marked dynamic."""
    x = torch.ones(4, 8)
    calls = {"plain": lambda t, s: affine_kernel(t, s, nl.float32, nl.multiply, nl.sbuf, nisa.dge_mode.none, None),
             "computed": lambda t, s: affine_kernel(t, s * 2, nl.float32, nl.multiply, nl.sbuf, nisa.dge_mode.none,
                                                    None)}
    for backend in ("eager", "aot_eager"):
        for dynamic in (None, True):
            for name, call in calls.items():
                torch._dynamo.reset()
                compiled = torch.compile(call, backend=backend, fullgraph=True, dynamic=dynamic)
                got = [compiled(x, s)[0, 0].item() for s in (2.0, 3.0, 4.0, 3.0)]
                assert got == [call(x, s)[0, 0].item() for s in (2.0, 3.0, 4.0, 3.0)], (backend, dynamic, name)


def test_a_bare_kernel_call_that_writes_an_argument_is_refused_inside_torch_compile():
    x = torch.randn(16, 4)
    with pytest.raises(Exception) as raised:
        torch.compile(lambda t: copy_and_clobber(t) + 1, backend="aot_eager", fullgraph=True)(x.clone())
    causes = _messages(raised.value)
    assert any("writes its argument 'x' in place" in c and "mutates_args" in c for c in causes), causes


def test_a_bare_kernel_call_has_no_gradient_inside_torch_compile():
    """Training through a kernel needs nki_op and register_autograd (the how-to's "add a backward pass")."""
    x = torch.randn(16, 4, requires_grad=True)
    compiled = torch.compile(lambda t: affine_kernel(t, 2.0, nl.float32, nl.multiply, nl.sbuf, nisa.dge_mode.none,
                                                     None), backend="aot_eager", fullgraph=True)
    with pytest.raises(Exception, match="register_autograd"):
        compiled(x).sum().backward()


def test_importing_nkisim_leaves_torch_dynamo_unimported():
    """The compiled-call node is registered when torch._dynamo is first imported, which costs over a second."""
    import subprocess
    import sys

    code = ("import sys, nkisim; nkisim.install(); import nki; assert 'torch._dynamo' not in sys.modules; "
            "import torch._dynamo; from nkisim.emulator import compiled_call; assert compiled_call.registered()")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).returncode == 0


@nki.jit
def double_per_core(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(axes=0)
    r0 = nl.program_id(0) * rows
    t = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[r0:r0 + rows])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=out[r0:r0 + rows], src=t)
    return out


def test_a_bare_kernel_call_in_a_graph_takes_the_compilers_lnc(monkeypatch):
    """In a graph the kernel is compiled with the model, at neuronx-cc's LNC (EVRF066's page): with
    NEURON_LOGICAL_NC_CONFIG=2 the unbracketed call runs on both cores; unset, it is LNC 1 against the
    compiler's trn2 default 2, the page's first common cause."""
    x = torch.randn(256, 8)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    torch._dynamo.reset()
    assert torch.equal(torch.compile(lambda t: double_per_core(t) + 1, backend="aot_eager", fullgraph=True)(x),
                       2 * x + 1)
    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG")
    torch._dynamo.reset()
    with pytest.raises(Exception) as raised:
        torch.compile(lambda t: double_per_core(t) + 1, backend="aot_eager", fullgraph=True)(x)
    causes = _messages(raised.value)
    assert any("NCC_EVRF066" in c and "LNC=1, but neuronx-cc is using LNC=2" in c for c in causes), causes


# ---- an op's kernel that writes an input must declare it (torch.library.custom_op: "list every mutated Tensor
# argument in mutates_args"; the TorchNeuron how-to: declare in-place updates) ------------------------------------
@nki_op("nkisim_tests::clobber_undeclared", mutates_args={})
def clobber_undeclared(x: torch.Tensor) -> torch.Tensor:
    return copy_and_clobber(x[1:])          # a view of x: still x's memory


@nki_op("nkisim_tests::clobber_declared", mutates_args={"x"})
def clobber_declared(x: torch.Tensor) -> torch.Tensor:
    return copy_and_clobber(x)


def test_an_op_whose_kernel_writes_an_undeclared_input_is_refused():
    with pytest.raises(Exception) as raised:
        clobber_undeclared(torch.randn(8, 4))
    assert any("nki_op 'nkisim_tests::clobber_undeclared': its kernel wrote the input 'x' in place, but "
               "mutates_args does not list it" in c for c in _messages(raised.value))
    x = torch.randn(8, 4)
    assert torch.equal(clobber_declared(x), x)


@nki.jit
def add_one_in_place(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=x, src=t)
    return x                                # an in-place kernel's output is its argument


@nki_op("nkisim_tests::returns_its_input", mutates_args={"x"})
def returns_its_input(x: torch.Tensor) -> torch.Tensor:
    return add_one_in_place(x)


def test_an_op_that_returns_its_input_is_refused():
    """torch.library.custom_op: "The output of this custom operator (1) must not also be an input to this custom
    operator and (2) may not alias any inputs"; its own check compares storages, which an emulated output over
    the input's memory does not share, so nkisim checks the memory."""
    with pytest.raises(Exception) as raised:
        returns_its_input(torch.zeros(4, 4))
    assert any("nki_op 'nkisim_tests::returns_its_input': an output is the input 'x'" in c
               for c in _messages(raised.value))
