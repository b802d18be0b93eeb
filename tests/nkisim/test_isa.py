"""Per-instruction semantics against numpy / torch references (fp32 and bf16)."""
import math

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch
from scipy.special import erf

import nkisim
from helpers import rand, run_tiles
from nkisim.emulator.ops import OPS

BF16 = ml_dtypes.bfloat16
F32 = np.float32


@pytest.mark.parametrize("op, ref", [
    (nl.add, np.add), (nl.subtract, np.subtract), (nl.multiply, np.multiply),
    (nl.maximum, np.maximum), (nl.minimum, np.minimum), (nl.greater, lambda a, b: (a > b).astype(F32)),
])
@pytest.mark.parametrize("dtype", [F32, BF16])
def test_tensor_tensor(op, ref, dtype):
    a, b = rand((128, 64), 1).astype(dtype), rand((128, 64), 2).astype(dtype)
    body = lambda x, y, o: nisa.tensor_tensor(dst=o, data1=x, data2=y, op=op)
    got = run_tiles(body, a, b, outs=[((128, 64), dtype)])
    want = ref(a.astype(F32), b.astype(F32)).astype(dtype)      # fp32 math, one rounding on write
    assert np.array_equal(got.astype(F32), want.astype(F32))


def test_partial_tile_leaves_other_rows_untouched():
    a = rand((128, 8))
    body = lambda x, o: nisa.tensor_tensor(dst=o[0:16], data1=x[0:16], data2=x[0:16], op=nl.add)
    got = run_tiles(body, a, outs=[((128, 8), F32)])
    assert np.array_equal(got[:16], 2 * a[:16]) and np.all(np.isnan(got[16:]))


def test_tensor_tensor_on_views_with_different_shapes():
    a = rand((128, 4, 8))
    body = lambda x, o: nisa.tensor_tensor(dst=o, data1=x[:, 1, :], data2=x[:, 3, :], op=nl.multiply)
    assert np.array_equal(run_tiles(body, a, outs=[((128, 8), F32)]), a[:, 1] * a[:, 3])


def test_tensor_scalar_two_ops_and_reverse_flags():
    a = rand((128, 32))
    body = lambda x, o1, o2: (
        nisa.tensor_scalar(dst=o1, data=x, op0=nl.subtract, operand0=3.0, reverse0=True, op1=nl.multiply, operand1=2.0),
        nisa.tensor_scalar(dst=o2, data=x, op0=nl.add, operand0=1.0, op1=nl.subtract, operand1=4.0, reverse1=True))
    o1, o2 = run_tiles(body, a, outs=[((128, 32), F32), ((128, 32), F32)])
    assert np.allclose(o1, (3.0 - a) * 2.0, rtol=0, atol=0)
    assert np.array_equal(o2, (np.float32(4.0) - (a + np.float32(1.0))).astype(F32))


def test_tensor_scalar_per_partition_operands_bf16_out():
    a = rand((128, 32), 3)
    mean, rstd = a.mean(1, keepdims=True).astype(F32), (1 / a.std(1, keepdims=True)).astype(F32)
    body = lambda x, m, r, o: nisa.tensor_scalar(dst=o, data=x, op0=nl.subtract, operand0=m, op1=nl.multiply,
                                                  operand1=r)
    got = run_tiles(body, a, mean, rstd, outs=[((128, 32), BF16)])
    assert np.array_equal(got, ((a - mean) * rstd).astype(BF16))


def _phi(x):
    return 0.5 * (1 + erf(x / math.sqrt(2)))


ACT_REFS = {
    "copy": lambda x: x, "square": lambda x: x * x, "exp": np.exp, "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0), "erf": erf,
    "erf_dx": lambda x: 2 / math.sqrt(math.pi) * np.exp(-x * x), "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: x * _phi(x),
    "gelu_dx": lambda x: _phi(x) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))),
    "gelu_apprx_sigmoid": lambda x: x / (1 + np.exp(-1.702 * x)),
    "rsqrt": lambda x: 1 / np.sqrt(np.abs(x) + 0.5), "reciprocal": lambda x: 1 / (np.abs(x) + 0.5),
}


@pytest.mark.parametrize("name", sorted(ACT_REFS))
def test_activation_functions_fp32(name):
    x = rand((128, 256), 4)
    if name in ("rsqrt", "reciprocal"):
        x = np.abs(x) + np.float32(0.5)
        ref = {"rsqrt": lambda v: 1 / np.sqrt(v), "reciprocal": lambda v: 1 / v}[name]
    else:
        ref = ACT_REFS[name]
    op = getattr(nl, name)
    got = run_tiles(lambda d, o: nisa.activation(dst=o, op=op, data=d), x, outs=[((128, 256), F32)])
    want = ref(x.astype(np.float64))
    assert np.allclose(got, want, rtol=2e-6, atol=2e-6)


ACTIVATIONS = sorted(name for name, op in OPS.items() if op.act is not None)


@pytest.mark.parametrize("name", ACTIVATIONS)
def test_activation_value_depends_on_the_input_alone(name):
    """An element-wise engine computes each element from its input alone: the same value gives the same
    bits in a long row, in short rows (a vector loop's tail), in a column and alone (a [1, 1] tile)."""
    op = OPS[name]
    x = torch.from_numpy(rand((1, 448), 8)) * 3
    if op.valid is not None:
        x = x.abs().clamp(min=op.valid[0], max=min(op.valid[1], 3.0))
    whole = op.activate(x).view(torch.int32).reshape(-1)
    for width in (1, 7):
        parts = torch.cat([op.activate(x[:, i:i + width]).reshape(-1) for i in range(0, 448, width)])
        assert torch.equal(parts.view(torch.int32), whole), f"rows of {width}"
    assert torch.equal(op.activate(x.reshape(448, 1)).view(torch.int32).reshape(-1), whole), "a column"


@pytest.mark.parametrize("name", sorted(n for n, op in OPS.items() if op.is_alu and not op.bitvec))
def test_alu_value_depends_on_the_operands_alone(name):
    op = OPS[name]
    a, b = torch.from_numpy(np.abs(rand((1, 448), 10)) + 0.1), torch.from_numpy(rand((1, 448), 11))
    fn = (lambda u, v: op.binary(u, v)) if op.binary is not None else (lambda u, v: op.unary(u))
    whole = fn(a, b).float().reshape(-1).view(torch.int32)
    for width in (1, 7):
        parts = torch.cat([fn(a[:, i:i + width], b[:, i:i + width]).float().reshape(-1) for i in range(0, 448, width)])
        assert torch.equal(parts.view(torch.int32), whole), f"rows of {width}"


def test_sigmoid_of_short_rows_equals_sigmoid_of_the_whole_row():
    """The KevGomes1403/trainium-model-translation case (a recurrence run at LNC 1 and 2 must agree bit for
    bit): sigmoid and softplus of the same values by one instruction over a 448-wide row and by 64 over 7."""
    x = rand((1, 448), 9) * 3
    for op in (nl.sigmoid, nl.softplus):
        def body(d, o1, o2):
            nisa.activation(dst=o1, op=op, data=d)
            for i in range(0, 448, 7):
                nisa.activation(dst=o2[:, i:i + 7], op=op, data=d[:, i:i + 7])
        whole, parts = run_tiles(body, x, outs=[((1, 448), F32), ((1, 448), F32)])
        assert np.array_equal(whole.view(np.uint32), parts.view(np.uint32))


def test_gelu_bf16_matches_torch_exact_gelu_bitwise():
    x = torch.randn(128, 512).bfloat16()
    x_np = x.view(torch.int16).numpy().view(BF16)
    got = run_tiles(lambda d, o: nisa.activation(dst=o, op=nl.gelu, data=d), x_np, outs=[((128, 512), BF16)])
    want = torch.nn.functional.gelu(x.float()).bfloat16()
    assert np.array_equal(got.view(np.uint16), want.view(torch.int16).numpy().view(np.uint16))


def test_gelu_dx_matches_autograd_derivative():
    x = torch.linspace(-6, 6, 128 * 64).reshape(128, 64)
    xr = x.clone().requires_grad_(True)
    torch.nn.functional.gelu(xr).sum().backward()
    got = run_tiles(lambda d, o: nisa.activation(dst=o, op=nl.gelu_dx, data=d), x.numpy(), outs=[((128, 64), F32)])
    assert np.allclose(got, xr.grad.numpy(), atol=3e-6)


def test_activation_scale_and_bias():
    x, bias, scale = rand((128, 16), 5), rand((128, 1), 6), np.abs(rand((128, 1), 7)) + 0.5
    body = lambda d, b, s, o1, o2: (
        nisa.activation(dst=o1, op=nl.square, data=d, bias=b, scale=2.0),
        nisa.activation(dst=o2, op=nl.copy, data=d, bias=-1.0, scale=s))
    o1, o2 = run_tiles(body, x, bias, scale, outs=[((128, 16), F32), ((128, 16), F32)])
    assert np.allclose(o1, (x * 2 + bias) ** 2, rtol=1e-6)
    assert np.allclose(o2, x * scale - 1, rtol=1e-6)


def test_accumulator_reset_reduce_idle_and_readout():
    x = rand((128, 16), 8)
    R = nisa.reduce_cmd

    def body(d, o, r1, r2, r3):
        nisa.activation(dst=o, op=nl.copy, data=d, reduce_op=nl.add, reduce_cmd=R.reset_reduce)
        nisa.activation(dst=o, op=nl.square, data=d, reduce_op=nl.add, reduce_cmd=R.reduce, reduce_res=r1)
        nisa.activation(dst=o, op=nl.exp, data=d, reduce_cmd=R.idle, reduce_res=r2)     # idle: unchanged
        nisa.activation(dst=o, op=nl.copy, data=d, reduce_cmd=R.reset, reduce_res=r3)   # reset: zero

    _, r1, r2, r3 = run_tiles(body, x, outs=[((128, 16), F32)] + [((128, 1), F32)] * 3)
    want = (x.sum(1) + (x * x).sum(1))[:, None]
    assert np.allclose(r1, want, rtol=1e-5) and np.array_equal(r1, r2) and np.all(r3 == 0)


def test_accumulator_read_before_any_reset_shows_the_uninitialised_marker():
    x = rand((128, 16), 8)
    R = nisa.reduce_cmd

    def body(d, o, r1, r2):
        nisa.activation(dst=o, op=nl.copy, data=d, reduce_op=nl.add, reduce_cmd=R.reduce, reduce_res=r1)
        nisa.activation(dst=o, op=nl.copy, data=d, reduce_op=nl.add, reduce_cmd=R.reset_reduce, reduce_res=r2)

    _, r1, r2 = run_tiles(body, x, outs=[((128, 16), F32)] + [((128, 1), F32)] * 2)
    assert np.all(np.isnan(r1))                          # accumulated onto never-reset registers
    assert np.allclose(r2, x.sum(1, keepdims=True), rtol=1e-5)


def test_activation_reduce_row_sums_with_bias_fold_pattern():
    s = rand((128, 96), 9) + np.float32(50)
    neg_shift = -s[:, :1]

    def body(d, b, scratch, acc):
        nisa.activation_reduce(dst=scratch, op=nl.copy, data=d, reduce_op=nl.add, reduce_res=acc, bias=b)

    scratch, acc = run_tiles(body, s, neg_shift, outs=[((128, 96), BF16), ((128, 1), F32)])
    assert np.allclose(acc[:, 0], (s + neg_shift).sum(1), rtol=1e-5, atol=1e-4)
    assert np.array_equal(scratch, (s + neg_shift).astype(BF16))


@pytest.mark.parametrize("shape, axis, out_shape, keepdims", [
    ((128, 32), 1, (128, 1), False), ((128, 4, 8), 2, (128, 4), False), ((128, 4, 8), (1, 2), (128, 1), False),
    ((128, 4, 8), -1, (128, 4, 1), True)])
@pytest.mark.parametrize("op, ref", [(nl.add, np.sum), (nl.maximum, np.max), (nl.minimum, np.min)])
def test_tensor_reduce(shape, axis, out_shape, keepdims, op, ref):
    x = rand(shape, 10)
    body = lambda d, o: nisa.tensor_reduce(dst=o, op=op, data=d, axis=axis, keepdims=keepdims)
    got = run_tiles(body, x, outs=[(out_shape, F32)])
    axes = tuple(a % len(shape) for a in ((axis,) if isinstance(axis, int) else axis))
    assert np.allclose(got.reshape(128, -1), ref(x, axis=axes).reshape(128, -1), rtol=1e-5)


def test_tensor_reduce_negate():
    x = rand((128, 8), 11)
    body = lambda d, o: nisa.tensor_reduce(dst=o, op=nl.add, data=d, axis=1, negate=True)
    assert np.allclose(run_tiles(body, x, outs=[((128, 1), F32)])[:, 0], -x.sum(1), rtol=1e-5)


def test_tensor_copy_casts_and_memset_fills():
    x = rand((64, 8), 12)
    body = lambda d, o, z, i: (nisa.tensor_copy(dst=o, src=d), nisa.memset(dst=z, value=0.25),
                               nisa.memset(dst=i, value=-7, engine=nisa.engine.gpsimd))
    o, z, i = run_tiles(body, x, outs=[((64, 8), BF16), ((64, 8), F32), ((64, 8), np.int32)])
    assert np.array_equal(o, x.astype(BF16)) and np.all(z == 0.25) and np.all(i == -7)


def test_reciprocal():
    x = np.abs(rand((128, 8), 13)) + np.float32(0.1)
    got = run_tiles(lambda d, o: nisa.reciprocal(dst=o, data=d), x, outs=[((128, 8), F32)])
    assert np.array_equal(got, (np.float32(1) / x).astype(F32))


def test_language_callables_lower_to_isa():
    a, b = rand((128, 16), 14), rand((128, 16), 15)
    col = rand((128, 1), 16)

    def body(x, y, c, o):
        r = nl.add(nl.multiply(x, y), 1.0)                # tensor_tensor, tensor_scalar
        r = nl.subtract(2.0, r)                           # reversed tensor_scalar
        r = nl.multiply(r, c)                             # [P,1] operand -> tensor_scalar
        nisa.tensor_copy(dst=o[:, 0:16], src=nl.exp(nl.multiply(r, 0.01)))
        nisa.tensor_copy(dst=o[:, 16:17], src=nl.sum(x, axis=1))
        nisa.tensor_copy(dst=o[:, 17:18], src=nl.mean(x, axis=1))
        nisa.tensor_copy(dst=o[:, 18:19], src=nl.rsqrt(nl.add(nl.square(c), 1.0)))

    got = run_tiles(body, a, b, col, outs=[((128, 19), F32)])
    r = (2.0 - (a * b + 1.0)) * col
    assert np.allclose(got[:, :16], np.exp(r * 0.01), rtol=1e-6)
    assert np.allclose(got[:, 16], a.sum(1), rtol=1e-5) and np.allclose(got[:, 17], a.mean(1), rtol=1e-5, atol=1e-6)
    assert np.allclose(got[:, 18], 1 / np.sqrt(col[:, 0] ** 2 + 1), rtol=1e-6)
    trace = nkisim.last_trace()
    rsqrt = [i for i in trace if i.attrs.get("via") == "nl.rsqrt"]
    assert [(i.isa, i.engine) for i in rsqrt] == [("tensor_scalar", "GpSimd")]
    assert {i.attrs.get("via") for i in trace if i.isa == "activation"} == {"nl.exp", "nl.square"}


def test_nl_load_and_store():
    import nki

    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.exp(nl.load(x)))
        return out

    x = rand((32, 8), 17)
    assert np.allclose(k(x), np.exp(x), rtol=1e-6)


# The ALU table of the NKI ISA common fields page (nki.api.shared, SDK 2.32; the 2.33 page keeps the table):
# bit-vector ops "treat input elements as bit patterns", nl.right_shift is "Logical Shift Right" and
# "Arithmetic Shift Right" is "Not supported".
def test_right_shift_is_logical_on_signed_integers():
    x = np.array([[-296, -8, -1, 64]] * 2, np.int32)
    by_scalar = run_tiles(lambda t, o: nisa.tensor_scalar(dst=o, data=t, op0=nl.right_shift, operand0=2),
                          x, outs=[(x.shape, np.int32)])
    assert np.array_equal(by_scalar, (x.view(np.uint32) >> 2).view(np.int32))     # -296 >> 2 is 1073741750
    shifts = np.array([[0, 1, 4, 31]] * 2, np.int32)
    by_tile = run_tiles(lambda t, s, o: nisa.tensor_tensor(dst=o, data1=t, data2=s, op=nl.right_shift),
                        x, shifts, outs=[(x.shape, np.int32)])
    assert np.array_equal(by_tile, (x.view(np.uint32) >> shifts.view(np.uint32)).view(np.int32))   # >> 0 keeps -296
    x16 = np.array([[-2, 5]], np.int16)
    got16 = run_tiles(lambda t, o: nisa.tensor_scalar(dst=o, data=t, op0=nl.right_shift, operand0=1),
                      x16, outs=[(x16.shape, np.int16)])
    assert np.array_equal(got16, (x16.view(np.uint16) >> 1).view(np.int16))        # at the element's own width


def test_left_shift_and_invert_work_on_the_bit_pattern():
    """A bit shifted out of the element is lost (no saturation); nl.invert flips the element's bits."""
    x = np.array([[0x40000001, -1, 3]], np.int32)
    shifted = run_tiles(lambda t, o: nisa.tensor_scalar(dst=o, data=t, op0=nl.left_shift, operand0=2),
                        x, outs=[(x.shape, np.int32)])
    assert np.array_equal(shifted, (x.view(np.uint32) << 2).view(np.int32))        # 0x40000001 << 2 is 4
    chained = run_tiles(lambda t, o: nisa.tensor_scalar(dst=o, data=t, op0=nl.invert, operand0=None,
                                                        op1=nl.right_shift, operand1=1), x, outs=[(x.shape, np.int32)])
    assert np.array_equal(chained, ((~x).view(np.uint32) >> 1).view(np.int32))     # each stage keeps 32 bits
    u = np.array([[0, 5, 255]], np.uint8)
    flipped = run_tiles(lambda t, o: nisa.tensor_scalar(dst=o, data=t, op0=nl.invert, operand0=None),
                        u, outs=[(u.shape, np.uint8)])
    assert np.array_equal(flipped, ~u)


@pytest.mark.parametrize("op, ref", [(nl.square, np.square), (nl.relu, lambda a: np.maximum(a, 0))])
def test_square_and_relu_are_unary_alu_ops(op, ref):
    """The ALU table's "Arithmetic Unary" rows: abs, square, relu, rsqrt, reciprocal (operand None)."""
    a = rand((16, 8), 3)
    got = run_tiles(lambda x, o: nisa.tensor_scalar(dst=o, data=x, op0=op, operand0=None), a,
                    outs=[(a.shape, F32)])
    assert np.array_equal(got, ref(a))
