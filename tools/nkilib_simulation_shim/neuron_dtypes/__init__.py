"""The few names of `neuron_dtypes` (an AWS package, not published) that nki-library's tests use.

`static_cast` converts with round-to-nearest-even, as ml_dtypes does; `is_float_type` answers for numpy and
ml_dtypes types. The packed MX `*_x4` types (trn3 only) resolve to uint32 so the test modules import; nkisim
refuses the kernels that use them.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

bfloat16 = ml_dtypes.bfloat16


def _dtype(dtype: Any) -> np.dtype:
    if isinstance(dtype, str) and hasattr(ml_dtypes, dtype):
        return np.dtype(getattr(ml_dtypes, dtype))
    return np.dtype(dtype)


def is_float_type(dtype: Any) -> bool:
    dt = _dtype(dtype)
    return np.issubdtype(dt, np.floating) or "float" in dt.name


def static_cast(values: Any, dtype: Any) -> np.ndarray:
    return np.asarray(values).astype(_dtype(dtype))


def __getattr__(name: str) -> Any:
    if name.endswith("_x4"):
        return np.uint32
    if hasattr(ml_dtypes, name):
        return getattr(ml_dtypes, name)
    raise AttributeError(f"neuron_dtypes stand-in has no {name!r}")
