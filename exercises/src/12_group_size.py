# %% [markdown]
# # Exercise 12: the group size G from the SBUF budget
#
# **Lesson:** [13 · SBUF budget and grouping](../notebooks/13_sbuf_grouping.ipynb) · **Difficulty:** easy · **Time:** 10 min
#
# Staging every tile at once stops fitting SBUF at large batch. Process the tiles in groups of
# $G$, all loads first inside each group.

# %%
from exercises import checkers

from kernels import FOLD_SBUF_BUDGET as BUDGET  # bytes per partition for the tile slots: 200 KiB, the largest that compiled

# %% [markdown] tags=["exercise"]
# One tile's slots take $H\,(8 + 2B)$ bytes per partition (fp32 `a`, $B$ bf16 branches, the fp32
# sum). With $n_t$ tiles per core:
#
# $$G = \max\!\left(1,\ \min\!\left(n_t,\ \left\lfloor \frac{\text{budget}}{H(8+2B)} \right\rfloor\right)\right),
# \qquad n_{\text{groups}} = \lceil n_t / G \rceil .$$
#
# Write `group_size(n_tiles, hidden, branches, budget)` and `groups(n_tiles, group)`, the list
# of `range`s of tile indices per group, in order (the last group may be shorter). The checker
# compares with `kernels.fold_group_size` over the ViT widths (384 to 1664), B = 1..4, 1 to 128
# tiles, and the extremes (H = 16384, 1000 tiles).

# %%
def group_size(n_tiles: int, hidden: int, branches: int, budget: int = BUDGET) -> int:
    ### BEGIN SOLUTION
    per_tile = hidden * (8 + 2 * branches)
    return max(1, min(n_tiles, budget // per_tile))
    ### END SOLUTION


def groups(n_tiles: int, group: int) -> list[range]:
    ### BEGIN SOLUTION
    return [range(g0, min(g0 + group, n_tiles)) for g0 in range(0, n_tiles, group)]
    ### END SOLUTION

# %% tags=["check"]
checkers.check_group_size(group_size, groups)

# %% [markdown] tags=["solution-only"]
# ViT-L ($H = 1024$) with one branch: $10240$ B per tile, so $G = 20$ tiles, about 2.5k rows per
# core before grouping starts; ViT-S ($H = 384$, $B = 1$) fits 53 tiles. Up to v1.6 of the
# published kernel, shapes beyond that failed to compile; grouping keeps the per-tile
# instructions identical, so results stay bit-identical.

# %% tags=["solution-only"]
for hidden in (384, 768, 1024, 1280, 1664):
    print(f"H={hidden:5d}: G = {group_size(10_000, hidden, 1):3d} tiles "
          f"= {128 * group_size(10_000, hidden, 1):5d} rows per group (B=1)")
