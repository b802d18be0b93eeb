# %% [markdown]
# # Exercise 6: the autograd Function around the kernels
#
# **Lesson:** [06 · Into PyTorch](../notebooks/06_into_pytorch.ipynb) · **Difficulty:** medium · **Time:** 15 min
#
# Wire the forward and backward kernels into `torch.autograd`, so `loss.backward()` runs
# `gelu_bwd` on the NeuronCore.

# %%
import torch

import kernels  # gelu_fwd and gelu_bwd: the finished NKI kernels, [R, C] -> [R, C]

from exercises import checkers

# %% [markdown] tags=["exercise"]
# The kernels take 2-D `[R, C]` tensors; activations are `[batch, tokens, C]`. So both directions
# flatten the leading dimensions into rows and restore them:
#
# - forward: $y = \operatorname{gelu}(x)$ via `kernels.gelu_fwd`, and save what the backward
#   needs with `ctx.save_for_backward(...)`;
# - backward: $\partial L/\partial x = \operatorname{gelu}'(x)\cdot \partial L/\partial y$ via
#   `kernels.gelu_bwd(x_2d, grad_2d)`: it needs the **pre-activation** $x$.
#
# Complete the two marked parts. The checker compares output and gradient with `F.gelu` and
# autograd for `[2, 3, 16]` and `[1, 5, 8]` fp32 and `[4, 33, 8]` bf16 inputs.

# %%
def as_rows(t: torch.Tensor) -> torch.Tensor:
    """[..., C] -> [R, C], leading dims flattened into rows."""
    return t.contiguous().reshape(-1, t.shape[-1])


class GeluErfFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        y = kernels.gelu_fwd(as_rows(x)).reshape(x.shape)
        ### BEGIN SOLUTION
        ctx.save_for_backward(x)
        ### END SOLUTION
        return y

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> torch.Tensor:
        ### BEGIN SOLUTION
        (x,) = ctx.saved_tensors
        return kernels.gelu_bwd(as_rows(x), as_rows(grad_out)).reshape(x.shape)
        ### END SOLUTION

# %% tags=["check"]
checkers.check_gelu_autograd(GeluErfFunction)

# %% [markdown] tags=["solution-only"]
# Saving $x$ rather than $y$ costs nothing extra (the input is alive anyway in most networks) and
# is required: $\operatorname{gelu}'$ is a function of $x$, and GELU is not invertible. The
# package's `kernels.gelu_erf` is this Function, with the kernels registered as torch custom ops
# so `torch.compile` sees no graph break.
