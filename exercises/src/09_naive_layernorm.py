# %% [markdown]
# # Exercise 9: the naive LayerNorm statistics of one tile
#
# **Lesson:** [09 · Naive](../notebooks/09_naive_layernorm.ipynb) · **Difficulty:** medium · **Time:** 25 min
#
# The straightforward way first: reductions, subtract, square, reduce, rsqrt, normalize.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# Per row of $s = a + b_0 + \dots + b_{B-1}$ (fp32, width $H$):
#
# $$\mu = \frac1H\sum_j s_j,\qquad \sigma^2 = \frac1H\sum_j (s_j-\mu)^2,\qquad
# z_j = \frac{s_j - \mu}{\sqrt{\sigma^2 + \varepsilon}}.$$
#
# The kernel below loads each 128-row tile, adds the branches into `s` and stores `x_new`. Write
# the statistics and `z` (a bf16 tile) with `nisa.tensor_reduce` (`op=nl.add, axis=1`),
# `nisa.tensor_scalar` (a `[128, 1]` fp32 tile can be an operand: it is broadcast along the row),
# `nisa.tensor_tensor` and `nisa.activation(op=nl.rsqrt)`. Note $\sigma^2$ divides by $H$
# (PyTorch's LayerNorm), and do not forget $\varepsilon$. The checker runs B=1 and B=4, including
# a row whose values are all equal.

# %%
@nki.jit
def layernorm_naive(a, b, eps):
    rows_total, hidden = a.shape
    pmax = nl.tile_size.pmax
    x_new = nl.ndarray((rows_total, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    z_out = nl.ndarray((rows_total, hidden), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for r0 in range(0, rows_total, pmax):
        s = nl.ndarray((pmax, hidden), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a[r0:r0 + pmax, :], name="load_a")
        for k in range(b.shape[0]):
            b_tile = nl.ndarray((pmax, hidden), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=b_tile, src=b[k, r0:r0 + pmax, :], name=f"load_b{k}")
            nisa.tensor_tensor(dst=s, data1=s, data2=b_tile, op=nl.add, name=f"add_b{k}")
        nisa.dma_copy(dst=x_new[r0:r0 + pmax, :], src=s, name="store_x")
        z = nl.ndarray((pmax, hidden), dtype=nl.bfloat16, buffer=nl.sbuf)
        ### BEGIN SOLUTION
        mean = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=mean, op=nl.add, data=s, axis=1, name="sum")
        nisa.tensor_scalar(dst=mean, data=mean, op0=nl.multiply, operand0=1.0 / hidden, name="mean")
        centred = nl.ndarray((pmax, hidden), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=centred, data=s, op0=nl.subtract, operand0=mean, name="centre")
        squares = nl.ndarray((pmax, hidden), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=squares, data1=centred, data2=centred, op=nl.multiply, name="square")
        var = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=var, op=nl.add, data=squares, axis=1, name="sum_squares")
        nisa.tensor_scalar(dst=var, data=var, op0=nl.multiply, operand0=1.0 / hidden, op1=nl.add, operand1=eps,
                           name="var_eps")
        rstd = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=var, name="rstd")
        nisa.tensor_scalar(dst=z, data=centred, op0=nl.multiply, operand0=rstd, name="normalize")
        ### END SOLUTION
        nisa.dma_copy(dst=z_out[r0:r0 + pmax, :], src=z, name="store_z")
    return x_new, z_out

# %% tags=["check"]
checkers.check_naive_layernorm(layernorm_naive)

# %% [markdown] tags=["solution-only"]
# Four of these instructions read or write the whole `[128, H]` tile (two reductions, the
# centring, the square); lesson 10 thins the chain to two full-width passes on the Scalar engine.
# A row of equal values has $\sigma^2 = 0$: without $\varepsilon$, `rsqrt(0)` is infinite and
# $z = 0\cdot\infty$ is NaN.
