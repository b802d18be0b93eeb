# %% [markdown]
# # Exercise 11: all loads first, one SBUF slot per tile
#
# **Lesson:** [12 · All loads first](../notebooks/12_all_loads_first.ipynb) · **Difficulty:** medium · **Time:** 20 min
#
# Issue every load before any compute, so no load of tile $t+1$ waits behind tile $t$'s stores.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# Same residual add as exercise 10 ($x_{\text{new}} = a + \sum_k b_k$, every DMA
# `dge_mode.none`), scheduled differently. With $n_t = R/128$ tiles:
#
# 1. give every tile its own slot: `a_slots` of shape `[128, n_t, H]` (fp32) and one
#    `[128, n_t, H]` bf16 buffer per branch; tile $t$ lives in `a_slots[:, t, :]`;
# 2. first loop: for every tile, one DMA for `a` and one per branch into its slot (one DMA per
#    tile and operand: a single whole-tensor DMA would only signal completion at its very end);
# 3. second loop: for every tile, the adds into an fp32 `s` and the store.
#
# The checker compares with PyTorch for B=1 and B=4 and reads the trace: every load before the
# first add, and $n_t(1+B)$ loads.

# %%
@nki.jit
def residual_add_loads_first(a, b):
    rows_total, hidden = a.shape
    branches = b.shape[0]
    pmax = nl.tile_size.pmax
    n_tiles = rows_total // pmax
    none = nisa.dge_mode.none
    x_new = nl.ndarray((rows_total, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    ### BEGIN SOLUTION
    a_slots = nl.ndarray((pmax, n_tiles, hidden), dtype=nl.float32, buffer=nl.sbuf)
    b_slots = []
    for _ in range(branches):
        b_slots.append(nl.ndarray((pmax, n_tiles, hidden), dtype=nl.bfloat16, buffer=nl.sbuf))
    for t in range(n_tiles):  # every load first, each tile into its own slot
        r0 = t * pmax
        nisa.dma_copy(dst=a_slots[:, t, :], src=a[r0:r0 + pmax, :], dge_mode=none, name="load_a")
        for k in range(branches):
            nisa.dma_copy(dst=b_slots[k][:, t, :], src=b[k, r0:r0 + pmax, :], dge_mode=none, name=f"load_b{k}")
    for t in range(n_tiles):  # then adds and stores, in tile order
        r0 = t * pmax
        s = nl.ndarray((pmax, hidden), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=s, data1=a_slots[:, t, :], data2=b_slots[0][:, t, :], op=nl.add, name="add_b0")
        for k in range(1, branches):
            nisa.tensor_tensor(dst=s, data1=s, data2=b_slots[k][:, t, :], op=nl.add, name=f"add_b{k}")
        nisa.dma_copy(dst=x_new[r0:r0 + pmax, :], src=s, dge_mode=none, name="store_x")
    ### END SOLUTION
    return x_new

# %% tags=["check"]
checkers.check_loads_first(residual_add_loads_first)

# %% [markdown] tags=["solution-only"]
# The instructions per tile are the same as before, in the same order, so the output is
# bit-identical to the one-tile-at-a-time schedule; only when each instruction may start changes.
# The price is SBUF: every slot is live at once, $H(4 + 2B)$ bytes per tile and partition here
# (the fold kernel adds the fp32 sum slot: $H(8+2B)$). Exercise 12 sizes groups of tiles to fit.
