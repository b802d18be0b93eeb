"""The views render (non-empty images, expected lane labels, source in titles); pixels not compared."""
import io
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PathCollection
from matplotlib.text import Text
from tracebuild import gelu_like

from nkisim import show_comparison, show_roofline, show_timeline
from nkisim.profile import published
from nkisim.profile.summary import SOURCE_ESTIMATE, SOURCE_MEASURED, ProfileSummary, estimate

FIXTURE = Path(__file__).parent / "fixtures" / "explorer_summary_gelu_fwd.json"


def _png_bytes(fig) -> int:
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return len(buf.getvalue())


def _ytick_labels(ax):
    return [t.get_text() for t in ax.get_yticklabels()]


def test_timeline_lanes_titles_and_name_labels():
    s = estimate(gelu_like(640, 2048, backward=True))
    fig = show_timeline(s)
    ax = fig.axes[0]
    assert _ytick_labels(ax) == ["Vector", "Scalar", "GpSimd", "DMA/GpSimd"]
    assert SOURCE_ESTIMATE in ax.get_title() and "µs" in ax.get_xlabel()
    labels = {t.get_text() for t in ax.texts}
    assert "gelu_dx" in labels and labels <= {"gelu_dx", "mul", "load_x", "load_grad", "store"}
    assert 8.5 <= fig.get_figwidth() <= 10
    assert _png_bytes(fig) > 10_000


def test_timeline_shows_both_cores_for_lnc2():
    fig = show_timeline(estimate(gelu_like(512, 1024, lnc=2)))
    labels = _ytick_labels(fig.axes[0])
    assert "core 0 · Scalar" in labels and "core 1 · DMA/GpSimd" in labels
    plt.close(fig)


def test_timeline_of_a_hardware_summary_shows_lane_active_times():
    # A Neuron Explorer summary has no per-instruction timeline: the view falls back to active time.
    measured = ProfileSummary.from_explorer_json(FIXTURE, kernel="gelu_fwd")
    fig = show_timeline(measured)
    ax = fig.axes[0]
    assert "DMA" in _ytick_labels(ax) and "Scalar" in _ytick_labels(ax)
    assert SOURCE_MEASURED in ax.get_title() and "no per-instruction timeline" in ax.get_xlabel()
    plt.close(fig)


def test_comparison_and_roofline_render_with_sources():
    versions = {"published": published.published_summary("gelu_fwd"),
                "model": estimate(gelu_like(3216, 4096)),
                "model, LNC=2": estimate(gelu_like(3216, 4096, lnc=2))}
    fig = show_comparison(versions)
    bars = fig.axes[0]
    assert _ytick_labels(bars) == list(versions)
    assert published.SOURCE in bars.get_title() and SOURCE_ESTIMATE in bars.get_title()
    assert len(fig.axes) == 3                     # bars + one timeline per estimate
    assert fig.axes[1].get_shared_x_axes().joined(fig.axes[1], fig.axes[2])
    assert _png_bytes(fig) > 10_000
    fig = show_roofline(versions)
    assert published.SOURCE in fig.get_suptitle() and SOURCE_ESTIMATE in fig.get_suptitle()
    one_core, two_cores = fig.axes
    assert one_core.get_xscale() == one_core.get_yscale() == "log" and "per HBM byte" in two_cores.get_xlabel()
    legend = [t.get_text() for ax in fig.axes for t in ax.get_legend().get_texts()]
    assert any(t.startswith("HBM stack") for t in legend) and any(t.startswith("Scalar") for t in legend)
    assert [t.split(":")[0] for t in legend if t.split(":")[0] in versions] == list(versions)
    assert _png_bytes(fig) > 10_000


def _roofline_of_close_points():
    """Five versions a few percent apart at the same intensity, at LNC=1 and 2: before the labels went
    into legends, their annotations printed on top of each other."""
    fwd, fwd2 = estimate(gelu_like(3216, 4096)), estimate(gelu_like(3216, 4096, lnc=2))
    return {"published": published.published_summary("gelu_fwd"), "model": fwd,
            "model, a few % slower": replace(fwd, total_time=fwd.total_time * 1.03),
            "model, LNC=2": fwd2, "model, LNC=2, a few % slower": replace(fwd2, total_time=fwd2.total_time * 1.03)}


def _points(ax) -> list[PathCollection]:
    """The roofline's points (scatter markers; error bars are line collections)."""
    return [c for c in ax.collections if isinstance(c, PathCollection)]


def _drawn_texts(fig) -> list[Text]:
    """The figure's texts that are drawn: titles, axis labels, legends, and the tick labels inside the axes' limits."""
    ticks = set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            lo, hi = sorted(axis.get_view_interval())
            ticks |= {id(tick.label1) for tick in axis.get_major_ticks() + axis.get_minor_ticks()
                      if not lo <= tick.get_loc() <= hi}
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip() and id(t) not in ticks]


def test_roofline_labels_never_overlap_and_stay_in_the_figure():
    fig = show_roofline(_roofline_of_close_points())
    renderer = fig.canvas.get_renderer()
    fig.draw(renderer)  # lays the figure out, as saving or showing it does
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in _drawn_texts(fig)]
    assert len(boxes) > 20, "the roofs' and the points' labels are drawn"
    overlapping = [(a, b) for (i, (a, box_a)) in enumerate(boxes) for (b, box_b) in boxes[i + 1:]
                   if box_a.overlaps(box_b)]
    assert not overlapping, f"labels printed on top of each other: {overlapping[:5]}"
    outside = [t for t, box in boxes if not fig.bbox.contains(box.x0, box.y0) or not fig.bbox.contains(box.x1, box.y1)]
    assert not outside, f"labels cut at the figure's edge: {outside}"
    plt.close(fig)


def test_each_point_is_drawn_against_the_roofs_of_its_lnc():
    from nkisim.profile.roofline import compute_roofs, memory_roofs, point
    summaries = _roofline_of_close_points()
    fig = show_roofline(summaries)
    assert [ax.get_title() for ax in fig.axes] == ["LNC=1: roofs of one core", "LNC=2: roofs of 2 cores"]
    for ax, lnc in zip(fig.axes, (1, 2)):
        flat = sorted(line.get_ydata()[0] for line in ax.get_lines() if "G op/s" in line.get_label())
        assert flat == pytest.approx(sorted(compute_roofs(lnc).values()))
        slopes = sorted(line.get_ydata()[0] / line.get_xdata()[0] for line in ax.get_lines()
                        if "GB/s" in line.get_label())
        assert slopes == pytest.approx(sorted(memory_roofs(lnc).values()))
        drawn = sorted(c.get_offsets()[0][1] for c in _points(ax))
        mine = sorted(point(s)[1] for s in summaries.values() if s.lnc == lnc)
        assert drawn == pytest.approx(mine), f"LNC={lnc}: the points drawn are not the LNC={lnc} ones"
    assert compute_roofs(2)["Scalar"] == pytest.approx(2 * compute_roofs(1)["Scalar"])
    assert memory_roofs(2)["2 cores' DMA engines"] == pytest.approx(2 * memory_roofs(1)["1 core's DMA engines"])
    plt.close(fig)


def test_the_vector_roof_is_the_rate_of_the_models_fastest_fp32_instruction():
    """trainium2_arch.rst: the Vector data path is 256 elements per cycle for dtypes other than bf16/fp16, which the
    cost model streams an fp32 SBUF copy at; the roof is that peak, so no fp32 Vector-bound point plots above it."""
    import numpy as np

    import nki
    import nki.isa as nisa
    import nki.language as nl

    import nkisim
    from nkisim.costmodel.costs import compute_seconds, operations
    from nkisim.profile.roofline import compute_roofs

    @nki.jit
    def copy(x):
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=b, src=a, engine=nisa.engine.vector)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=b)
        return out

    trace = nkisim.run(copy, np.zeros((128, 8192), np.float32), dry_run=True).trace
    (ins,) = [i for i in trace.instructions if i.isa == "tensor_copy"]
    rate, roof = operations(ins) / compute_seconds(ins), compute_roofs()["Vector (fp32)"]
    assert 0.95 * roof < rate <= roof


def test_the_published_point_is_a_see_through_ring_over_the_model_point():
    fig = show_roofline(_roofline_of_close_points())
    ax = fig.axes[0]
    marks = {c.get_label().split(":")[0]: c for c in _points(ax)}
    ring, model = marks["published"], marks["model"]
    assert ring.get_zorder() > max(c.get_zorder() for name, c in marks.items() if name != "published")
    assert all(face[3] == 0 for face in ring.get_facecolor()), "the model's point shows through the published ring"
    assert ring.get_sizes()[0] > model.get_sizes()[0]
    plt.close(fig)


def test_roofline_points_sit_under_their_roofs():
    from nkisim.profile.roofline import compute_roofs, memory_roofs, point
    fwd = estimate(gelu_like(3216, 4096))
    x, y = point(fwd)
    assert x == pytest.approx(0.25)                        # one op per bf16 element, 2 B in + 2 B out
    assert y <= x * max(memory_roofs().values()) and y <= max(compute_roofs().values())
    assert y == pytest.approx(3216 * 4096 / fwd.total_time)
    with pytest.raises(ValueError, match="needs operations"):
        point(ProfileSummary.from_explorer_json(FIXTURE, kernel="gelu_fwd"))


def test_views_reject_empty_input():
    with pytest.raises(ValueError, match="at least one"):
        show_comparison({})
    with pytest.raises(ValueError, match="at least one"):
        show_roofline({})
    assert isinstance(estimate(gelu_like(128, 64)), ProfileSummary)


def test_the_roofline_draws_every_point_past_its_ten_markers() -> None:
    import matplotlib
    matplotlib.use("Agg")
    import torch
    import nkisim
    from kernels import gelu_fwd
    from nkisim.profile.roofline import show_roofline

    base = nkisim.profile(gelu_fwd, torch.randn(256, 512, dtype=torch.bfloat16))
    fig = show_roofline({f"version {i}": base for i in range(12)})
    from matplotlib.collections import PathCollection
    points = [c for ax in fig.axes for c in ax.collections if isinstance(c, PathCollection)]
    assert len(points) == 12
