# %% [markdown]
# # Exercise 7: split the rows across both cores (LNC=2)
#
# **Lesson:** [07 · Tuning at the DMA wall](../notebooks/07_dma_wall.ipynb) · **Difficulty:** hard · **Time:** 20 min
#
# One core's DMA queues are the ceiling of the GELU kernel. A logical NeuronCore on trn2 has two
# physical cores: give each half of the rows.

# %%
import nkisim

nkisim.install()
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# Launched as `kernel[2](x)` (here `nkisim.run(kernel, x, lnc=2)`), the same kernel body runs on
# both physical cores; `nl.program_id(0)` is 0 or 1 and `nl.num_programs(0)` is 2 (1 at LNC=1).
# Program $p$ of $n$ should own the consecutive rows
#
# $$[\,p\,h,\ \min((p+1)\,h,\ R)\,),\qquad h = \lceil R / n \rceil,$$
#
# and tile them as in exercise 4 (its last tile may be partial). Write `first_row` and
# `last_row` (exclusive). The checker runs LNC=1 and LNC=2 with `R` = 300, 256 and 1, and reads
# the trace: every output row must be stored exactly once, by one program.

# %%
@nki.jit
def gelu_lnc(x):
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    ### BEGIN SOLUTION
    per_program = -(-rows_total // nl.num_programs(0))  # ceil(R / n)
    first_row = nl.program_id(0) * per_program
    last_row = min(first_row + per_program, rows_total)
    ### END SOLUTION
    for r0 in range(first_row, last_row, pmax):
        rows = min(pmax, last_row - r0)
        tile = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[0:rows], src=x[r0:r0 + rows], name="load_x")
        nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows], name="gelu")
        nisa.dma_copy(dst=out[r0:r0 + rows], src=tile[0:rows], name="store")
    return out

# %% tags=["check"]
checkers.check_gelu_lnc2(gelu_lnc)

# %% [markdown] tags=["solution-only"]
# Both cores now issue their own DMAs. How much that buys at the published shape is a model
# question here: the trn2 cost model (estimate) below, which must be checked on hardware
# (lesson 7 shows how).

# %% tags=["solution-only"]
import torch

x = torch.randn(3216, 4096, dtype=torch.bfloat16)
one = nkisim.profile(gelu_lnc, x, lnc=1)
two = nkisim.profile(gelu_lnc, x, lnc=2)
print(f"{one.source}, [3216, 4096] bf16: LNC=1 {one.total_time_us:.1f} us, "
      f"LNC=2 {two.total_time_us:.1f} us")
