"""The roofline view: each version's achieved throughput against its arithmetic intensity, under
the trn2 memory roofs and each engine's compute roof (matplotlib, imported when a view is drawn).

Work is counted per `nkisim.costmodel.costs.operations` (one operation per element an instruction
produces; 2 per matmul multiply-accumulate), bytes are the HBM bytes the DMAs moved. A point under
the sloped roof and far from the flat ones is memory-bound; a point near a flat roof is bound by that
engine. Roof values and their sources are in `nkisim/costmodel/constants.py`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from nkisim.arguments import check_labelled
from nkisim.costmodel import constants as K
from nkisim.costmodel.dma import core_dma_bytes_per_s
from nkisim.limits import PARTITIONS
from nkisim.profile.style import SOURCE_STYLE, WIDTH_IN, source_kind, sources_key
from nkisim.profile.summary import ProfileSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure



def tensor_bf16_flops() -> float:
    """2 FLOPs per multiply-accumulate of the 128 x 128 array per Tensor cycle: 78.6e12 at 2.4 GHz,
    the documented 79 dense BF16 TFLOPS per core (SDK:nki/guides/architecture/trainium2_arch.rst)."""
    return 2 * PARTITIONS * PARTITIONS * K.TENSOR_CLOCK_HZ


def compute_roofs() -> dict[str, float]:
    """Peak operations/s of each engine on one core: 128 lanes x clock x elements per lane-cycle."""
    return {"Tensor (bf16 matmul)": tensor_bf16_flops(),
            "Vector (bf16 perf mode)": PARTITIONS * K.VECTOR_CLOCK_HZ * K.VECTOR_PERF_MODE_FULL,
            "Vector (fp32)": PARTITIONS * K.VECTOR_CLOCK_HZ,
            "Scalar": PARTITIONS * K.SCALAR_CLOCK_HZ * K.SCALAR_ELEMENTS_PER_CYCLE}


def memory_roofs() -> dict[str, float]:
    """Bytes/s: one core's DMA ceiling, and the whole HBM stack (shared by two cores)."""
    return {"1 core's DMA engines": core_dma_bytes_per_s(), "HBM stack (MBU 100%)": K.HBM_STACK_BYTES_PER_S}


def point(summary: ProfileSummary) -> tuple[float, float]:
    """(arithmetic intensity in operations per HBM byte, achieved operations/s) of one profile."""
    work = sum(summary.engine_operations.values())
    moved = (summary.hbm_read_bytes or 0) + (summary.hbm_write_bytes or 0) or summary.dma_transfer_total_bytes
    if not work or not moved or not summary.total_time:
        raise ValueError(f"{summary.kernel!r} [{summary.source}]: the roofline needs operations, HBM bytes and "
                         f"total_time (got {work}, {moved}, {summary.total_time})")
    return work / moved, work / summary.total_time


def show_roofline(summaries: dict[str, ProfileSummary]) -> "Figure":
    """Log-log roofline: one point per version, the memory roofs as sloped lines, engines as flat ones."""
    import matplotlib.pyplot as plt

    check_labelled("show_roofline", "summaries", summaries, ProfileSummary, "ProfileSummary")
    points = {label: point(s) for label, s in summaries.items()}
    xs = [x for x, _ in points.values()]
    x_lo, x_hi = min(xs) / 8, max(max(xs) * 8, 1e4)
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 5.2))
    for (name, bw), style in zip(memory_roofs().items(), ("-", "--")):
        ax.plot([x_lo, x_hi], [x_lo * bw, x_hi * bw], color="black", linestyle=style, linewidth=1,
                label=f"{name}: {bw / 1e9:,.0f} GB/s")
    for (name, peak), color in zip(compute_roofs().items(), ("#d4b106", "#3a73b5", "#6aa6e0", "#e8852f")):
        ax.axhline(peak, color=color, linewidth=1.2, label=f"{name}: {peak / 1e9:,.0f} G op/s")
    for label, (x, y) in points.items():
        s = summaries[label]
        style = SOURCE_STYLE[source_kind(s.source)]
        ax.scatter([x], [y], s=60, zorder=3, edgecolor="black", hatch=style.get("hatch"), color=style["facecolor"])
        if s.total_time_range is not None:   # throughput over the uncertain constants' range
            lo, hi = (y * s.total_time / t for t in reversed(s.total_time_range))
            ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], color="black", capsize=3, lw=0.8, zorder=2)
        ax.annotate(f"{label}\n{y / 1e9:,.0f} G op/s, bound by {s.bound_by or '—'}", (x, y), fontsize=7,
                    xytext=(6, -4), textcoords="offset points", va="top")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x_lo, x_hi)
    ax.set_ylim(min(y for _, y in points.values()) / 10, tensor_bf16_flops() * 3)
    ax.set_xlabel("arithmetic intensity (operations per HBM byte)")
    ax.set_ylabel("achieved throughput (operations/s)")
    ax.grid(which="major", alpha=0.3)
    ax.legend(loc="upper left", fontsize=7, frameon=False)
    ax.set_title("roofline: throughput against arithmetic intensity\n" + sources_key(summaries), fontsize=9)
    fig.tight_layout()
    return fig
