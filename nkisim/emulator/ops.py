"""Operator and activation-function identifiers (`nl.add`, `nl.gelu`, ...) and their fp32 math.

Each `nl.*` name is one `Op`: an identifier passed to ISA `op=` arguments and, since NKI 0.3, a
callable element-wise API (the lowering lives in `language.call_op`). All math here takes and
returns fp32 torch tensors; callers round to the destination dtype. One speed shortcut gives the
same bits: `nl.gelu` from bf16 to bf16 runs torch's bf16 kernel where that is exact (`_gelu_bf16`).

Activation formulas (Scalar engine; the hardware evaluates piece-wise polynomial approximations
whose accuracy is unpublished, the emulator evaluates the exact functions in fp32):
  copy x | square x^2 | exp e^x | log ln x | sqrt | rsqrt 1/sqrt(x) | reciprocal 1/x
  sigmoid 1/(1+e^-x) | tanh | relu max(x,0) | sign | abs | sin | arctan | erf
  erf_dx 2/sqrt(pi) e^(-x^2)
  gelu x*Phi(x) = 0.5 x (1 + erf(x/sqrt 2))            (exact erf GELU, torch's default gelu)
  gelu_dx Phi(x) + x*phi(x), phi = e^(-x^2/2)/sqrt(2 pi) (exact derivative; formula derived, not published)
  gelu_apprx_tanh 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))
  gelu_apprx_sigmoid x*sigmoid(1.702 x) ; gelu_apprx_sigmoid_dx its derivative
  silu x*sigmoid(x) ; silu_dx sigmoid(x)(1 + x(1 - sigmoid(x)))
  softplus ln(1+e^x) ; mish x*tanh(softplus(x))
gelu and gelu_dx take their exact limits at +-inf (gelu: +inf, 0; gelu_dx: 1, 0).

An element-wise engine's result depends on the input value alone. torch's fp32 CPU kernels do not
always: the sigmoid family (sigmoid, silu, silu_dx, softplus, mish, gelu_apprx_*) and the ALU's power
round some values differently (by an ulp) in a vector body and in its scalar tail, and any function may on
a one-element tensor. So those are evaluated in fp64 and rounded to fp32, and `Op.activate` evaluates a one-element
input as part of a two-element one; `tests/nkisim/test_isa.py` checks every activation on this machine.

Valid input ranges (`Op.valid`): log [2^-64, 2^64], sin [-pi, pi], arctan [-pi/2, pi/2],
sqrt [2^-116, 2^118], rsqrt [2^-87, 2^97], reciprocal +-[2^-42, 2^42]; outside them "the Scalar
Engine will generate invalid output results" (no clamping; sin extrapolates its polynomial), per
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.api.shared.html (activation
function table). The polynomials are unpublished, so `activation` writes NaN there and warns.
"""
from __future__ import annotations

import functools
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F

Tensor = torch.Tensor
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_PI_F32 = 3.1415927410125732  # fp32(pi): an fp32 input equal to "pi" is inside [-pi, pi]


class Op:
    """One `nl.*` operator identifier. Calling it runs the NKI 0.3+ element-wise callable."""

    def __init__(self, name: str, *, binary: Callable[[Tensor, Tensor], Tensor] | None = None,
                 unary: Callable[[Tensor], Tensor] | None = None,
                 act: Callable[[Tensor], Tensor] | None = None,
                 act_bf16: Callable[[Tensor, Tensor], bool] | None = None, bitvec: bool = False,
                 valid: tuple[float, float] | None = None, callable_only: bool = False) -> None:
        self.name = name
        self.binary = binary          # ALU two-operand function
        self.unary = unary            # ALU one-operand function (operand must be None or 0)
        self.act = act                # Scalar-engine activation function
        self.act_bf16 = act_bf16      # optional shortcut: bf16 in -> bf16 out, bit-identical to act + RNE
        self.bitvec = bitvec          # integer bit-vector op (raw bits, integer dtypes only)
        self.valid = valid            # activation's documented valid input range (of |x| for reciprocal)
        self.callable_only = callable_only  # an nl function only: in no ISA operator or activation table

    def activate(self, x: Tensor) -> Tensor:
        """The activation of fp32 `x`, each element's value a function of its input alone (module docstring)."""
        if x.numel() == 1:     # torch's one-element path is not its vector path
            return self.act(x.reshape(1).expand(2).contiguous())[:1].reshape(x.shape)
        return self.act(x)

    @property
    def is_alu(self) -> bool:
        return self.binary is not None or self.unary is not None

    def __eq__(self, other: object) -> bool:   # identity, spelled out: torch.compile takes an operator as a constant
        return self is other

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _lowering(self, *args, **kwargs)


def _not_lowered(op: Op, *args: Any, **kwargs: Any) -> Any:
    raise RuntimeError(f"{op!r} was called before nki.language was imported")


# The callable form lowers to ISA instructions, which `language` provides (`set_lowering`): ops stay
# import-light and import nothing of the emulator's.
_lowering: Callable[..., Any] = _not_lowered


def set_lowering(lower: Callable[..., Any]) -> None:
    """Install `lower(op, *args, **kwargs)` as what calling an operator identifier does."""
    global _lowering
    _lowering = lower


def _flag(fn: Callable[[Tensor, Tensor], Tensor]) -> Callable[[Tensor, Tensor], Tensor]:
    return lambda a, b: fn(a, b).to(torch.float32)


def _nz(t: Tensor) -> Tensor:
    return t != 0


def _phi_cdf(x: Tensor) -> Tensor:
    return 0.5 * (1.0 + torch.erf(x * _SQRT1_2))


def _gelu_dx(x: Tensor) -> Tensor:
    return _phi_cdf(x) + x * (torch.exp(-0.5 * x * x) * _INV_SQRT_2PI)


# Exponent field of a bf16 bit pattern: 0 and 1 mark zeros, subnormals and the smallest normals
# (|x| < 2^-125), 0xFF marks inf and NaN.
_BF16_EXPONENT = 0x7F80
_BF16_EXPONENT_ONE = 0x0080


def _gelu_bf16(x: Tensor, out: Tensor) -> bool:
    """out = gelu(x) for flat contiguous bf16 tensors in one pass of torch's bf16 kernel, which
    evaluates in fp32 and rounds to nearest even like the fp32 route. It differs from that route
    only on inputs with |x| < 2^-125 (it flushes their subnormal results to zero) and on NaN
    payloads, so a tile holding such a value returns False untouched and the caller takes the
    fp32 route. Some CPU builds (AVX2) also return -0 in the far negative tail where the fp32
    route gives +0; adding +0 repairs exactly that (-0 + 0 = +0, every other value unchanged).
    Used only where a one-time check over every other bf16 value found the repaired result
    bit-identical on this machine (`_gelu_bf16_route`)."""
    route = _gelu_bf16_route()
    if route is None:
        return False
    exponent_lo, exponent_hi = torch.aminmax(torch.bitwise_and(x.view(torch.int16), _BF16_EXPONENT))
    if int(exponent_lo) <= _BF16_EXPONENT_ONE or int(exponent_hi) == _BF16_EXPONENT:
        return False
    torch._C._nn.gelu(x, out=out)
    if route == "plus_zero":
        out.add_(0.0)
    return True


@functools.cache
def _gelu_bf16_route() -> str | None:
    """How torch's bf16 GELU can stand in for fp32 GELU + round-to-nearest-even on every bf16 value
    the shortcut accepts: "exact", "plus_zero" (exact once -0 results become +0), or None (it
    cannot). CPU kernels differ by instruction set, so this is checked, not assumed."""
    bits = torch.arange(-(1 << 15), 1 << 15, dtype=torch.int32).to(torch.int16)
    exponent = torch.bitwise_and(bits, _BF16_EXPONENT)
    x = bits[(exponent > _BF16_EXPONENT_ONE) & (exponent != _BF16_EXPONENT)].view(torch.bfloat16)
    via_fp32 = torch.empty_like(x).copy_(F.gelu(x.to(torch.float32))).view(torch.int16)
    native = F.gelu(x)
    if torch.equal(native.view(torch.int16), via_fp32):
        return "exact"
    if torch.equal(native.add_(0.0).view(torch.int16), via_fp32):
        return "plus_zero"
    return None


def _limits_at_infinity(fn: Callable[[Tensor], Tensor], at_pos: float | None, at_neg: float) -> Callable:
    """fn with its exact limits at x = +-inf, where inf * 0 makes the formula NaN (at_pos None: +inf)."""
    def act(x: Tensor) -> Tensor:
        y = fn(x)
        inf = torch.isinf(x)
        if not bool(inf.any()):
            return y
        y = y.masked_fill(inf & (x < 0), at_neg)
        return y.masked_fill(inf & (x > 0), float("inf") if at_pos is None else at_pos)
    return act


def _in_float64(fn: Callable[..., Tensor]) -> Callable[..., Tensor]:
    """fn evaluated in fp64 and rounded to fp32: the same value wherever an element sits (module docstring)."""
    return lambda *operands: fn(*(t.double() for t in operands)).float()


def _gelu_sigmoid_dx(x: Tensor) -> Tensor:
    s = torch.sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1.0 - s)


def _silu_dx(x: Tensor) -> Tensor:
    s = torch.sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


_OPS = [
    # arithmetic ALU ops (Vector/GpSimd/Scalar), fp32
    Op("add", binary=torch.add),
    Op("subtract", binary=torch.sub),
    Op("multiply", binary=torch.mul),
    Op("divide"),           # nl.divide exists, but the ALU op table has no divide (an identifier only)
    Op("maximum", binary=torch.maximum),
    Op("minimum", binary=torch.minimum),
    Op("power", binary=_in_float64(torch.pow)),
    Op("equal", binary=_flag(torch.eq)),
    Op("not_equal", binary=_flag(torch.ne)),
    Op("greater", binary=_flag(torch.gt)),
    Op("greater_equal", binary=_flag(torch.ge)),
    Op("less", binary=_flag(torch.lt)),
    Op("less_equal", binary=_flag(torch.le)),
    Op("logical_and", binary=_flag(lambda a, b: _nz(a) & _nz(b))),
    Op("logical_or", binary=_flag(lambda a, b: _nz(a) | _nz(b))),
    Op("logical_xor", binary=_flag(lambda a, b: _nz(a) ^ _nz(b))),
    # bit-vector ALU ops (integer dtypes)
    Op("bitwise_and", binary=torch.bitwise_and, bitvec=True),
    Op("bitwise_or", binary=torch.bitwise_or, bitvec=True),
    Op("bitwise_xor", binary=torch.bitwise_xor, bitvec=True),
    Op("left_shift", binary=torch.bitwise_left_shift, bitvec=True),
    Op("right_shift", binary=torch.bitwise_right_shift, bitvec=True),
    Op("invert", unary=torch.bitwise_not, bitvec=True),
    # activation functions; abs, square, relu, rsqrt and reciprocal are also the ALU table's "Arithmetic Unary" ops
    Op("copy", act=lambda x: x),
    Op("square", act=lambda x: x * x, unary=lambda x: x * x),
    Op("exp", act=torch.exp),
    Op("log", act=torch.log, valid=(2.0**-64, 2.0**64)),
    Op("sqrt", act=torch.sqrt, valid=(2.0**-116, 2.0**118)),
    Op("rsqrt", act=torch.rsqrt, unary=torch.rsqrt, valid=(2.0**-87, 2.0**97)),
    Op("reciprocal", act=torch.reciprocal, unary=torch.reciprocal, valid=(2.0**-42, 2.0**42)),
    Op("abs", act=torch.abs, unary=torch.abs),
    Op("sign", act=torch.sign),
    Op("sin", act=torch.sin, valid=(-_PI_F32, _PI_F32)),
    Op("arctan", act=torch.atan, valid=(-_PI_F32 / 2, _PI_F32 / 2)),
    Op("sigmoid", act=_in_float64(torch.sigmoid)),
    Op("tanh", act=torch.tanh),
    Op("relu", act=torch.relu, unary=torch.relu),
    Op("erf", act=torch.erf),
    Op("erf_dx", act=lambda x: torch.exp(-x * x) * (2.0 / math.sqrt(math.pi))),
    Op("gelu", act=_limits_at_infinity(F.gelu, None, 0.0), act_bf16=_gelu_bf16),
    Op("gelu_dx", act=_limits_at_infinity(_gelu_dx, 1.0, 0.0)),
    Op("gelu_apprx_tanh", act=_in_float64(lambda x: F.gelu(x, approximate="tanh"))),
    Op("gelu_apprx_sigmoid", act=_in_float64(lambda x: x * torch.sigmoid(1.702 * x))),
    Op("gelu_apprx_sigmoid_dx", act=_in_float64(_gelu_sigmoid_dx)),
    Op("silu", act=_in_float64(F.silu)),
    Op("silu_dx", act=_in_float64(_silu_dx)),
    Op("softplus", act=_in_float64(F.softplus)),
    Op("mish", act=_in_float64(F.mish)),
    # nl element-wise functions that are in neither ISA table: callable only (`nl.floor(x)`), never
    # an `op=` argument. Their lowering is undocumented; nkisim's is one instruction of the nearest
    # documented kind (Vector tensor_scalar / tensor_tensor, Scalar activation), values as numpy's.
    Op("floor", unary=torch.floor, callable_only=True),
    Op("ceil", unary=torch.ceil, callable_only=True),
    Op("trunc", unary=torch.trunc, callable_only=True),
    Op("mod", binary=torch.remainder, callable_only=True),    # sign of the divisor (Python's x % y)
    Op("fmod", binary=torch.fmod, callable_only=True),        # sign of the dividend (C's fmod)
    Op("cos", act=torch.cos, callable_only=True),
    Op("tan", act=torch.tan, callable_only=True),
    # a reduction identifier only: NKI 0.6's tensor_partition_reduce op (the mean over partitions), no callable
    Op("average"),
]
OPS: dict[str, Op] = {op.name: op for op in _OPS}


def activation_names() -> str:
    return ", ".join(n for n, op in OPS.items() if op.act is not None and not op.callable_only)


def alu_names() -> str:
    return ", ".join(n for n, op in OPS.items() if op.is_alu and not op.callable_only)
