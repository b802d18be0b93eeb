"""The views render (non-empty images, expected lane labels, source in titles); pixels not compared."""
import io
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
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
    ax = fig.axes[0]
    assert ax.get_xscale() == ax.get_yscale() == "log" and "per HBM byte" in ax.get_xlabel()
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("HBM stack") for t in legend) and any(t.startswith("Scalar") for t in legend)
    assert [t.get_text().split("\n")[0] for t in ax.texts] == list(versions)
    assert _png_bytes(fig) > 10_000


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
