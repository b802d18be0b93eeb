"""Lesson 10: lesson 09's tile-by-tile kernel with a thinner statistics chain (NKI 0.6 subset, trn2).

Only the chain changes (layernorm_stats.py); the loads, the add, the stores and the default DMA
descriptor mode are lesson 09's.
- `res_layernorm_thinned`: the published shifted chain: two Scalar-engine activation_reduce passes
  (a shifted sum, then the sum of squared deviations), one two-op normalize on the Vector engine.
- `res_layernorm_onepass`: the tempting thinner chain, E[s^2] - E[s]^2 straight off the data: fewer
  dependencies, but it cancels catastrophically when |mean| >> std.
"""
import nki
import nki.isa as nisa

from lesson_kernels.layernorm_naive import naive_loop


@nki.jit
def res_layernorm_thinned(a, b, eps):
    """Lesson 10: the shifted chain in lesson 09's loop, default DMA mode."""
    return naive_loop(a, b, eps, nisa.dge_mode.unknown, "shifted")


@nki.jit
def res_layernorm_onepass(a, b, eps):
    """Lesson 10, the tempting thinning: unshifted one-pass variance (ill-conditioned)."""
    return naive_loop(a, b, eps, nisa.dge_mode.unknown, "onepass")
