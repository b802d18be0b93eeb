# %% [markdown]
# # Exercise 5: the backward kernel, gelu_dx and one multiply
#
# **Lesson:** [05 · Backward](../notebooks/05_backward.ipynb) · **Difficulty:** medium · **Time:** 15 min
#
# The backward of $y = \operatorname{gelu}(x)$ takes the saved pre-activation $x$ and the incoming
# gradient, and needs two instructions per tile.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# $$\frac{\partial L}{\partial x} = \operatorname{gelu}'(x)\cdot\frac{\partial L}{\partial y},\qquad
# \operatorname{gelu}'(x) = \Phi(x) + x\,\varphi(x).$$
#
# The loads and stores are written. Fill in the compute for one tile: `gelu'(x)` with one
# Scalar-engine `nisa.activation` (`op=nl.gelu_dx`), then one Vector-engine
# `nisa.tensor_tensor` multiply by the gradient tile, leaving the result in `x_tile` (it is what
# gets stored). Only partitions `0:rows` are valid. The checker compares with autograd of
# `F.gelu` (fp32 and bf16, a partial last tile) and checks one ACTIVATE and one TENSOR_TENSOR per
# tile.

# %%
@nki.jit
def gelu_backward(x, grad_out):
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    for r0 in range(0, rows_total, pmax):
        rows = min(pmax, rows_total - r0)
        x_tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        g_tile = nl.ndarray((pmax, cols), dtype=grad_out.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x_tile[0:rows], src=x[r0:r0 + rows], name="load_x")
        nisa.dma_copy(dst=g_tile[0:rows], src=grad_out[r0:r0 + rows], name="load_grad")
        ### BEGIN SOLUTION
        nisa.activation(dst=x_tile[0:rows], op=nl.gelu_dx, data=x_tile[0:rows], name="gelu_dx")
        nisa.tensor_tensor(dst=x_tile[0:rows], data1=x_tile[0:rows], data2=g_tile[0:rows], op=nl.multiply,
                           name="mul_grad")
        ### END SOLUTION
        nisa.dma_copy(dst=out[r0:r0 + rows], src=x_tile[0:rows], name="store")
    return out

# %% tags=["check"]
checkers.check_gelu_bwd(gelu_backward)

# %% [markdown] tags=["solution-only"]
# The activation overwrites `x_tile` with $\operatorname{gelu}'(x)$ and the multiply overwrites it
# again with the product, so two SBUF tiles per 128 rows suffice. The multiply runs on the Vector
# engine while the Scalar engine starts the next tile: in the published trn2 profile the Vector
# work (59.6 µs) hides entirely under the DMA time.
