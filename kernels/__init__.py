"""The workshop's finished NKI kernels for trn2 and their PyTorch wrappers.

- Exact-erf GELU: NKI kernels `gelu_fwd`, `gelu_bwd`; autograd `gelu_erf`; `GELUErf` (drop-in for
  `nn.GELU()`); `swap_gelu(model)`.
- Residual add + affine-free LayerNorm: `res_layernorm_fold(a, b, eps)` (torch op, inference
  only; alias `residual_layernorm_fold`), NKI kernel `res_layernorm_fold_kernel`, the affine fold
  `fold_affine_into_linear` / `FoldedPreNorm`, SBUF helpers `fold_group_size`,
  `fold_sbuf_bytes_per_tile`.
- The fold's consumer on the Tensor engine: `folded_linear(z, weight, bias)` (torch op, inference
  only) = z @ weight.T + bias for a Linear folded by `fold_affine_into_linear`, NKI kernel
  `folded_linear_kernel`.
- `kernels.reference`: the PyTorch references.
- `check_setup()`: the workshop's setup check (notebooks/00_setup.ipynb); loaded on first use, as
  it runs on nkisim.

Importing this package makes `nki` importable: the real Neuron SDK when present, else the
project's CPU emulator (nkisim). `backend_info()` says which.
"""
from typing import Any

from ._backend import backend_info, ensure_nki

ensure_nki()

from . import reference  # noqa: E402
from .fold import FoldedPreNorm, fold_affine_into_linear  # noqa: E402
from .folded_linear import folded_linear, folded_linear_kernel  # noqa: E402
from .gelu import gelu_bwd, gelu_fwd  # noqa: E402
from .gelu_torch import GELUErf, gelu_erf, swap_gelu  # noqa: E402
from .limits import KernelInputError, KernelTypeError, fold_sbuf_bytes_per_tile  # noqa: E402
from .res_layernorm import (  # noqa: E402
    FOLD_SBUF_BUDGET,
    ResLayerNormFold,
    fold_group_size,
    res_layernorm_fold,
    res_layernorm_fold_kernel,
    residual_layernorm_fold,
)

__all__ = [
    "FOLD_SBUF_BUDGET",
    "FoldedPreNorm",
    "GELUErf",
    "KernelInputError",
    "KernelTypeError",
    "ResLayerNormFold",
    "backend_info",
    "fold_affine_into_linear",
    "fold_group_size",
    "fold_sbuf_bytes_per_tile",
    "folded_linear",
    "folded_linear_kernel",
    "gelu_bwd",
    "gelu_erf",
    "gelu_fwd",
    "reference",
    "res_layernorm_fold",
    "res_layernorm_fold_kernel",
    "residual_layernorm_fold",
    "swap_gelu",
    "check_setup",
]


def __getattr__(name: str) -> Any:
    """`check_setup`, imported on first use: it needs nkisim, which `import kernels` does not."""
    if name == "check_setup":
        from .setup_check import check_setup

        return check_setup
    raise AttributeError(f"module 'kernels' has no attribute '{name}'")
