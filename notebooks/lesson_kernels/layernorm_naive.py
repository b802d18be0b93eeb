"""Lesson 09: the naive residual-add + LayerNorm kernel (NKI 0.6 subset, trn2).

One 128-row tile at a time: load a and the B branches, add them (fp32), store x_new, then the
textbook statistics (reduce, scale, subtract, square, reduce, rsqrt, normalize) and store z (bf16).
Every temporary is allocated inside the tile loop. `naive_loop` takes the statistics chain and the
DMA descriptor mode, so lesson 10 can change only the chain (layernorm_thinned.py) and lesson 11
only the descriptor mode (layernorm_dge.py).
"""
import nki
import nki.isa as nisa
import nki.language as nl

from lesson_kernels.layernorm_stats import N_STATS, onepass_normalize, shifted_normalize

P = 128  # rows per tile = SBUF partitions


def check_rows(rows, multiple=P):
    """The lesson kernels have no partial tiles: R must be a multiple of 128 (or LNC*128)."""
    assert rows % multiple == 0, (
        f"R={rows} is not divisible by {multiple}: the lesson kernels take whole 128-row tiles")


def add_branches(s, a_tile, b_tiles):
    """s = a + b[0] + b[1] + ... in fp32, in branch order (Vector engine)."""
    nisa.tensor_tensor(dst=s, data1=a_tile, data2=b_tiles[0], op=nl.add, name="add_b0")
    for k in range(1, len(b_tiles)):
        nisa.tensor_tensor(dst=s, data1=s, data2=b_tiles[k], op=nl.add, name=f"add_b{k}")


def naive_normalize(z, s, hidden, eps):
    """z = (s - mean) * rsqrt(var + eps) the straightforward way: two full-width reductions,
    a centred copy and its square, all on the Vector engine; rsqrt on the Scalar engine."""
    total = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, op=nl.add, data=s, axis=1, name="sum")
    mean = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=mean, data=total, op0=nl.multiply, operand0=1.0 / hidden, name="mean")
    centred = nl.ndarray((P, hidden), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=centred, data=s, op0=nl.subtract, operand0=mean, name="centre")
    squares = nl.ndarray((P, hidden), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_tensor(dst=squares, data1=centred, data2=centred, op=nl.multiply, name="square")
    sum_sq = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=sum_sq, op=nl.add, data=squares, axis=1, name="sum_squares")
    var = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=var, data=sum_sq, op0=nl.multiply, operand0=1.0 / hidden,
                       op1=nl.add, operand1=eps, name="var_eps")
    rstd = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=rstd, op=nl.rsqrt, data=var, name="rstd")
    nisa.tensor_scalar(dst=z, data=centred, op0=nl.multiply, operand0=rstd, name="normalize")


def normalize_tile(stats_kind, z, s, stats, j, hidden, eps):
    """The statistics chain of a lesson: 'naive' (lesson 09), 'onepass' or 'shifted' (lesson 10)."""
    assert stats_kind in ("naive", "onepass", "shifted"), (
        f"unknown statistics chain '{stats_kind}': use 'naive', 'onepass' or 'shifted'")
    if stats_kind == "naive":
        naive_normalize(z, s, hidden, eps)
    elif stats_kind == "onepass":
        onepass_normalize(z, s, stats, j, hidden, eps)
    else:
        shifted_normalize(z, s, stats, j, hidden, eps)


def compute_and_store(a_tile, b_tiles, s, x_new, z_out, r0, stats_kind, stats, j, eps, dge, affine=()):
    """Add, store x_new, normalize, store z for the tile of rows [r0, r0+128). With `affine` =
    (gamma, beta) as [128, H] fp32 tiles, z = normalized * gamma + beta: the two elementwise passes
    that folding gamma/beta into the consumers removes (lesson 15)."""
    hidden = s.shape[-1]
    add_branches(s, a_tile, b_tiles)
    nisa.dma_copy(dst=x_new[r0:r0 + P, :], src=s, dge_mode=dge, name="store_x")
    z = nl.ndarray((P, hidden), dtype=nl.bfloat16, buffer=nl.sbuf)
    if len(affine) == 0:
        normalize_tile(stats_kind, z, s, stats, j, hidden, eps)
    else:
        normed = nl.ndarray((P, hidden), dtype=nl.float32, buffer=nl.sbuf)
        normalize_tile(stats_kind, normed, s, stats, j, hidden, eps)
        nisa.tensor_tensor(dst=normed, data1=normed, data2=affine[0], op=nl.multiply, name="times_gamma")
        nisa.tensor_tensor(dst=z, data1=normed, data2=affine[1], op=nl.add, name="plus_beta")
    nisa.dma_copy(dst=z_out[r0:r0 + P, :], src=z, dge_mode=dge, name="store_z")


def naive_tile(a, b, x_new, z_out, r0, eps, dge, stats_kind):
    """Everything for rows [r0, r0+128), each temporary allocated here: loads, then compute_and_store."""
    hidden = a.shape[1]
    a_tile = nl.ndarray((P, hidden), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=a_tile, src=a[r0:r0 + P, :], dge_mode=dge, name="load_a")
    b_tiles = []
    for k in range(b.shape[0]):
        b_tile = nl.ndarray((P, hidden), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=b_tile, src=b[k, r0:r0 + P, :], dge_mode=dge, name=f"load_b{k}")
        b_tiles.append(b_tile)
    s = nl.ndarray((P, hidden), dtype=nl.float32, buffer=nl.sbuf)
    # One column per statistic for this tile (lesson 10's chains; lesson 09's keeps its own temporaries).
    stats = nl.ndarray((P, N_STATS, 1), dtype=nl.float32, buffer=nl.sbuf)
    compute_and_store(a_tile, b_tiles, s, x_new, z_out, r0, stats_kind, stats, 0, eps, dge)


def new_outputs(a):
    """x_new (fp32) and z (bf16), [R, H] each, in shared HBM."""
    x_new = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    z_out = nl.ndarray(a.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    return x_new, z_out


def naive_loop(a, b, eps, dge, stats_kind="naive"):
    """The naive schedule over all tiles: one statistics chain, one DMA descriptor mode for every transfer."""
    rows = a.shape[0]
    check_rows(rows)
    x_new, z_out = new_outputs(a)
    for t in range(rows // P):
        naive_tile(a, b, x_new, z_out, t * P, eps, dge, stats_kind)
    return x_new, z_out


@nki.jit
def res_layernorm_naive(a, b, eps):
    """Lesson 09: the naive chain, default DMA mode (the compiler chooses: software DGE)."""
    return naive_loop(a, b, eps, nisa.dge_mode.unknown)
