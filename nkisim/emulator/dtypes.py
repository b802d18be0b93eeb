"""NKI dtypes and the numeric plumbing between numpy storage and torch math.

On-chip and HBM buffers are numpy arrays; bf16 and fp8 are real low-precision storage
(`ml_dtypes`), so values are rounded exactly where the hardware rounds. Heavy element-wise math
runs through torch on zero-copy views of those arrays (a bf16 array viewed as int16 becomes a
`torch.bfloat16` tensor without copying), because torch's vectorised kernels are an order of
magnitude faster than `scipy.special` on large tiles.

Rounding rule (hardware default, round-to-nearest-even): Vector/Scalar/GpSimd arithmetic is done
in fp32 and cast to the destination dtype on write; float -> int casts round half to even and
saturate to the integer range (NaN becomes 0); DMA casts go through fp32.
"""
from __future__ import annotations

import functools
from typing import Any

import ml_dtypes
import numpy as np
import torch

from . import nki_versions

float32 = np.dtype(np.float32)
float16 = np.dtype(np.float16)
bfloat16 = np.dtype(ml_dtypes.bfloat16)
float8_e4m3 = np.dtype(ml_dtypes.float8_e4m3)
float8_e4m3fn = np.dtype(ml_dtypes.float8_e4m3fn)
float8_e5m2 = np.dtype(ml_dtypes.float8_e5m2)
float8_e8m0fnu = np.dtype(ml_dtypes.float8_e8m0fnu)
int8, int16, int32 = np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32)
uint8, uint16, uint32 = np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32)
bool_ = np.dtype(np.bool_)
# NKI 0.7's 64-bit integer: a storage dtype of DMA and scalar_load / scalar_store only ("Unlike the compute
# instructions, scalar_load accepts nl.int64", nki.isa.scalar_load page)
int64 = np.dtype(np.int64)

FLOATS = (float32, float16, bfloat16, float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu)
INTS = (int8, int16, int32, uint8, uint16, uint32, bool_)
SUPPORTED = FLOATS + INTS          # every NKI version's; int64 joins under NKI 0.7 (`supported()`)

_FROM_TORCH = {
    torch.float32: float32, torch.float16: float16, torch.bfloat16: bfloat16,
    torch.float8_e4m3fn: float8_e4m3fn, torch.float8_e5m2: float8_e5m2,
    torch.int8: int8, torch.int16: int16, torch.int32: int32,
    torch.uint8: uint8, torch.uint16: uint16, torch.uint32: uint32, torch.bool: bool_, torch.int64: int64,
}
_TO_TORCH = {v: k for k, v in _FROM_TORCH.items()}
# numpy dtypes torch cannot wrap directly: reinterpret through an integer of the same width.
_RAW_FOR_TORCH = {bfloat16: np.dtype(np.int16), float8_e4m3fn: uint8, float8_e5m2: uint8}
# dtypes whose values torch arithmetic handles (uint16/uint32 tensors support almost no ops).
_TORCH_MATH = (float32, float16, bfloat16, int8, int16, int32, uint8, bool_)


def supported() -> tuple[np.dtype, ...]:
    """The dtypes of the emulated NKI version: SUPPORTED, and nl.int64 under NKI 0.7."""
    return SUPPORTED + (int64,) if nki_versions.applies("nki.language.int64") else SUPPORTED


def resolve(dtype: Any) -> np.dtype | None:
    """The NKI dtype for `dtype` (numpy, ml_dtypes or torch spelling), or None if NKI lacks it."""
    if isinstance(dtype, torch.dtype):
        dt = _FROM_TORCH.get(dtype)
    else:
        try:
            dt = np.dtype(dtype)
        except TypeError:
            return None
    return dt if dt in supported() else None


def names() -> str:
    return ", ".join(d.name for d in supported())


_NAMES: dict[np.dtype, str] = {}   # numpy builds dtype.name anew on every access


def name_of(dtype: np.dtype) -> str:
    """`dtype.name`, looked up once per dtype (instructions record their dtypes' names)."""
    name = _NAMES.get(dtype)
    if name is None:
        name = _NAMES[dtype] = dtype.name
    return name


def is_float(dtype: np.dtype) -> bool:
    return dtype in FLOATS


def to_torch_dtype(dtype: np.dtype) -> torch.dtype | None:
    return _TO_TORCH.get(dtype)


_UNSIGNED = {1: uint8, 2: uint16, 4: uint32, 8: np.dtype(np.uint64)}
_SIGNED = {1: int8, 2: int16, 4: int32}


def raw(arr: np.ndarray) -> np.ndarray:
    """The same memory as unsigned integers of the same width (bit-exact copies of any dtype)."""
    return arr.view(_UNSIGNED[arr.dtype.itemsize])


def torch_view(arr: np.ndarray) -> torch.Tensor | None:
    """A torch tensor sharing `arr`'s memory, or None when torch cannot alias it."""
    if arr.dtype not in _TORCH_MATH and arr.dtype not in _RAW_FOR_TORCH:
        return None
    if arr.strides and min(arr.strides) < 0:
        return None
    raw_dtype = _RAW_FOR_TORCH.get(arr.dtype)
    if raw_dtype is None:
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.view(raw_dtype)).view(_TO_TORCH[arr.dtype])


def numpy_from_torch(t: torch.Tensor) -> np.ndarray:
    """A numpy array sharing the CPU tensor's memory (bf16/fp8 as ml_dtypes)."""
    dtype = _FROM_TORCH[t.dtype]
    raw_dtype = _RAW_FOR_TORCH.get(dtype)
    if raw_dtype is None:
        return t.numpy()
    return t.view(_TO_TORCH.get(raw_dtype, torch.uint8)).numpy().view(dtype)


def torch_from_numpy(arr: np.ndarray) -> torch.Tensor:
    """A CPU tensor sharing the array's memory; fails for dtypes torch lacks (e.g. IEEE fp8 e4m3)."""
    view = torch_view(arr)
    if view is None:
        if arr.dtype not in _TO_TORCH:
            raise TypeError(f"dtype {arr.dtype.name} has no torch equivalent")
        return torch.from_numpy(np.ascontiguousarray(arr))
    return view


def load_f32(arr: np.ndarray) -> torch.Tensor:
    """The values of `arr` as an fp32 torch tensor (may alias `arr`: never modify it in place)."""
    view = torch_view(arr)
    if view is not None:
        # Contiguous on purpose: torch picks other vectorised code paths for strided tensors, and
        # their last-bit results differ; an instruction must not depend on where a tile lives.
        return (view if view.dtype == torch.float32 else view.to(torch.float32)).contiguous()
    return torch.from_numpy(np.ascontiguousarray(arr, dtype=np.float32))


def load_int(arr: np.ndarray) -> torch.Tensor:
    """Integer values as int64 (native integer arithmetic, predicates)."""
    return torch.from_numpy(np.asarray(arr, dtype=np.int64))


def load_bits(arr: np.ndarray) -> torch.Tensor:
    """Integer elements as their bit patterns, non-negative int64: what the ALU's bit-vector ops work on
    ("instructions using bitvec operators ... treat input elements as bit patterns", the NKI ISA common
    fields page), so that nl.right_shift is the table's "Logical Shift Right" (arithmetic shift right: "Not
    supported") at the element's own width."""
    arr = np.asarray(arr)
    return torch.from_numpy(arr.view(f"u{arr.dtype.itemsize}").astype(np.int64))


def wrap_int(value: torch.Tensor, dtype: np.dtype) -> torch.Tensor:
    """An integer result as an integer `dtype` holds its low bits: modulo 2^bits, signed for a signed dtype."""
    bits = 8 * dtype.itemsize
    value = value.to(torch.int64) & ((1 << bits) - 1)
    if np.issubdtype(dtype, np.signedinteger):
        value = value - (value >= 1 << (bits - 1)).to(torch.int64) * (1 << bits)
    return value


def store(dst: np.ndarray, value: torch.Tensor) -> None:
    """Write computed values into `dst`, casting with round-to-nearest-even (ints: RNE + saturate)."""
    value = value.reshape(dst.shape)
    if dst.dtype in INTS and dst.dtype != bool_ and value.is_floating_point():
        info = np.iinfo(dst.dtype)
        value = torch.nan_to_num(torch.round(value.to(torch.float64)), nan=0.0).clamp(info.min, info.max)
    elif dst.dtype in INTS and dst.dtype != bool_:
        info = np.iinfo(dst.dtype)
        value = value.clamp(info.min, info.max)
    dst, value = _last_write_wins(dst, value)
    view = torch_view(dst)
    if view is not None:
        view.copy_(value)
    else:
        dst[...] = value.numpy().astype(dst.dtype)


def _last_write_wins(dst: np.ndarray, value: torch.Tensor) -> tuple[np.ndarray, torch.Tensor]:
    """A destination view with a step-0 dimension (an access pattern [0, n]) names one address n times;
    the engine writes in access-pattern order, so each address keeps the last value along that dimension."""
    for axis, (stride, size) in enumerate(zip(dst.strides, dst.shape)):
        if stride == 0 and size > 1:
            dst = dst[(slice(None),) * axis + (slice(size - 1, size),)]
            value = value.narrow(axis, size - 1, 1)
    return dst, value


_THREADED_COPY_BYTES = 1 << 18   # below this, numpy's single-threaded copy beats torch's dispatch


def copy_bits(dst: np.ndarray, src: np.ndarray) -> None:
    """dst = src for equal dtypes, bit-exact, flattening both row-major (torch's copy is threaded)."""
    if dst.nbytes >= _THREADED_COPY_BYTES:
        d, s = _signed_raw(dst), _signed_raw(src)
        if d is not None and s is not None:
            d.copy_(s if s.shape == d.shape else s.reshape(d.shape))
            return
    raw(dst)[...] = raw(src).reshape(dst.shape)


def _signed_raw(arr: np.ndarray) -> torch.Tensor | None:
    signed = _SIGNED.get(arr.dtype.itemsize)
    # torch cannot wrap a negative stride, and warns on a read-only array (a broadcast view): numpy copies those
    if signed is None or (arr.strides and min(arr.strides) < 0) or not arr.flags.writeable:
        return None
    return torch.from_numpy(arr.view(signed))


def fill_uninitialised(arr: np.ndarray) -> None:
    """The official simulator's sentinel for unwritten memory: NaN for floats, 4 for integers."""
    if not is_float(arr.dtype):
        arr.fill(4 if arr.dtype != bool_ else True)
        return
    # Fresh allocations and their flat slices: torch's fill is threaded, so large outputs fill on every core.
    torch.from_numpy(arr.view(_SIGNED[arr.dtype.itemsize])).fill_(_nan_bits(arr.dtype))


@functools.cache
def _nan_bits(dtype: np.dtype) -> int:
    """The NaN pattern of a float dtype as a signed integer of its width."""
    return int(np.array([np.nan], np.float32).astype(dtype).view(_SIGNED[dtype.itemsize])[0])
