"""nkisim.profile.steps: a step's kind is checked when it is defined, each setup of a track is measured
once, the effect and the improvement factor have the right sign for both directions of metric, and
the text and chart name every step."""
import matplotlib.pyplot as plt
import pytest
from tracebuild import gelu_like

from nkisim.profile.steps import (BASELINE, CHANGE, EFFECTIVE_DMA, ENABLING, NO_CHANGE_BY_DESIGN, TOTAL_TIME, Metric,
                                  Setup, Step, Track, measure_track, show_track, track_text)
from nkisim.profile.summary import estimate


def counted(label, value, calls):
    def measure():
        calls.append(label)
        return value
    return Setup(label, measure, source="test numbers")


ROWS = Metric("rows that compile", "rows", read=float, lower_is_better=False)


def test_a_step_is_checked_when_it_is_defined():
    a, b = Setup("a", lambda: 1.0), Setup("b", lambda: 2.0)
    with pytest.raises(ValueError, match="kind 'faster'"):
        Step(1, "x", "k", b, a, kind="faster")
    with pytest.raises(ValueError, match="needs a before"):
        Step(1, "x", "k", b)
    with pytest.raises(ValueError, match="needs a before"):
        Step(1, "x", "k", b, a, kind=NO_CHANGE_BY_DESIGN, metric=None)
    with pytest.raises(ValueError, match="baseline has an after and nothing before"):
        Step(1, "x", "k", b, a, kind=BASELINE)
    with pytest.raises(ValueError, match="must name what it enables"):
        Step(1, "x", "k", None, metric=None, kind=ENABLING)
    Step(1, "x", "k", None, metric=None, kind=ENABLING, enables="y")   # an enabling step may measure nothing


def test_each_setup_is_measured_once_and_effects_follow_the_metric_direction():
    calls = []
    slow, fast, small, big = (counted(label, v, calls) for label, v in
                              (("slow", 100.0), ("fast", 80.0), ("small", 1000.0), ("big", 4000.0)))
    track = Track("t", "T", "test", (Step(1, "start", "k0", slow, metric=TOTAL_TIME, kind=BASELINE),
                                     Step(2, "faster", "k1", fast, slow),
                                     Step(3, "bigger", "k2", big, small, ROWS),
                                     Step(4, "later", "k3", slow, fast)))
    rows = measure_track(track)
    assert sorted(calls) == ["big", "fast", "slow", "small"]
    start, faster, bigger, later = rows
    assert start.effect_percent is None and start.improvement is None and not start.moves
    assert faster.effect_percent == pytest.approx(-20.0) and faster.improvement == pytest.approx(1.25) and faster.moves
    assert bigger.effect_percent == pytest.approx(300.0) and bigger.improvement == pytest.approx(4.0)
    assert later.improvement == pytest.approx(0.8)
    assert [r.step.lesson for r in measure_track(track, upto=2)] == [1, 2]
    d = faster.to_dict()
    assert (d["before"], d["after"], d["kind"], d["metric"], d["source"]) == (100.0, 80.0, CHANGE, "total_time",
                                                                             "test numbers")


def test_profiles_give_the_bound_engine_and_the_views_name_every_step():
    one, two = estimate(gelu_like(640, 2048)), estimate(gelu_like(640, 2048, lnc=2))
    a, b = Setup("LNC=1", lambda: one), Setup("LNC=2", lambda: two)
    track = Track("t", "T", "gelu_like [640, 2048]",
                  (Step(7, "split over two cores", "k", b, a), Step(7, "throughput", "k", b, a, EFFECTIVE_DMA),
                   Step(8, "into PyTorch", "k", None, metric=None, kind=ENABLING, enables="autograd")))
    rows = measure_track(track)
    assert rows[0].before.bound_by == one.bound_by and rows[0].after.bound_by == two.bound_by
    assert rows[0].after.value == pytest.approx(two.total_time_us) and rows[0].effect_percent < 0
    assert rows[1].effect_percent > 0 and rows[1].improvement > 1
    text = track_text(track, rows, upto=7)
    assert "split over two cores" in text and "<- this lesson" in text and "enabling step: autograd" in text
    assert "metric: effective DMA throughput" in text and one.source in text
    fig = show_track(track, rows, upto=7)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["7 · split over two cores", "7 · throughput"]
    plt.close(fig)


def test_measure_track_refuses_what_is_not_a_track():
    with pytest.raises(TypeError, match="measure_track: track must be"):
        measure_track([Step(1, "x", "k", Setup("a", lambda: 1.0), kind=BASELINE)])


def test_a_metric_that_falls_to_zero_is_an_infinite_improvement_and_still_charts():
    calls = []
    some, none = counted("some", 30.0, calls), counted("none", 0.0, calls)
    track = Track("t", "T", "test", (Step(1, "remove the work", "k", none, some),))
    (row,) = measure_track(track)
    assert row.effect_percent == pytest.approx(-100.0) and row.improvement == float("inf") and row.moves
    fig = show_track(track, [row])
    assert fig.axes[0].get_xlim()[1] > 1
    plt.close(fig)
