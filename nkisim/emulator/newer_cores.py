"""What NKI 0.6 and 0.7 document for NeuronCore-v4 (trn3) only, validated and refused on trn2.

nkisim emulates trn2 (NeuronCore-v3). These APIs are documented as "Available only on
NeuronCore-v4 and newer", so a trn2 kernel that calls them does not compile; the emulator says so
at the kernel line instead of computing something trn2 cannot run:
  * MX (microscaling) quantisation and matmul: `quantize_mx`, `nc_matmul_mx`
    https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.quantize_mx.html
    https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_matmul_mx.html
  * `activate2`, `exponential`, `rand2` (same note on each page).
  * the 4-packed MX dtypes `nl.float8_e4m3fn_x4`, `nl.float8_e5m2_x4`, `nl.float4_e2m1fn_x4`,
    documented as "custom data type for nki.isa.nc_matmul_mx on NeuronCore-v4"
    https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/mxfp-matmul.html
    They exist as names (kernels written for trn3 import on trn2) and are refused where a tensor
    would be made with them.
"""
from __future__ import annotations

from typing import Any, NoReturn

from . import nki_versions
from .errors import ABSENT, NkiValidationError, kernel_location, reject_keywords

_WHY = ("is available only on NeuronCore-v4 (trn3) and newer (NKI 0.6 and 0.7 API reference); nkisim emulates trn2 "
        "(NeuronCore-v3)")


class PackedDType:
    """An MX 4-packed dtype name (`nl.float8_e4m3fn_x4`, ...)."""

    def __init__(self, name: str, bits: int) -> None:
        self.name = name
        self.itemsize = bits // 8

    def __repr__(self) -> str:
        return f"nl.{self.name}"

    def refusal(self, api: str) -> str:
        return (f"{api}: dtype nl.{self.name} (4 packed MX values per element) is the input type of "
                f"nisa.nc_matmul_mx, which {_WHY}")


float8_e4m3fn_x4 = PackedDType("float8_e4m3fn_x4", 32)
float8_e5m2_x4 = PackedDType("float8_e5m2_x4", 32)
float4_e2m1fn_x4 = PackedDType("float4_e2m1fn_x4", 16)
PACKED_DTYPES = (float8_e4m3fn_x4, float8_e5m2_x4, float4_e2m1fn_x4)


def _refuse(isa: str, name: Any) -> NoReturn:
    raise NkiValidationError(f"{isa}: nisa.{isa} {_WHY} ({kernel_location()})")


def quantize_mx(dst: Any, src: Any, dst_scale: Any, name: str | None = None) -> NoReturn:
    """MXFP8 quantisation (Vector engine of NeuronCore-v4): refused on trn2."""
    _refuse("quantize_mx", name)


def nc_matmul_mx(dst: Any, stationary: Any, moving: Any, stationary_scale: Any, moving_scale: Any,
                 tile_position: Any = None, tile_size: Any = None, accumulate: Any = None,
                 name: str | None = None) -> NoReturn:
    """MXFP8/MXFP4 matmul (Tensor engine of NeuronCore-v4): refused on trn2."""
    _refuse("nc_matmul_mx", name)


def activate2(dst: Any, op: Any, data: Any, imm0: Any, imm1: Any, op0: Any, op1: Any, relu_param: Any = 0.0,
              reverse0: bool = False, reverse1: bool = False, reduce_op: Any = None, reduce_res: Any = None,
              reduce_cmd: Any = None, engine: Any = ABSENT, name: str | None = None) -> NoReturn:
    """Scalar-engine activation with a two-op prologue (NeuronCore-v4): refused on trn2. `engine`
    exists in NKI 0.7 only, so NKI 0.6 reports it as an unknown keyword first."""
    if not nki_versions.applies("isa-activation-engine"):
        reject_keywords("nisa.activate2", nki_versions.release(), engine=engine)
    _refuse("activate2", name)


def exponential(dst: Any, src: Any, max_value: Any = 0.0, reduce_res: Any = None, reduce_cmd: Any = None,
                reduce_init: Any = 0.0, name: str | None = None) -> NoReturn:
    """Vector-engine exp(src - max_value) (NeuronCore-v4): refused on trn2."""
    _refuse("exponential", name)


def rand2(dst: Any, min: Any, max: Any, name: str | None = None) -> NoReturn:  # noqa: A002
    """Uniform random numbers on the Vector engine (NeuronCore-v4): refused on trn2."""
    _refuse("rand2", name)


__all__ = ["quantize_mx", "nc_matmul_mx", "activate2", "exponential", "rand2"]
