"""The roofline view: each version's achieved throughput against its arithmetic intensity, under
the trn2 memory roofs and each engine's compute roof (matplotlib, imported when a view is drawn).

Work is counted per `nkisim.costmodel.costs.operations` (one operation per element an instruction
produces; 2 per matmul multiply-accumulate), bytes are the HBM bytes the DMAs moved. A point under
the sloped roof and far from the flat ones is memory-bound; a point near a flat roof is bound by that
engine. Roof values and their sources are in `nkisim/costmodel/constants.py`.
"""
from __future__ import annotations

import itertools

from typing import TYPE_CHECKING

from nkisim.arguments import check_labelled
from nkisim.costmodel import constants as K
from nkisim.costmodel.dma import core_dma_bytes_per_s
from nkisim.limits import PARTITIONS
from nkisim.profile.style import SOURCE_STYLE, WIDTH_IN, source_kind, sources_key
from nkisim.profile.summary import ProfileSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

POINT_MARKERS = ("o", "s", "^", "v", "P", "X", "*", "<", ">", "h")  # one per point of a panel


def tensor_bf16_flops() -> float:
    """2 FLOPs per multiply-accumulate of the 128 x 128 array per Tensor cycle: 78.6e12 at 2.4 GHz,
    the documented 79 dense BF16 TFLOPS per core (SDK:nki/guides/architecture/trainium2_arch.rst)."""
    return 2 * PARTITIONS * PARTITIONS * K.TENSOR_CLOCK_HZ


def compute_roofs(lnc: int = 1) -> dict[str, float]:
    """Peak operations/s of each engine on the `lnc` physical cores of a logical core: 128 lanes x
    clock x elements per lane-cycle (the Vector data path for dtypes other than bf16/fp16: 256 elements per
    cycle, SDK:nki/guides/architecture/trainium2_arch.rst), times the cores."""
    one_core = {"Tensor (bf16 matmul)": tensor_bf16_flops(),
                "Vector (bf16 perf mode)": PARTITIONS * K.VECTOR_CLOCK_HZ * K.VECTOR_PERF_MODE_FULL,
                "Vector (fp32)": K.VECTOR_OTHER_DTYPE_ELEMENTS_PER_CYCLE * K.VECTOR_CLOCK_HZ,
                "Scalar": PARTITIONS * K.SCALAR_CLOCK_HZ * K.SCALAR_ELEMENTS_PER_CYCLE}
    return {name: lnc * peak for name, peak in one_core.items()}


def memory_roofs(lnc: int = 1) -> dict[str, float]:
    """Bytes/s: the DMA engines of the `lnc` cores, and the HBM stack the two cores of a logical
    core share (the same stack at LNC=1 and LNC=2)."""
    cores = "1 core's" if lnc == 1 else f"{lnc} cores'"
    return {f"{cores} DMA engines": lnc * core_dma_bytes_per_s(), "HBM stack (MBU 100%)": K.HBM_STACK_BYTES_PER_S}


def point(summary: ProfileSummary) -> tuple[float, float]:
    """(arithmetic intensity in operations per HBM byte, achieved operations/s) of one profile."""
    work = sum(summary.engine_operations.values())
    moved = (summary.hbm_read_bytes or 0) + (summary.hbm_write_bytes or 0) or summary.dma_transfer_total_bytes
    if not work or not moved or not summary.total_time:
        raise ValueError(f"{summary.kernel!r} [{summary.source}]: the roofline needs operations, HBM bytes and "
                         f"total_time (got {work}, {moved}, {summary.total_time})")
    return work / moved, work / summary.total_time


def show_roofline(summaries: dict[str, ProfileSummary]) -> "Figure":
    """Log-log roofline: one point per version, the memory roofs as sloped lines, engines as flat ones.
    Each point is drawn against the roofs of its own LNC: one panel per LNC among the summaries.
    Labels go in a legend beside each panel (roofs, then points), so no two overlap; a published
    point is a hatched ring drawn over the model's, which stays visible inside it."""
    import matplotlib.pyplot as plt

    check_labelled("show_roofline", "summaries", summaries, ProfileSummary, "ProfileSummary")
    points = {label: point(s) for label, s in summaries.items()}
    xs = [x for x, _ in points.values()]
    x_lo, x_hi = min(xs) / 8, max(max(xs) * 8, 1e4)
    y_lo = min(y for _, y in points.values()) / 10
    lncs = sorted({s.lnc for s in summaries.values()})
    fig, axes = plt.subplots(len(lncs), 1, figsize=(WIDTH_IN, 0.6 + 3.6 * len(lncs)), sharex=True, squeeze=False,
                             layout="constrained")
    for ax, lnc in zip(axes[:, 0], lncs):
        _draw_panel(ax, lnc, {label: s for label, s in summaries.items() if s.lnc == lnc}, points, (x_lo, x_hi))
        ax.set_ylim(y_lo, tensor_bf16_flops() * max(lncs) * 3)
        ax.set_ylabel("achieved throughput (operations/s)")
    axes[-1, 0].set_xlabel("arithmetic intensity (operations per HBM byte)")
    fig.suptitle("roofline: throughput against arithmetic intensity\n" + sources_key(summaries), fontsize=9)
    return fig


def _draw_panel(ax, lnc: int, summaries: dict[str, ProfileSummary], points: dict[str, tuple[float, float]],
                x_range: tuple[float, float]) -> None:
    """One LNC's roofs and points, with one legend (roofs, then points) beside the axes."""
    x_lo, x_hi = x_range
    roofs = []
    for (name, bw), style in zip(memory_roofs(lnc).items(), ("-", "--")):
        roofs += ax.plot([x_lo, x_hi], [x_lo * bw, x_hi * bw], color="black", linestyle=style, linewidth=1,
                         label=f"{name}: {bw / 1e9:,.0f} GB/s")
    for (name, peak), color in zip(compute_roofs(lnc).items(), ("#d4b106", "#3a73b5", "#6aa6e0", "#e8852f")):
        roofs.append(ax.axhline(peak, color=color, linewidth=1.2, label=f"{name}: {peak / 1e9:,.0f} G op/s"))
    marks = []
    for (label, s), marker in zip(summaries.items(), itertools.cycle(POINT_MARKERS)):  # every point, markers reused past 10
        x, y = points[label]
        kind = source_kind(s.source)
        published = kind == "published"
        marks.append(ax.scatter([x], [y], s=160 if published else 50, marker=marker, edgecolor="black",
                                linewidth=1.2 if published else 0.8, hatch=SOURCE_STYLE[kind].get("hatch"),
                                color="none" if published else SOURCE_STYLE[kind]["facecolor"],
                                zorder=4 if published else 3,
                                label=f"{label}: {y / 1e9:,.0f} G op/s, bound by {s.bound_by or '—'}"))
        if published:  # the hatch in the source's colour, the inside see-through
            marks[-1].set_edgecolor(SOURCE_STYLE[kind]["facecolor"])
        if s.total_time_range is not None:   # throughput over the uncertain constants' range
            lo, hi = (y * s.total_time / t for t in reversed(s.total_time_range))
            ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color="black", capsize=3, lw=0.8, zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.grid(which="major", alpha=0.3)
    cores = "one core" if lnc == 1 else f"{lnc} cores"
    ax.set_title(f"LNC={lnc}: roofs of {cores}", fontsize=9)
    ax.legend(handles=roofs + marks, loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7, frameon=False)
