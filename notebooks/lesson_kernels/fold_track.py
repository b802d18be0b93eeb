"""The fold track step by step: every lesson's kernel profiled on one shape, as a running table and
chart that each lesson of the track ends with (lessons 09-15).

All times are trn2 cost model (estimate) numbers from dry runs; nothing here is measured.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import kernels
import nkisim
from nkisim import ProfileSummary

from .layernorm_check import EPS, fold_inputs
from .layernorm_dge import res_layernorm_dge_none
from .layernorm_grouped import res_layernorm_grouped, res_layernorm_thinned
from .layernorm_loads_first import res_layernorm_loads_first
from .layernorm_naive import res_layernorm_naive

ROWS, HIDDEN, BRANCHES = 1024, 768, 2  # a ViT-B block at 1024 token rows, two branches
BUDGET = kernels.FOLD_SBUF_BUDGET


@dataclass(frozen=True)
class Step:
    lesson: int
    change: str
    kernel: Any
    extra_args: tuple = ()
    lnc: int = 1


STEPS = [
    Step(9, "naive kernel", res_layernorm_naive),
    Step(10, "dge_mode.none on every DMA", res_layernorm_dge_none),
    Step(11, "all loads first, one slot per tile", res_layernorm_loads_first),
    Step(12, "groups of G tiles (G = all 8 here)", res_layernorm_grouped, (BUDGET,)),
    Step(13, "thinned, shifted statistics chain", res_layernorm_thinned, (BUDGET,)),
    Step(14, "LNC = 2: both physical cores", kernels.res_layernorm_fold_kernel, (BUDGET,), lnc=2),
]
FOLD_LESSON = 15  # gamma/beta folded into the consumers: the kernel itself does not change


def track_profiles(upto: int, profile: Callable[..., ProfileSummary] = nkisim.profile) -> list[tuple[Step, ProfileSummary]]:
    """(step, profile) for every step up to lesson `upto`, all on [ROWS, HIDDEN] with BRANCHES branches."""
    if not 9 <= upto <= FOLD_LESSON:
        raise ValueError(f"track_profiles: upto={upto} is not a lesson of the fold track (9 to {FOLD_LESSON})")
    a, b = fold_inputs(ROWS, HIDDEN, BRANCHES)
    return [(s, profile(s.kernel, a, b, EPS, *s.extra_args, lnc=s.lnc)) for s in STEPS if s.lesson <= upto]


def track_table(rows: list[tuple[Step, ProfileSummary]], upto: int) -> str:
    """The running table as text: one line per step, the change against the step before."""
    lines = [f"fold track so far, [{ROWS}, {HIDDEN}] fp32 + {BRANCHES} bf16 branches  [trn2 cost model (estimate)]",
             f"{'lesson':>6}  {'change':<38} {'total':>9} {'vs before':>10}  bound by"]
    previous = None
    for step, summary in rows:
        total = summary.total_time_us
        delta = "" if previous is None else f"{100 * (total / previous - 1):+.1f}%"
        marker = " <- this lesson" if step.lesson == upto else ""
        lines.append(f"{step.lesson:>6}  {step.change:<38} {total:>6.1f} µs {delta:>10}  {summary.bound_by}{marker}")
        previous = total
    if upto == FOLD_LESSON:
        lines.append(f"{FOLD_LESSON:>6}  {'gamma/beta folded into the consumers':<38} {'same':>9} {'':>10}  "
                     "(the kernel is unchanged; the affine pass leaves the model) <- this lesson")
    return "\n".join(lines)


def show_track(upto: int) -> list[tuple[Step, ProfileSummary]]:
    """Print the running table up to lesson `upto` and draw it as a bar chart; return the rows."""
    import matplotlib.pyplot as plt

    rows = track_profiles(upto)
    print(track_table(rows, upto))
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    labels = [f"{s.lesson} · {s.change}" for s, _ in rows]
    times = [p.total_time_us for _, p in rows]
    colors = ["#1f77b4" if s.lesson == min(upto, STEPS[-1].lesson) else "#aec7e8" for s, _ in rows]
    ax.barh(labels, times, color=colors)
    for y, (t, (_, p)) in enumerate(zip(times, rows)):
        ax.text(t, y, f" {t:.1f} µs, {p.bound_by}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(times) * 1.35)
    ax.set_xlabel("modeled total time (µs), trn2 cost model (estimate)")
    ax.set_title(f"The fold track up to lesson {upto}")
    plt.tight_layout()
    plt.show()
    return rows
