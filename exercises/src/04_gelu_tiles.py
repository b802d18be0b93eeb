# %% [markdown]
# # Exercise 4: tile the rows, including the partial last tile
#
# **Lesson:** [04 · One activation-table instruction per tile](../notebooks/04_one_activation_per_tile.ipynb) · **Difficulty:** medium · **Time:** 15 min
#
# Real activations have thousands of rows; SBUF has 128 partitions. Loop over 128-row tiles,
# and get the last one right when $R$ is not a multiple of 128.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# $x$ is `[R, C]` in HBM with any $R \ge 1$. Tile $t$ covers rows $[128t,\ \min(128(t+1), R))$,
# so there are $\lceil R/128 \rceil$ tiles and the last one has $R - 128(\lceil R/128\rceil - 1)$
# rows (at the published shape `[3216, 4096]`: 25 full tiles and one of 16 rows).
#
# Write the loop: for each tile, load its rows into partitions `0:rows` of an SBUF tile, apply
# `nl.gelu` with **one** `nisa.activation` on those partitions, store them back. Loop with
# Python's `range(start, stop, step)`: NKI 0.7 unrolls a Python loop when it traces the kernel
# (its NKI Loops page deprecates `nl.static_range` and makes it plain `range`). The checker runs
# `R` = 300, 128 and 1 in fp32 and `R` = 200 in bf16, and checks the trace for exactly one
# ACTIVATE per tile.

# %%
@nki.jit
def gelu_tiled(x):
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    ### BEGIN SOLUTION
    for r0 in range(0, rows_total, pmax):
        rows = min(pmax, rows_total - r0)  # 128, except in the partial last tile
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows], name="load_x")
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows], src=tile[0:rows], name="store")
    ### END SOLUTION
    return out

# %% tags=["check"]
checkers.check_gelu_tiles(gelu_tiled)

# %% [markdown] tags=["solution-only"]
# Only the valid partitions `0:rows` are touched in the last tile: reading the other partitions
# would read never-written SBUF (NaN in the emulator, garbage on hardware), and storing them would
# write past the end of `out`. `kernels.gelu_fwd` is this loop, plus a split of very wide `C`
# into 16K-column pieces.
