"""Inputs and checks shared by the track-2 notebooks and tests (plain PyTorch, no NKI)."""
import torch
from kernels import reference

EPS = 1e-6           # the LayerNorm eps of ViT checkpoints
Z_ATOL = 2e-2        # z is bf16: half an ulp at |z| ~ 4 is 2**-7, plus fp32 statistics


def fold_inputs(rows: int, hidden: int, branches: int, seed: int = 0,
                mean: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """a [R, H] fp32 residual (row values around `mean`) and b [B, R, H] bf16 branches."""
    g = torch.Generator().manual_seed(seed)
    a = mean + torch.randn(rows, hidden, generator=g)
    b = (0.5 * torch.randn(branches, rows, hidden, generator=g)).to(torch.bfloat16)
    return a, b


def check_fold(outputs, a: torch.Tensor, b: torch.Tensor, eps: float = EPS,
               z_atol: float = Z_ATOL) -> float:
    """Assert a kernel's (x_new, z) against kernels.reference; return max |z - z_ref|.

    x_new must be exact (fp32 adds in branch order); z within bf16 rounding of an fp64 LayerNorm.
    """
    x_new, z = outputs
    x_ref, z_ref = reference.res_layernorm_fold_reference(a, b, eps)
    assert x_new.dtype == torch.float32 and z.dtype == torch.bfloat16, (x_new.dtype, z.dtype)
    assert torch.equal(x_new, x_ref), "x_new differs from a + b[0] + ... in fp32"
    err = (z.float() - z_ref).abs().max().item()
    assert err <= z_atol, f"max |z - z_ref| = {err:.3g} > {z_atol}"
    return err


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of an fp32 or bf16 tensor (so NaNs and -0.0 compare exactly too)."""
    return t.view(torch.int16 if t.element_size() == 2 else torch.int32)


def assert_bit_identical(first, second) -> None:
    """Two kernels' (x_new, z) outputs are equal bit for bit."""
    for name, u, v in zip(("x_new", "z"), first, second):
        assert u.dtype == v.dtype and torch.equal(_bits(u), _bits(v)), f"{name} differs"
