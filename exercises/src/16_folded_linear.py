# %% [markdown]
# # Exercise 16: the folded consumer's accumulation group
#
# **Lesson:** [16 · Where z goes](../notebooks/16_folded_linear.ipynb) · **Difficulty:** medium · **Time:** 15 min
#
# Compute one output tile of `y = z @ weight.T + bias` on the Tensor engine: accumulate the
# contraction in PSUM and add the folded bias on the way out.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# The kernel below loads, for each N tile of at most 128 output features and each row tile of at
# most 128 rows, `w_t` = weight.T [H, N tile] and `z_t` = z.T [H, rows] as `k_tiles` tiles of at
# most 128 partitions (the last one partial when $H \bmod 128 \ne 0$), and the folded bias
# $W\beta + c$ as one fp32 value per partition, `b_col`. Write the part that
#
# 1. computes the y.T tile `acc[0:nn, 0:rr]` in PSUM with one `nisa.nc_matmul` per K tile
#    (`stationary` = the weight tile, `moving` = the z tile, each with its `kk` partitions), the
#    first one overwriting the PSUM tile and the others accumulating onto it;
# 2. evacuates it to `y_t[0:nn, 0:rr]` (bf16, SBUF) with one `nisa.activation` (`op=nl.copy`) that
#    adds `b_col[0:nn, :]` as its `bias`.
#
# The checker runs shapes with partial row, N and K tiles against `z @ weight.T + bias` in fp32 and
# reads the trace (matmul contraction sizes, one evacuation per output tile).

# %%
@nki.jit
def folded_consumer(z, weight, bias):
    rows, hidden = z.shape
    n_out = weight.shape[0]
    pmax = nl.tile_size.pmax
    k_tiles = (hidden + pmax - 1) // pmax
    none = nisa.dge_mode.none         # dma_copy: descriptors prebuilt before the kernel runs
    transpose = nisa.dge_mode.unknown  # a direct dma_transpose takes only unknown or hwdge (its API page)
    y = nl.ndarray((rows, n_out), dtype=nl.bfloat16, buffer=nl.shared_hbm)
    for n0 in range(0, n_out, pmax):
        nn = min(pmax, n_out - n0)
        b_col = nl.ndarray((pmax, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_col[0:nn, :], src=bias[n0:n0 + nn, :], dge_mode=none, name="load_bias")
        w_t = nl.ndarray((pmax, k_tiles, pmax), dtype=nl.bfloat16, buffer=nl.sbuf)
        for kt in range(k_tiles):
            k0 = kt * pmax
            kk = min(pmax, hidden - k0)
            nisa.dma_transpose(dst=w_t[0:kk, kt, 0:nn], src=weight[n0:n0 + nn, k0:k0 + kk], dge_mode=transpose,
                               name="load_w")
        for r0 in range(0, rows, pmax):
            rr = min(pmax, rows - r0)
            z_t = nl.ndarray((pmax, k_tiles, pmax), dtype=nl.bfloat16, buffer=nl.sbuf)
            for kt in range(k_tiles):
                k0 = kt * pmax
                kk = min(pmax, hidden - k0)
                nisa.dma_transpose(dst=z_t[0:kk, kt, 0:rr], src=z[r0:r0 + rr, k0:k0 + kk], dge_mode=transpose,
                                   name="load_z")
            acc = nl.ndarray((pmax, pmax), dtype=nl.float32, buffer=nl.psum)
            y_t = nl.ndarray((pmax, pmax), dtype=nl.bfloat16, buffer=nl.sbuf)
            ### BEGIN SOLUTION
            for kt in range(k_tiles):
                kk = min(pmax, hidden - kt * pmax)
                nisa.nc_matmul(dst=acc[0:nn, 0:rr], stationary=w_t[0:kk, kt, 0:nn], moving=z_t[0:kk, kt, 0:rr],
                               accumulate=kt > 0, name="matmul")
            nisa.activation(dst=y_t[0:nn, 0:rr], op=nl.copy, data=acc[0:nn, 0:rr], bias=b_col[0:nn, :],
                            name="evacuate_bias")
            ### END SOLUTION
            out = nl.ndarray((pmax, pmax), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_transpose(dst=out[0:rr, 0:nn], src=y_t[0:nn, 0:rr], dge_mode=transpose,
                               name="transpose_y")
            nisa.dma_copy(dst=y[r0:r0 + rr, n0:n0 + nn], src=out[0:rr, 0:nn], dge_mode=none, name="store_y")
    return y

# %% tags=["check"]
checkers.check_folded_linear(folded_consumer)

# %% [markdown] tags=["solution-only"]
# PSUM adds in fp32 next to the Tensor engine, so the K tiles never leave it; the Scalar engine
# reads each finished tile once and adds the bias while converting to bf16. The finished
# `kernels.folded_linear` does the same per tile, with the weights kept in SBUF across 512-row
# blocks. On the trn2 cost model (estimate):

# %% tags=["solution-only"]
import torch

z = torch.randn(256, 384, dtype=torch.bfloat16)
weight = torch.randn(384, 384, dtype=torch.bfloat16)
bias = torch.randn(384, 1)
summary = nkisim.profile(folded_consumer, z, weight, bias)
print(f"{summary.source}: total {summary.total_time_us:.1f} us, "
      f"Tensor busy {summary.engine_active_time_percent['Tensor']:.1f}%, bound by {summary.bound_by}")
