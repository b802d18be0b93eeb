# %% [markdown]
# # Exercise 2: a one-tile GELU kernel
#
# **Lesson:** [02 · A NeuronCore in one page, and a first kernel](../notebooks/02_first_kernel.ipynb) · **Difficulty:** easy · **Time:** 10 min
#
# The smallest useful NKI kernel: bring one tile from HBM into SBUF, run one instruction on it,
# send it back.

# %%
import nkisim

nkisim.install()  # `import nki` is the real Neuron SDK on a trn2 instance, the emulator elsewhere
import nki
import nki.isa as nisa
import nki.language as nl

from exercises import checkers

# %% [markdown] tags=["exercise"]
# $x$ is a `[P, C]` tensor in HBM with $P \le 128$ rows, so it fits one SBUF tile (one row per
# partition). Compute $y = \operatorname{gelu}(x) = x\,\Phi(x)$ (exact erf) with three
# instructions:
#
# 1. `nisa.dma_copy` from `x` into an SBUF tile (`nl.ndarray(..., buffer=nl.sbuf)`),
# 2. one `nisa.activation` with the activation table's exact GELU, `op=nl.gelu`,
# 3. `nisa.dma_copy` from the tile into `out`.
#
# Keep `x`'s dtype. The checker runs fp32 and bf16 tiles of 128 and 5 rows and counts the
# instructions in the trace.

# %%
@nki.jit
def gelu_one_tile(x):
    rows, cols = x.shape
    out = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    ### BEGIN SOLUTION
    tile = nl.ndarray((rows, cols), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x, name="load_x")
    nisa.activation(dst=tile, op=nl.gelu, data=tile, name="gelu")
    nisa.dma_copy(dst=out, src=tile, name="store")
    ### END SOLUTION
    return out

# %% tags=["check"]
checkers.check_gelu_one_tile(gelu_one_tile)

# %% [markdown] tags=["solution-only"]
# The activation may read and write the same tile: the Scalar engine streams each partition's
# elements through its table and writes them back, so no second buffer is needed. Here is the
# instruction stream the emulator recorded, in program order:

# %% tags=["solution-only"]
import torch

result = nkisim.run(gelu_one_tile, torch.randn(128, 64))
for ins in result.trace:
    print(f"{ins.engine:6s} {ins.opcode:9s} {ins.name}")
