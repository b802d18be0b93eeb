"""Matplotlib views of profile summaries: engine/queue timeline and version comparison (the roofline
is in nkisim/profile/roofline.py).

Each figure is ~9.5 in wide (notebook width), titled with the summaries' source label
("trn2 cost model (estimate)", "trn2 hardware (measured)" or the published-measurement label),
with units on every axis. Each function returns the Figure; a notebook cell ends with plt.show().
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from nkisim.arguments import check_kind, check_labelled
from nkisim.profile.roofline import show_roofline  # noqa: F401  (the roofline view, exported with the others)
from nkisim.profile.style import SOURCE_STYLE, WIDTH_IN, source_kind, sources_key
from nkisim.profile.summary import ProfileSummary, bound_by_meaning
from nkisim.vocabulary import BARRIER_WAIT, DGE, DMA, IDLE_OPCODES, PSEUDO_OPCODES, opcode_color

OTHER_COLOR = "#7f7f7f"         # an opcode nothing registered a colour for


def _color(opcode: str) -> str:
    return opcode_color(opcode) or OTHER_COLOR


def _lane_label(core: int, lane: str, lnc: int) -> str:
    return f"core {core} · {lane}" if lnc > 1 else lane


def _draw_timeline(ax: Axes, summary: ProfileSummary, label_names: bool = True) -> list[str]:
    """Gantt of one summary's timeline on `ax`; returns the opcodes drawn (for a legend)."""
    sched = summary.timeline
    lanes = sched.lanes()
    row = {cl: i for i, cl in enumerate(lanes)}
    total_us = max(sched.total_time * 1e6, 1e-9)
    drawn: dict[str, None] = {}
    by_key: dict[tuple[int, str], list[tuple[float, float]]] = {}
    for s in sched.slots:
        if s.opcode in IDLE_OPCODES and s.duration <= 0:   # a receive, or a barrier nobody waited at
            continue
        by_key.setdefault((row[(s.core, s.lane)], s.opcode), []).append((s.start * 1e6, s.duration * 1e6))
    for (r, opcode), spans in by_key.items():
        ax.broken_barh(spans, (r - 0.4, 0.8), facecolors=_color(opcode),
                       edgecolor="white", linewidth=0.3)
        drawn[opcode] = None
    if label_names:
        for s in sched.slots:
            # Label a box with its name= only where the text fits (~6% of the time axis).
            if s.name and s.opcode not in PSEUDO_OPCODES and s.duration * 1e6 > 0.06 * total_us:
                ax.text((s.start + s.end) / 2 * 1e6, row[(s.core, s.lane)], s.name, ha="center",
                        va="center", fontsize=7, clip_on=True)
    ax.set_yticks(range(len(lanes)), [_lane_label(c, lane, sched.lnc) for c, lane in lanes])
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(0, total_us * 1.01)
    ax.grid(axis="x", alpha=0.3)
    return list(drawn)


PSEUDO_LABELS = {DGE: "descriptor gen.", BARRIER_WAIT: "waiting at core_barrier"}
LANE_KEY = ("DMA/<engine> lanes: data moving on the DMA queue whose descriptors <engine> issues "
            "(DMA/static: prebuilt, dge_mode.none); not that engine's compute")


def _legend(fig: Figure, opcodes: list[str]) -> None:
    handles = [Patch(color=_color(o), label=PSEUDO_LABELS.get(o, o)) for o in dict.fromkeys(opcodes)]
    fig.legend(handles=handles, loc="lower center", ncol=min(len(handles), 6), fontsize=8, frameon=False,
               title=LANE_KEY if "DMA" in opcodes else None, title_fontsize=7)


def show_timeline(summary: ProfileSummary) -> Figure:
    """Gantt chart: one lane per engine and DMA queue (per core for LNC=2), boxes labelled by name=.

    A summary without an instruction timeline (a hardware profile's summary table) is drawn as each
    lane's active time instead, so lesson cells run unchanged on a trn2 instance."""
    check_kind("show_timeline", "summary", summary, ProfileSummary,
               "a ProfileSummary (nkisim.profile(...) or nkisim.estimate(trace))")
    if summary.timeline is None:
        return _show_active_times(summary)
    n_lanes = len(summary.timeline.lanes())
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.4 + 0.42 * n_lanes))
    opcodes = _draw_timeline(ax, summary)
    ax.set_xlabel("time (µs)")
    ax.set_title(f"{summary.kernel}: {summary.total_time_us:,.1f} µs{summary.range_text()}\n"
                 f"bound by {summary.bound_by}{bound_by_meaning(summary.bound_by)}\n{summary.source}", fontsize=9)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    _legend(fig, opcodes)
    return fig


def _show_active_times(summary: ProfileSummary) -> Figure:
    lanes = {**summary.engine_active_time, DMA: summary.dma_active_time}
    lanes = {lane: t for lane, t in lanes.items() if t}
    if not lanes or not summary.total_time:
        raise ValueError(f"{summary.kernel!r} [{summary.source}] has neither a timeline nor engine active times")
    fig, ax = plt.subplots(figsize=(WIDTH_IN, 1.4 + 0.42 * len(lanes)))
    for row, (lane, t) in enumerate(lanes.items()):
        ax.barh(row, t * 1e6, height=0.6, color=_color(DMA) if lane == DMA else OTHER_COLOR)
        ax.text(t * 1e6, row, f"  {100 * t / summary.total_time:.1f}%", va="center", fontsize=8)
    ax.set_yticks(range(len(lanes)), list(lanes))
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(0, summary.total_time_us * 1.1)
    ax.set_xlabel("active time (µs); the profile summary has no per-instruction timeline")
    ax.set_title(f"{summary.kernel}: {summary.total_time_us:,.1f} µs, bound by {summary.bound_by or '—'}\n"
                 f"{summary.source}", fontsize=10)
    fig.tight_layout()
    return fig


def show_comparison(summaries: dict[str, ProfileSummary]) -> Figure:
    """Total time per version (bar, with its bounding lane) above the versions' timelines on one time axis."""
    check_labelled("show_comparison", "summaries", summaries, ProfileSummary, "ProfileSummary")
    labels = list(summaries)
    with_timeline = [k for k in labels if summaries[k].timeline is not None]
    heights = [0.9 + 0.4 * len(labels)] + [0.5 + 0.32 * len(summaries[k].timeline.lanes()) for k in with_timeline]
    fig = plt.figure(figsize=(WIDTH_IN, sum(heights) + 1.6))
    grid = fig.add_gridspec(len(heights), 1, height_ratios=heights, hspace=0.55)
    bars = fig.add_subplot(grid[0])
    totals = [summaries[k].total_time_us or 0.0 for k in labels]
    for i, k in enumerate(labels):
        s = summaries[k]
        bars.barh(i, totals[i], height=0.6, edgecolor="black", linewidth=0.5, **SOURCE_STYLE[source_kind(s.source)])
        right = totals[i]
        if s.total_time_range is not None:   # the range over uncertain constants, as an error bar
            lo, hi = (t * 1e6 for t in s.total_time_range)
            bars.errorbar(totals[i], i, xerr=[[totals[i] - lo], [hi - totals[i]]], color="black", capsize=3, lw=0.8)
            right = hi
        bars.text(right, i, f"  {totals[i]:,.1f} µs, bound by {s.bound_by or '—'}", va="center", fontsize=8)
    bars.set_yticks(range(len(labels)), labels)
    bars.set_ylim(len(labels) - 0.5, -0.5)
    bars.set_xlim(0, max(totals) * 1.6 if max(totals) > 0 else 1)
    bars.set_xlabel("total_time (µs); error bars: range over the model's uncertain constants")
    bars.set_title("total time per version\n" + sources_key(summaries), fontsize=9)
    opcodes: list[str] = []
    t_max = max((summaries[k].timeline.total_time * 1e6 for k in with_timeline), default=1.0)
    first = None
    for row, k in enumerate(with_timeline, start=1):
        ax = fig.add_subplot(grid[row], sharex=first)
        first = first or ax
        opcodes += _draw_timeline(ax, summaries[k], label_names=False)
        ax.set_title(f"{k}  [{summaries[k].source}]", fontsize=9, loc="left")
        ax.tick_params(axis="y", labelsize=7)
    if first is not None:
        first.set_xlim(0, t_max * 1.01)
        ax.set_xlabel("time (µs)")
        _legend(fig, opcodes)
    fig.subplots_adjust(left=0.2, right=0.97, top=1 - 0.75 / fig.get_figheight(),
                        bottom=0.7 / fig.get_figheight())
    return fig
