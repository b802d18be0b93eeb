# %% [markdown]
# # Exercise 1: exact GELU and its derivative in PyTorch
#
# **Lesson:** [01 · The function](../notebooks/01_gelu_math.ipynb) · **Difficulty:** easy · **Time:** 10 min
#
# Every kernel in this workshop is checked against a PyTorch reference. Here you write that
# reference yourself, from the definition, so you know exactly what the kernels must compute.

# %%
import math

import torch

from exercises import checkers

# %% [markdown] tags=["exercise"]
# The exact GELU is $x$ times the standard normal CDF $\Phi$:
#
# $$\operatorname{gelu}(x) = x\,\Phi(x) = \tfrac{1}{2}\,x\left(1 + \operatorname{erf}\!\left(\tfrac{x}{\sqrt{2}}\right)\right),
# \qquad \operatorname{gelu}'(x) = \Phi(x) + x\,\varphi(x),\quad \varphi(x) = \tfrac{1}{\sqrt{2\pi}}e^{-x^2/2}.$$
#
# Write `gelu_exact(x)` and `gelu_exact_grad(x)` with `torch.erf` and `torch.exp` (not
# `torch.nn.functional.gelu`, not autograd). Both take any shape and keep the input's dtype.
# The checker compares them, in fp64 and fp32, with `F.gelu` and its autograd derivative.

# %%
def gelu_exact(x: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))
    ### END SOLUTION


def gelu_exact_grad(x: torch.Tensor) -> torch.Tensor:
    ### BEGIN SOLUTION
    cdf = 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))
    pdf = torch.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return cdf + x * pdf
    ### END SOLUTION

# %% tags=["check"]
checkers.check_gelu_reference(gelu_exact, gelu_exact_grad)

# %% [markdown] tags=["solution-only"]
# The tanh form $\tfrac12 x\,(1+\tanh(\sqrt{2/\pi}\,(x+0.044715x^3)))$ differs from this by up to
# about $5\times10^{-4}$ in fp32: small, but a different function, and the checker rejects it.
# The derivative's second term $x\varphi(x)$ is what makes $\operatorname{gelu}'$ exceed 1 near
# $x \approx 1.5$; dropping it is the most common slip.
