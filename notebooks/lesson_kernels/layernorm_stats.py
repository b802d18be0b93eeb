"""Lesson 10: statistics chains that keep one column per statistic and tile (NKI 0.6 subset, trn2).

`stats` is a [128, 6, n] fp32 buffer: statistic k of tile j lives in column stats[:, k, j], so
tile j+1's chain never waits on tile j's (no shared scratch). The tile-by-tile loop of lesson 09
allocates one per tile (n = 1); the loads-first schedule of lessons 12-13 one per group of tiles.

- `onepass_normalize`: the tempting thinning, sum and sum of squares straight off the data,
  var = E[s^2] - E[s]^2. Few instructions, but it cancels catastrophically when |mean| >> std.
- `shifted_normalize`: the published chain; the first sum is taken of (s - shift) with the row's
  first element as the shift, the second of (s - mean)^2, so both stay well conditioned.
Both use the Scalar engine's activation_reduce (elementwise op + free-axis sum in one pass) and one
two-op tensor_scalar to normalize, with the bf16 cast riding the write.
"""
import nki.isa as nisa
import nki.language as nl

N_STATS = 6


def column(stats, k, j):
    """Statistic k of tile j: a [128, 1] fp32 view."""
    return stats[:, k, j:j + 1]


def onepass_normalize(z, s, stats, j, hidden, eps):
    """var = E[s^2] - E[s]^2 in fp32 (unshifted)."""
    acc = column(stats, 0, j)
    neg_mu = column(stats, 1, j)
    acc2 = column(stats, 2, j)
    mean_sq = column(stats, 3, j)
    var = column(stats, 4, j)
    rstd = column(stats, 5, j)
    nisa.activation_reduce(dst=z, op=nl.copy, data=s, reduce_op=nl.add, reduce_res=acc, name="sum")
    nisa.tensor_scalar(dst=neg_mu, data=acc, op0=nl.multiply, operand0=-1.0 / hidden,
                       name="neg_mean")
    nisa.activation_reduce(dst=z, op=nl.square, data=s, reduce_op=nl.add, reduce_res=acc2,
                           name="sum_squares")
    nisa.tensor_tensor(dst=mean_sq, data1=neg_mu, data2=neg_mu, op=nl.multiply, name="mean_sq")
    nisa.tensor_scalar(dst=var, data=acc2, op0=nl.multiply, operand0=1.0 / hidden,
                       op1=nl.add, operand1=eps, name="e_sq_eps")
    nisa.tensor_tensor(dst=var, data1=var, data2=mean_sq, op=nl.subtract, name="var_eps")
    nisa.activation(dst=rstd, op=nl.rsqrt, data=var, name="rstd")
    nisa.tensor_scalar(dst=z, data=s, op0=nl.add, operand0=neg_mu, op1=nl.multiply, operand1=rstd,
                       name="normalize")


def shifted_normalize(z, s, stats, j, hidden, eps):
    """The thinned chain: 4 Vector + 3 Scalar instructions, 3 of them full width."""
    neg_shift = column(stats, 0, j)
    acc = column(stats, 1, j)
    neg_mu = column(stats, 2, j)
    acc2 = column(stats, 3, j)
    var = column(stats, 4, j)
    rstd = column(stats, 5, j)
    nisa.tensor_scalar(dst=neg_shift, data=s[:, 0:1], op0=nl.multiply, operand0=-1.0,
                       name="neg_shift")
    # The elementwise results of both reductions go to z's tile; the normalize overwrites them.
    nisa.activation_reduce(dst=z, op=nl.copy, data=s, reduce_op=nl.add, reduce_res=acc,
                           bias=neg_shift, name="sum_shifted")
    nisa.tensor_scalar(dst=neg_mu, data=acc, op0=nl.multiply, operand0=-1.0 / hidden,
                       op1=nl.add, operand1=neg_shift, name="neg_mean")
    nisa.activation_reduce(dst=z, op=nl.square, data=s, reduce_op=nl.add, reduce_res=acc2,
                           bias=neg_mu, name="sum_squares")
    nisa.tensor_scalar(dst=var, data=acc2, op0=nl.multiply, operand0=1.0 / hidden,
                       op1=nl.add, operand1=eps, name="var_eps")
    nisa.activation(dst=rstd, op=nl.rsqrt, data=var, name="rstd")
    nisa.tensor_scalar(dst=z, data=s, op0=nl.add, operand0=neg_mu, op1=nl.multiply, operand1=rstd,
                       name="normalize")
