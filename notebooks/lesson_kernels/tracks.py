"""The workshop's two tracks as data (nkisim.profile.steps): every lesson step's kernel, the metric it
moves, that metric before and after, and the bound engine before and after. Each lesson ends with its
track's table up to itself (`show_track`); `benchmarks/track_table.py --json` prints both tracks whole and
tests/lessons/test_track_table.py checks that every step moves its metric by at least 3% or is
declared, in its lesson's first paragraph, as the kind of step it is.

Every time is a trn2 cost model estimate of a dry-run trace; the SBUF step's number is what the
emulator lets compile. Shapes are the lessons' own: the published [3216, 4096] bf16 for the GELU
track, [1024, 768] fp32 plus two bf16 branches for the fold track, [512, 384] -> 1152 for its consumer.
"""
from __future__ import annotations

import warnings

import torch

import kernels
import nkisim
from nkisim.profile.steps import (BASELINE, EFFECTIVE_DMA, ENABLING, NO_CHANGE_BY_DESIGN, SOURCE_EMULATOR, Metric,
                                  Setup, Step, StepResult, Track, launch, measure_track, track_text)
from nkisim.profile.steps import show_track as draw_track

from .folded_linear_steps import linear_naive, linear_psum_accumulate, linear_weights_stationary
from .gelu_naive import gelu_naive_erf
from .gelu_one_tile import gelu_one_tile
from .gelu_tuning import (gelu_fwd_double_buffered, gelu_fwd_hwdge, gelu_fwd_two_queues, gelu_fwd_unrolled,
                          gelu_fwd_wide)
from .layernorm_affine import res_layernorm_affine
from .layernorm_check import EPS, fold_inputs
from .layernorm_dge import res_layernorm_dge_none
from .layernorm_grouped import res_layernorm_grouped
from .layernorm_loads_first import res_layernorm_loads_first
from .layernorm_naive import P, res_layernorm_naive
from .layernorm_thinned import res_layernorm_thinned
from .layernorm_timeline import descriptor_time_us

BUDGET = kernels.FOLD_SBUF_BUDGET


# ---- Track 1: exact-erf GELU ---------------------------------------------------------------------
def gelu_track() -> Track:
    bf16 = torch.bfloat16
    x = torch.empty(3216, 4096, dtype=bf16)
    shape = "[3216, 4096] bf16"
    tile_512 = launch("gelu_one_tile [128, 512] bf16", gelu_one_tile, torch.empty(128, 512, dtype=bf16))
    tile_8k = launch("gelu_one_tile [128, 8192] bf16", gelu_one_tile, torch.empty(128, 8192, dtype=bf16))
    naive = launch(f"gelu_naive_erf {shape}", gelu_naive_erf, x)
    fwd = launch(f"gelu_fwd {shape}, LNC=1", kernels.gelu_fwd, x)
    steps = (
        Step(2, "one tile: load, nl.gelu, store", "gelu_one_tile", tile_512, metric=EFFECTIVE_DMA, kind=BASELINE),
        Step(2, "a wider tile: [128, 512] -> [128, 8192]", "gelu_one_tile", tile_8k, tile_512, EFFECTIVE_DMA),
        Step(3, "any R in 128-row tiles; erf from arithmetic", "gelu_naive_erf", naive, kind=ENABLING,
             enables="any number of rows (lesson 02's kernel takes one tile of at most 128)"),
        Step(4, "one nl.gelu activation per tile", "gelu_fwd", fwd, naive),
        Step(5, "backward: nl.gelu_dx and one multiply", "gelu_bwd",
             launch(f"gelu_bwd {shape}, LNC=1", kernels.gelu_bwd, x, x), kind=ENABLING,
             enables="the backward pass dx = GELU'(x) * grad_out that autograd needs"),
        Step(6, "autograd.Function, nn.Module, torch.compile", "gelu_erf / GELUErf", None, metric=None,
             kind=ENABLING, enables="GELUErf, a drop-in nn.GELU that trains (one graph, no breaks)"),
        *(Step(7, change, kernel.__name__, launch(f"{kernel.__name__} {shape}", kernel, x, **kwargs), fwd,
               kind=NO_CHANGE_BY_DESIGN)
          for change, kernel, kwargs in (("double buffering (2 SBUF slots)", gelu_fwd_double_buffered, {"slots": 2}),
                                         ("static unrolling", gelu_fwd_unrolled, {}),
                                         ("wider free dimension (2 rows per partition)", gelu_fwd_wide, {}),
                                         ("dge_mode=hwdge", gelu_fwd_hwdge, {}))),
        Step(7, "loads, stores on two DMA queues (prediction)", "gelu_fwd_two_queues",
             launch(f"gelu_fwd_two_queues {shape}", gelu_fwd_two_queues, x), fwd),
        Step(7, "LNC=2: rows split over both physical cores", "gelu_fwd[2]",
             launch(f"gelu_fwd {shape}, LNC=2", kernels.gelu_fwd, x, lnc=2), fwd),
    )
    return Track("gelu", "Track 1 (GELU)", f"{shape}, one core unless the row says LNC=2", steps)


# ---- Track 2: residual add + LayerNorm fold, and its consumer --------------------------------------
FOLD_ROWS, FOLD_HIDDEN, FOLD_BRANCHES = 1024, 768, 2   # a ViT-B block at 1024 token rows, two branches
GROUPING_HIDDEN, GROUPING_BRANCHES = 384, 1            # ViT-S, one branch: the published failing case
GROUPING_MAX_ROWS = 16_384                             # how far the SBUF step's search goes: 2x the published ~8k


def rows_that_compile(kernel, hidden: int, branches: int, *extra, limit: int = GROUPING_MAX_ROWS) -> int:
    """The most rows (a multiple of 128, at most `limit`) at which `kernel` passes the emulator's SBUF
    checks on one core (a dry run: the compiler's capacity rule, spills allowed), by bisection."""
    def compiles(rows: int) -> bool:
        a, b = torch.zeros(rows, hidden), torch.zeros(branches, rows, hidden, dtype=torch.bfloat16)
        try:
            with warnings.catch_warnings():   # spilling is compiling: the step is about what fails
                warnings.simplefilter("ignore", nkisim.NkiSpillWarning)
                nkisim.run(kernel, a, b, EPS, *extra, dry_run=True)
        except nkisim.NkiValidationError:
            return False
        return True

    lo, hi = 0, limit // P          # in tiles: lo compiles (0: nothing yet), hi + 1 is not known to
    if compiles(hi * P):
        return hi * P
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if compiles(mid * P) else (lo, mid)
    return lo * P


DESCRIPTOR_TIME = Metric("engine time generating descriptors", "µs", read=descriptor_time_us)
ROWS_THAT_COMPILE = Metric(f"rows/core that compile (ViT-S, B=1; tried to {GROUPING_MAX_ROWS:,})", "rows",
                           read=float, lower_is_better=False)


def fold_track() -> Track:
    a, b = fold_inputs(FOLD_ROWS, FOLD_HIDDEN, FOLD_BRANCHES)
    shape = f"[{FOLD_ROWS}, {FOLD_HIDDEN}] x{FOLD_BRANCHES}"

    def fold(label, kernel, *extra, lnc=1):
        return launch(f"{label} {shape}" + (f", LNC={lnc}" if lnc > 1 else ""), kernel, a, b, EPS, *extra, lnc=lnc)

    naive = fold("res_layernorm_naive", res_layernorm_naive)
    thinned = fold("res_layernorm_thinned", res_layernorm_thinned)
    dge_none = fold("res_layernorm_dge_none", res_layernorm_dge_none)
    loads_first = fold("res_layernorm_loads_first", res_layernorm_loads_first)
    one_core = fold("res_layernorm_fold_kernel", kernels.res_layernorm_fold_kernel, BUDGET)
    two_cores = fold("res_layernorm_fold_kernel", kernels.res_layernorm_fold_kernel, BUDGET, lnc=2)
    gamma, beta = torch.zeros(1, FOLD_HIDDEN), torch.zeros(1, FOLD_HIDDEN)   # values unused by a profile
    affine = launch(f"res_layernorm_affine {shape}, LNC=2", res_layernorm_affine, a, b, gamma, beta, EPS, BUDGET,
                    lnc=2)
    staged = Setup("res_layernorm_loads_first, ViT-S B=1", lambda: rows_that_compile(
        res_layernorm_loads_first, GROUPING_HIDDEN, GROUPING_BRANCHES), SOURCE_EMULATOR)
    grouped = Setup("res_layernorm_grouped, ViT-S B=1", lambda: rows_that_compile(
        res_layernorm_grouped, GROUPING_HIDDEN, GROUPING_BRANCHES, BUDGET), SOURCE_EMULATOR)

    # A profile needs shapes and dtypes only (lesson 16 checks the values): z [512, 384] bf16, W [1152, 384] bf16
    operands = (torch.zeros(512, 384, dtype=torch.bfloat16), torch.zeros(1152, 384, dtype=torch.bfloat16),
                torch.zeros(1152, 1))

    def linear(label, kernel, *extra, lnc=1):
        return launch(f"{label} [512, 384] -> 1152" + (f", LNC={lnc}" if lnc > 1 else ""), kernel, *operands,
                      *extra, lnc=lnc)

    linear_1 = linear("linear_naive", linear_naive)
    linear_2 = linear("linear_psum_accumulate", linear_psum_accumulate)
    linear_3 = linear("linear_weights_stationary", linear_weights_stationary)
    linear_4 = linear("folded_linear_kernel", kernels.folded_linear_kernel,
                      kernels.limits.FOLDED_LINEAR_WEIGHT_BUDGET, lnc=2)
    steps = (
        Step(9, "naive kernel", "res_layernorm_naive", naive, kind=BASELINE),
        Step(10, "thinned, shifted statistics chain", "res_layernorm_thinned", thinned, naive),
        Step(11, "dge_mode.none on every DMA", "res_layernorm_dge_none", dge_none, thinned, DESCRIPTOR_TIME),
        Step(12, "all loads first, one SBUF slot per tile", "res_layernorm_loads_first", loads_first, dge_none),
        Step(13, "groups of G tiles within the SBUF budget", "res_layernorm_grouped", grouped, staged,
             ROWS_THAT_COMPILE),
        Step(14, "LNC=2: rows split over both physical cores", "res_layernorm_fold_kernel[2]", two_cores, one_core),
        Step(15, "gamma/beta folded into the consumers", "res_layernorm_fold_kernel[2]", two_cores, affine),
        Step(16, "consumer naive: a matmul per tile, Vector sum", "linear_naive", linear_1, kind=BASELINE),
        Step(16, "accumulate in PSUM, bias on the evacuation", "linear_psum_accumulate", linear_2, linear_1),
        Step(16, "weights stationary, z in 512-row blocks", "linear_weights_stationary", linear_3, linear_2),
        Step(16, "LNC=2, one store per 128 rows (finished)", "folded_linear_kernel[2]", linear_4, linear_3),
    )
    return Track("fold", "Track 2 (fold)", f"{shape} (fp32 + bf16 branches), one core unless the row says LNC=2; "
                 "lesson 16: [512, 384] -> 1152", steps)


TRACKS = {"gelu": gelu_track, "fold": fold_track}


def results(name: str, upto: int | None = None) -> tuple[Track, list[StepResult]]:
    """A track (by name, "gelu" or "fold") and its steps measured, up to lesson `upto`."""
    if name not in TRACKS:
        raise ValueError(f"unknown track {name!r}: the tracks are {sorted(TRACKS)}")
    track = TRACKS[name]()
    return track, measure_track(track, upto)


def show_track(name: str, upto: int) -> list[StepResult]:
    """Print a track's table up to lesson `upto` and draw what each step moved; return the rows."""
    import matplotlib.pyplot as plt

    track, rows = results(name, upto)
    print(track_text(track, rows, upto))
    if any(r.improvement is not None for r in rows):   # a baseline alone has nothing to chart yet
        draw_track(track, rows, upto)
        plt.show()
    return rows
