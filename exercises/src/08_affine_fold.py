# %% [markdown]
# # Exercise 8: fold gamma and beta into the next Linear
#
# **Lessons:** [08 · The math](../notebooks/08_layernorm_math.ipynb) and [15 · Folding gamma/beta into the consumers](../notebooks/15_folding_gamma_beta.ipynb) · **Difficulty:** easy · **Time:** 15 min
#
# The fold kernel emits the affine-free $z$. The LayerNorm's $\gamma$ and $\beta$ are not lost:
# they move, once, into the weights of the layers that read $z$.

# %%
import torch
from torch import nn

from exercises import checkers

# %% [markdown] tags=["exercise"]
# A consumer computes $y = W(z \odot \gamma + \beta) + c$ with $W$ of shape `[out, H]`. Because
# $(z\odot\gamma)$ scales input $j$ by $\gamma_j$, which is column $j$ of $W$:
#
# $$W(z\odot\gamma + \beta) + c \;=\; \underbrace{(W\,\mathrm{diag}\,\gamma)}_{W'}\,z \;+\; \underbrace{(W\beta + c)}_{c'}.$$
#
# Write `fold_affine(gamma, beta, linear)`: return a **new** `nn.Linear` (same sizes and dtype,
# with a bias even if `linear` has none) holding $W'$ and $c'$; leave `linear` unchanged. The
# checker compares `folded(z)` with `linear(z * gamma + beta)` in fp64 and fp32, with and without
# a bias, square and non-square.

# %%
def fold_affine(gamma: torch.Tensor, beta: torch.Tensor, linear: nn.Linear) -> nn.Linear:
    folded = nn.Linear(linear.in_features, linear.out_features, bias=True, dtype=linear.weight.dtype)
    ### BEGIN SOLUTION
    weight = linear.weight.detach()
    bias = linear.bias.detach() if linear.bias is not None else torch.zeros_like(folded.bias)
    with torch.no_grad():
        folded.weight.copy_(weight * gamma)          # scales column j by gamma[j]
        folded.bias.copy_(weight @ beta + bias)
    ### END SOLUTION
    return folded

# %% tags=["check"]
checkers.check_affine_fold(fold_affine)

# %% [markdown] tags=["solution-only"]
# `kernels.fold_affine_into_linear` does the same, forming the products in fp64 and rounding once;
# `kernels.FoldedPreNorm` folds every consumer when it is built, so $z$ can never meet unfolded
# weights. Lesson 15 applies it to a ViT block's QKV projection and `fc1`.
