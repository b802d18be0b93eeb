"""Input limits of the kernels, checked before launch so bad input gets a clear error.

Pure Python on shapes, dtypes and devices (no torch, no nki import), so the same checks run for
torch tensors, NumPy arrays and fake tensors under `torch.compile`. Every message names the
argument, the value and the limit.
"""
from __future__ import annotations

import numbers
import sys
from typing import Sequence

PMAX = 128                 # partitions per SBUF tile (nl.tile_size.pmax on trn2)
FOLD_MAX_BRANCHES = 4      # b is [B, R, H] with 1 <= B <= 4
FOLD_MAX_H = 16384         # one instruction's free axis; the fold kernel does not chunk H
SBUF_USABLE_BYTES = 212_728  # usable SBUF per partition on trn2 (see nki-semantics §3)
FOLD_STAT_BYTES_PER_TILE = 6 * 4  # res_layernorm_fold_kernel's six fp32 [128, G] statistic columns
# nl.rsqrt's documented valid input range is [2^-87, 2^97] (outside it the hardware output is invalid):
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/nki.api.shared.html (activation table).
# var + eps >= eps, so eps in that range keeps the fold's rsqrt input valid.
RSQRT_MIN, RSQRT_MAX = 2.0**-87, 2.0**97
GELU_DTYPES = ("float32", "bfloat16")


class KernelInputError(ValueError):
    """An input outside what a kernel supports; the message names the value and the limit."""


class KernelTypeError(KernelInputError, TypeError):
    """An argument of the wrong kind (None, a NumPy array or a list where a torch tensor goes, ...)."""


def described(value: object) -> str:
    """What a caller passed, for a message: 'None', 'a list', 'a numpy.ndarray of shape (4, 8), float32',
    'a torch.nn.RMSNorm' (a class by the shortest module path that exports it)."""
    if value is None:
        return "None"
    kind = type(value)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        parts = kind.__module__.split(".")
        prefix = next((".".join(parts[:i]) for i in range(1, len(parts) + 1)
                       if getattr(sys.modules.get(".".join(parts[:i])), name, None) is kind), kind.__module__)
        name = f"{prefix}.{name}"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    detail = f" of shape {tuple(shape)}, {dtype_name(dtype)}" if shape is not None and dtype is not None else ""
    return f"a {name}{detail}"


def check_kind(function: str, name: str, value: object, kinds: type | tuple[type, ...], accepts: str,
               hint: str = "") -> None:
    """KernelTypeError unless `value` is one of `kinds`; the message says what it is and what is accepted.
    Host code only (kernel code validates with assert)."""
    if not isinstance(value, kinds):
        raise KernelTypeError(f"{function}: {name} must be {accepts}, got {described(value)}{hint}")


NO_LIMIT = 2**63      # a size's upper end when it has none (kernel helpers cannot test `is None`)


def size_problem(function: str, name: str, value: object, low: int = 1, high: int = NO_LIMIT) -> str:
    """'' when `value` is an int with low <= value <= high, else the message naming it and the range."""
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return ""
    if high == NO_LIMIT:
        return f"{function}: {name}={value!r}; need an int >= {low}"
    return f"{function}: {name}={value!r}; need an int with {low} <= {name} <= {high}"


def assert_size(function: str, name: str, value: object, low: int = 1, high: int = NO_LIMIT) -> None:
    """`size_problem` as an AssertionError: how kernel code, and the helpers it calls, validate."""
    problem = size_problem(function, name, value, low, high)
    assert problem == "", problem


def check_size(function: str, name: str, value: object, low: int = 1, high: int = NO_LIMIT) -> None:
    """`size_problem` as a KernelInputError, for host code."""
    problem = size_problem(function, name, value, low, high)
    if problem:
        raise KernelInputError(problem)


def dtype_name(dtype: object) -> str:
    """'float32' for torch.float32, numpy float32 and nl.float32 alike."""
    return str(dtype).rsplit(".", 1)[-1]


def check_lnc(kernel: str, lnc: int) -> None:
    """trn2 logical cores span 1 or 2 physical cores."""
    if lnc not in (1, 2):
        raise KernelInputError(f"{kernel}: LNC={lnc}; trn2 supports LNC 1 or 2")


def check_gelu_input(kernel: str, name: str, shape: Sequence[int], dtype: object) -> None:
    """GELU kernels take a 2-D [R, C] tensor, R >= 1, C >= 1, float32 or bfloat16."""
    if len(shape) != 2:
        raise KernelInputError(
            f"{kernel}: {name} must be 2-D [R, C], got shape {tuple(shape)}; "
            "gelu_erf / GELUErf flatten leading dims for you"
        )
    rows, cols = shape
    if rows < 1 or cols < 1:
        raise KernelInputError(f"{kernel}: {name} has shape {tuple(shape)}; need R >= 1 and C >= 1")
    if dtype_name(dtype) not in GELU_DTYPES:
        raise KernelInputError(
            f"{kernel}: {name} has dtype {dtype_name(dtype)}; supported: float32, bfloat16"
        )


def check_same(kernel: str, names: tuple[str, str], shapes: tuple, dtypes: tuple) -> None:
    """Two operands that must agree in shape and dtype (gelu_bwd's x and grad_out)."""
    if tuple(shapes[0]) != tuple(shapes[1]):
        raise KernelInputError(
            f"{kernel}: {names[1]} shape {tuple(shapes[1])} does not match "
            f"{names[0]} shape {tuple(shapes[0])}"
        )
    if dtype_name(dtypes[0]) != dtype_name(dtypes[1]):
        raise KernelInputError(
            f"{kernel}: {names[1]} dtype {dtype_name(dtypes[1])} does not match "
            f"{names[0]} dtype {dtype_name(dtypes[0])}"
        )


def fold_sbuf_bytes_per_tile(hidden: int, branches: int) -> int:
    """SBUF bytes per partition one tile's slots take: fp32 a + B bf16 branches + fp32 sum, for the
    fold kernel's 1 <= H <= 16384 and 1 <= B <= 4 (an AssertionError naming the value otherwise)."""
    assert_size("fold_sbuf_bytes_per_tile", "hidden", hidden, 1, FOLD_MAX_H)
    assert_size("fold_sbuf_bytes_per_tile", "branches", branches, 1, FOLD_MAX_BRANCHES)
    return hidden * (8 + 2 * branches)


def fold_sbuf_footprint(tiles: int, hidden: int, branches: int) -> int:
    """Peak SBUF bytes per partition of `res_layernorm_fold_kernel` for a group of `tiles` tiles.

    Under the emulator's allocation model (an allocation occupies its whole size from its first to its
    last use; nkisim/README.md, "SBUF allocation model") the group's slots and statistic columns are
    all live while a tile's bf16 z tile is, so: tiles * (H*(8+2B) + 24) + 2H. Kept within the usable
    SBUF, so the compiler never has to spill any of them to HBM."""
    return tiles * (fold_sbuf_bytes_per_tile(hidden, branches) + FOLD_STAT_BYTES_PER_TILE) + 2 * hidden


def fold_max_group(hidden: int, branches: int) -> int:
    """The most tiles per group whose whole footprint (`fold_sbuf_footprint`) fits the usable SBUF."""
    fixed = fold_sbuf_footprint(0, hidden, branches)
    return (SBUF_USABLE_BYTES - fixed) // (fold_sbuf_footprint(1, hidden, branches) - fixed)


def check_positive_ints(kernel: str, **values: object) -> None:
    """Sizes that must be ints >= 1 (a clear error instead of a ZeroDivisionError later); an assert,
    as kernel code validates in the NKI 0.6 front-end subset."""
    for name, value in values.items():
        assert_size(kernel, name, value)


def check_eps(kernel: str, eps: object) -> None:
    """eps is a real number (Python or NumPy) in nl.rsqrt's valid input range, so rsqrt(var + eps) is
    valid on the hardware."""
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or not RSQRT_MIN <= eps <= RSQRT_MAX:
        raise KernelInputError(
            f"{kernel}: eps={eps!r}; need a number in [2**-87, 2**97], nl.rsqrt's valid input range "
            "(e.g. 1e-6; 0, negative or NaN eps makes rsqrt(var + eps) invalid)"
        )


def check_fold_inputs(
    a_shape: Sequence[int], a_dtype: object, b_shape: Sequence[int], b_dtype: object, lnc: int
) -> None:
    """The published limits of the residual-add + LayerNorm fold kernel (kernel-designs §2.7)."""
    kernel = "res_layernorm_fold"
    check_lnc(kernel, lnc)
    if len(a_shape) != 2:
        raise KernelInputError(f"{kernel}: a must be 2-D [R, H], got shape {tuple(a_shape)}")
    if len(b_shape) != 3:
        raise KernelInputError(f"{kernel}: b must be 3-D [B, R, H], got shape {tuple(b_shape)}")
    rows, hidden = a_shape
    branches = b_shape[0]
    if rows < 1 or hidden < 1:
        raise KernelInputError(f"{kernel}: a has shape {tuple(a_shape)}; need R >= 1 and H >= 1")
    if tuple(b_shape[1:]) != (rows, hidden):
        raise KernelInputError(
            f"{kernel}: b has rows x width {tuple(b_shape[1:])}, a has {(rows, hidden)}; they must match"
        )
    if not 1 <= branches <= FOLD_MAX_BRANCHES:
        raise KernelInputError(f"{kernel}: B={branches} branches; need 1 <= B <= {FOLD_MAX_BRANCHES}")
    if hidden > FOLD_MAX_H:
        raise KernelInputError(
            f"{kernel}: H={hidden} > {FOLD_MAX_H} (one instruction's free axis; H is not chunked)"
        )
    if rows % (lnc * PMAX):
        raise KernelInputError(
            f"{kernel}: R={rows} is not divisible by LNC*128 = {lnc * PMAX}"
        )
    if dtype_name(a_dtype) != "float32":
        raise KernelInputError(f"{kernel}: a must be float32 (the residual stream), got {dtype_name(a_dtype)}")
    if dtype_name(b_dtype) != "bfloat16":
        raise KernelInputError(f"{kernel}: b must be bfloat16 (the branch outputs), got {dtype_name(b_dtype)}")
    one_tile = fold_sbuf_footprint(1, hidden, branches)
    if one_tile > SBUF_USABLE_BYTES:
        raise KernelInputError(
            f"{kernel}: H={hidden} with B={branches} needs {one_tile:,} B of SBUF per partition for a "
            f"single tile (H*(8+2B) + 24 + 2H), above the {SBUF_USABLE_BYTES:,} B usable on trn2"
        )


# folded_linear: the per-partition SBUF bytes one row block takes (z.T [128, KT, 512] bf16, the
# output rows [128, 4, N] bf16, one bf16 [128, 512] evacuation tile) plus the weight.T tiles kept
# stationary, bounded by FOLDED_LINEAR_WEIGHT_BUDGET (the rest of the usable SBUF).
FOLDED_LINEAR_MAX_H = 8192
FOLDED_LINEAR_MAX_N = 16384
FOLDED_LINEAR_WEIGHT_BUDGET = 98_304   # bytes per partition for the stationary weight.T tiles


def folded_linear_weight_group(hidden: int, n_tiles: int, budget: int = FOLDED_LINEAR_WEIGHT_BUDGET) -> int:
    """N tiles whose weight.T stays in SBUF at once: max(1, min(n_tiles, budget // (2 * 128 * KT)))."""
    check_positive_ints("folded_linear_weight_group", hidden=hidden, n_tiles=n_tiles, budget=budget)
    k_tiles = -(-hidden // PMAX)
    return max(1, min(n_tiles, budget // (2 * PMAX * k_tiles)))


def check_folded_linear_inputs(
    z_shape: Sequence[int], z_dtype: object, w_shape: Sequence[int], w_dtype: object,
    b_shape: Sequence[int], b_dtype: object, lnc: int,
) -> None:
    """folded_linear: z [R, H] bf16, weight [N, H] bf16, bias [N] fp32, 1 <= H <= 8192, 1 <= N <= 16384."""
    kernel = "folded_linear"
    check_lnc(kernel, lnc)
    if len(z_shape) != 2:
        raise KernelInputError(f"{kernel}: z must be 2-D [R, H], got shape {tuple(z_shape)}")
    if len(w_shape) != 2:
        raise KernelInputError(f"{kernel}: weight must be 2-D [N, H] (nn.Linear layout), got shape {tuple(w_shape)}")
    if len(b_shape) != 1:
        raise KernelInputError(f"{kernel}: bias must be 1-D [N], got shape {tuple(b_shape)}")
    rows, hidden = z_shape
    n_out = w_shape[0]
    if rows < 1 or hidden < 1 or n_out < 1:
        raise KernelInputError(f"{kernel}: z {tuple(z_shape)}, weight {tuple(w_shape)}; need R, H, N >= 1")
    if w_shape[1] != hidden:
        raise KernelInputError(
            f"{kernel}: weight has {w_shape[1]} input features, z has H={hidden}; weight must be [N, H]"
        )
    if b_shape[0] != n_out:
        raise KernelInputError(f"{kernel}: bias has {b_shape[0]} elements, weight has N={n_out} outputs")
    if hidden > FOLDED_LINEAR_MAX_H:
        raise KernelInputError(
            f"{kernel}: H={hidden} > {FOLDED_LINEAR_MAX_H} (a 512-row block of z.T is 8H bytes per partition)"
        )
    if n_out > FOLDED_LINEAR_MAX_N:
        raise KernelInputError(
            f"{kernel}: N={n_out} > {FOLDED_LINEAR_MAX_N} (a block's output rows are 8N bytes per partition)"
        )
    for name, dtype, want in (("z", z_dtype, "bfloat16"), ("weight", w_dtype, "bfloat16"), ("bias", b_dtype, "float32")):
        if dtype_name(dtype) != want:
            raise KernelInputError(f"{kernel}: {name} must be {want}, got {dtype_name(dtype)}")
