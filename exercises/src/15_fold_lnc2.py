# %% [markdown]
# # Exercise 15: the LNC=2 row split of the fold kernel
#
# **Lesson:** [14 · LNC=2](../notebooks/14_lnc2.ipynb) · **Difficulty:** medium · **Time:** 15 min
#
# Run the kernel on both physical cores of a logical NeuronCore, each owning half of the tokens.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# With $n$ = `nl.num_programs(0)` programs (1 or 2), program $p$ = `nl.program_id(0)` owns rows
#
# $$[\,p\,R/n,\ (p+1)\,R/n\,),$$
#
# in whole 128-row tiles, so the kernel requires $R \bmod (n\cdot 128) = 0$. Write the part that
# checks this (an `assert` whose message names $R$ and the limit $n \cdot 128$: kernel code
# validates with `assert`, as in the NKI Language Guide) and
# computes `rows_per_program` and `first_row`. The rest of the kernel (the residual add of the fold
# kernel; the statistics per tile would follow unchanged) is written. The checker runs LNC=1 and
# LNC=2 with B=1 and B=4, reads which program stored which rows, and tries $R = 384$ at LNC=2.

# %%
@nki.jit
def residual_add_lnc(a, b):
    rows_total, hidden = a.shape
    pmax = nl.tile_size.pmax
    none = nisa.dge_mode.none
    x_new = nl.ndarray((rows_total, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    ### BEGIN SOLUTION
    n_programs = nl.num_programs(0)
    assert rows_total % (n_programs * pmax) == 0, (
        f"R={rows_total} is not divisible by LNC*128 = {n_programs * pmax}")
    rows_per_program = rows_total // n_programs
    first_row = nl.program_id(0) * rows_per_program
    ### END SOLUTION
    for t in range(rows_per_program // pmax):
        r0 = first_row + t * pmax
        s = nl.ndarray((pmax, hidden), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=s, src=a[r0:r0 + pmax, :], dge_mode=none, name="load_a")
        for k in range(b.shape[0]):
            b_tile = nl.ndarray((pmax, hidden), dtype=nl.bfloat16, buffer=nl.sbuf)
            nisa.dma_copy(dst=b_tile, src=b[k, r0:r0 + pmax, :], dge_mode=none, name=f"load_b{k}")
            nisa.tensor_tensor(dst=s, data1=s, data2=b_tile, op=nl.add, name=f"add_b{k}")
        nisa.dma_copy(dst=x_new[r0:r0 + pmax, :], src=s, dge_mode=none, name="store_x")
    return x_new

# %% tags=["check"]
checkers.check_fold_lnc2(residual_add_lnc)

# %% [markdown] tags=["solution-only"]
# Each core runs half the tiles with its own DMA queues and SBUF; both share one HBM stack. On the
# trn2 cost model (estimate):

# %% tags=["solution-only"]
import torch

a = torch.randn(2048, 768)
b = torch.randn(2, 2048, 768, dtype=torch.bfloat16)
for lnc in (1, 2):
    summary = nkisim.profile(residual_add_lnc, a, b, lnc=lnc)
    print(f"{summary.source}: LNC={lnc} total {summary.total_time_us:.1f} us")
