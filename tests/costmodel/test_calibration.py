"""The model against the published trn2 figures: real kernels, real emulator traces (dry run).

The fitted DMA constants are what the fit gives, the leave-one-out predictions are reported, the
hidden figures stay predictions, and the published no-effect variants stay within ±3% by mechanism.
"""
import json
import math
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import calibration  # noqa: E402

from nkisim.costmodel import constants as K  # noqa: E402
from nkisim.costmodel.fitting import BOUNDS, FITTED, SMALLEST_STEP, Model, Target, fit  # noqa: E402
from nkisim.profile import published  # noqa: E402


@pytest.fixture(scope="module")
def doc():
    return calibration.report()


def test_stored_constants_are_the_fit_inside_their_documented_ranges():
    fitted = calibration.fits()["all"].params
    assert set(fitted) == set(FITTED) and 2 <= len(FITTED) <= 4
    stored = calibration.stored_params()
    for name, value in fitted.items():
        lo, hi = BOUNDS[name]
        assert lo <= stored[name] <= hi
        assert stored[name] == pytest.approx(value, rel=0.02)
    assert {c.name for c in K.TABLE if c.confidence == "Fitted"} == set(fitted)


def test_calibration_rows_report_modeled_and_held_out(doc):
    rows = {(r["config"].split()[0], r["metric"]): r for r in doc["calibration"]}
    fwd_total = rows[("gelu_fwd", "total_time")]
    assert fwd_total["published"] == published.GELU_FWD["total_time_us"]
    # in sample: both totals within 5%, DMA active within 4 points
    for kernel in ("gelu_fwd", "gelu_bwd"):
        t, a = rows[(kernel, "total_time")], rows[(kernel, "dma_active_time_percent")]
        assert abs(t["modeled"] / t["published"] - 1) < 0.05
        assert abs(a["modeled"] - a["published"]) <= 4.0
        # held out (fitted on the other kernel only): worse than in sample, within the 10% target. Both published
        # totals span the launch, setup included, and are compared so (`ProfileSummary.with_launch_setup`); read
        # as spans, the backward-only fit put the forward kernel at -11.2%
        assert abs(t["modeled"] / t["published"] - 1) < abs(t["holdout_modeled"] / t["published"] - 1) < 0.10
    # the hidden figures are predictions of the cycle rules: the DMA constants move them only through
    # which instructions start on an idle engine and so pay the access overhead (26 ACTIVATEs, one a tile)
    act = rows[("gelu_fwd", "Scalar ACTIVATE time")]
    assert act["modeled"] == pytest.approx(93.9, rel=0.05)
    access_us = 1e6 * K.ACCESS_OVERHEAD_CYCLES / K.SCALAR_CLOCK_HZ
    assert abs(act["modeled"] - act["holdout_modeled"]) <= math.ceil(3216 / 128) * access_us
    tt = rows[("gelu_bwd", "Vector TENSOR_TENSOR time")]
    assert tt["modeled"] == pytest.approx(59.6, rel=0.05)


def test_the_backward_forward_ratio_over_the_constants_ranges():
    """What the Calibration page and the README say of the GELU held-out margin. Over the fitted constants' whole
    ranges the model's backward/forward ratio of whole launches (as published) reaches the published one only at
    its low edge (read as spans, no setting reached it), and every setting that fits the backward kernel still
    predicts the forward kernel too fast, the backward-only fit's pick among them (inside the 10% target)."""
    box = calibration.gelu_box()
    assert box["settings"] == calibration.BOX_POINTS ** len(FITTED)
    assert box["ratio_min"] < box["published_ratio"] < box["ratio_min"] + 0.1 * (box["ratio_max"] - box["ratio_min"])
    assert 0 < box["settings_fitting_bwd"] < box["settings"]
    picked = calibration.fits()["gelu_bwd"].predictions["gelu_fwd"]["total_time_us"]
    assert box["held_out_fwd_min_us"] <= picked <= box["held_out_fwd_max_us"] < published.GELU_FWD["total_time_us"]


def _fit_objective_at(params: dict[str, float]) -> dict[tuple[str, str], float]:
    """Every target of the fit on all families, as its miss in units of its tolerance, at these constants."""
    everything = calibration.families()
    predicted = calibration.family_model(everything)(params)
    return {(t.kernel, t.metric): t.miss(predicted[t.kernel][t.metric]) for t in calibration.family_targets(everything)}


@pytest.mark.parametrize("name", FITTED)
def test_no_fitted_target_jumps_as_a_fitted_constant_moves(name):
    """The fit is a compass search over a max of schedule outputs: it assumes they move continuously with the
    constants. A tie the scheduler breaks one way at one value and the other way an instant later is a cliff
    (two DMA queues ready for the same engines at the same instant took the blocked walkthrough from 7.5 ms to
    10.7 ms at a per-transfer fixed cost of exactly 0, before the queues took turns). At the range's ends and at
    the stored value and one search step either side of it, a millionth of a step moves no target by more than
    a thousandth of its tolerance."""
    lo, hi = BOUNDS[name]
    step = SMALLEST_STEP * (hi - lo)
    stored = calibration.stored_params()
    points = (lo, stored[name] - step, stored[name], stored[name] + step, hi - 1e-6 * step)
    for at in (p for p in points if lo <= p <= hi - 1e-6 * step):   # (a stored value near an end has one side)
        before = _fit_objective_at({**stored, name: at})
        after = _fit_objective_at({**stored, name: at + 1e-6 * step})
        jumps = {k: after[k] - before[k] for k in before if abs(after[k] - before[k]) > 1e-3}
        assert not jumps, f"{name} = {at!r}: {jumps}"


def test_published_no_change_variants_stay_within_3_percent(doc):
    variants = {v["name"]: v for v in doc["variants"]}
    no_change = {n: v["vs_baseline_pct"] for n, v in variants.items() if "no change" in n}
    assert len(no_change) == 4
    # within ±3% by mechanism; the wider tiles still gain a little (half the transfers, half the fixed costs)
    assert calibration.variant_misses(doc) == []
    assert all(abs(d) <= calibration.NO_CHANGE_BAND_PCT for d in no_change.values())
    wider = next(d for n, d in no_change.items() if n.startswith("wider"))
    assert wider < 0
    # they constrain the fit on gelu_fwd's figures; the fit on gelu_bwd alone never sees them. It keeps
    # unrolling and hwdge inside the band and the wider tiles gaining; double buffering comes out just over it
    # (reported on the Calibration page and in the README: that fit charges no per-transfer fixed cost, which
    # speeds the baseline's queue, while the two-slot ring ties each load to the store two tiles back, a chain
    # the fixed cost does not shorten)
    assert {t.kernel for t in calibration.targets(("gelu_fwd",))} >= set(no_change)
    assert not {t.kernel for t in calibration.targets(("gelu_bwd",))} & set(no_change)
    held_out = {n: calibration.fits()["gelu_bwd"].predictions[n]["vs_baseline_pct"] for n in no_change}
    assert all(abs(d) <= calibration.NO_CHANGE_BAND_PCT for n, d in held_out.items()
               if not n.startswith(("wider", "double")))
    assert next(d for n, d in held_out.items() if n.startswith("wider")) < 0
    assert 0 < next(d for n, d in held_out.items() if n.startswith("double")) < 2 * calibration.NO_CHANGE_BAND_PCT
    two = next(v for n, v in variants.items() if "two queues" in n)
    assert -15 < two["vs_baseline_pct"] < -2          # the fixed cost of one queue hides under the other's data
    assert calibration.problems(doc) == []


def test_a_variant_outside_the_band_is_reported(doc):
    bad = dict(doc, variants=[{"name": "double buffering (published: no change)", "modeled_us": 1.0,
                               "vs_baseline_pct": 21.3}])
    assert calibration.variant_misses(bad) == ["double buffering (published: no change): +21.3% (published: no "
                                               "change; band ±3%)"]


def test_fold_software_dge_section(doc):
    fold = doc["fold_software_dge"]
    assert fold["published_first_add_us"] == published.FOLD_FIRST_ADD_WAIT_US
    assert fold["total_us_swdge"] > fold["total_us_none"]
    assert 0 < fold["first_add_us"] < fold["total_us_swdge"]


def test_target_miss_is_in_units_of_tolerance():
    assert Target("k", "total_time_us", 100.0).miss(110.0) == pytest.approx(2.0)
    assert Target("k", "dma_active_time_percent", 90.0).miss(88.0) == pytest.approx(0.5)
    assert Target("k", "value", 100.0, ("relative", 0.15)).miss(70.0) == pytest.approx(2.0)


def test_a_figure_no_constant_moves_does_not_decide_the_fit():
    """Leximax: a target the fitted constants cannot reach (another mechanism's miss) ties at every point,
    so the next-worst target, which they do move, decides."""
    def evaluate():
        return {"a": {"total_time_us": K.DMA_ENGINE_BYTES_PER_S / 1e9}, "b": {"total_time_us": 1.0}}

    bounds = {"dma_engine_bandwidth": BOUNDS["dma_engine_bandwidth"]}
    result = fit(Model(evaluate), [Target("a", "total_time_us", 24.0), Target("b", "total_time_us", 2.0)], bounds)
    assert result.params["dma_engine_bandwidth"] == pytest.approx(24e9, rel=0.005)
    assert result.misfit == pytest.approx(10.0)       # b's miss (50% / 5%) is reported, not hidden


def test_json_cli_prints_the_schema(capsys):
    assert calibration.main(["--json"]) == 0          # in process: reuses the module's cached fits
    doc = json.loads(capsys.readouterr().out)
    assert set(doc) == {"calibration", "variants", "fold_software_dge", "holdout", "families"}
    assert all(set(r) == {"config", "metric", "unit", "published", "modeled", "holdout_modeled"}
               for r in doc["calibration"])
    assert all(set(v) == {"name", "modeled_us", "vs_baseline_pct"} for v in doc["variants"])
    assert set(doc["fold_software_dge"]) == {"first_add_us", "published_first_add_us", "total_us_none",
                                             "total_us_swdge"}


def test_fit_only_cli_leaves_this_codes_fits_in_the_cache(capsys, monkeypatch):
    # `make test` runs it before pytest, so no test waits out a cold fit under its timeout
    monkeypatch.setattr(calibration, "report", lambda: pytest.fail("--fit-only must not build the report"))
    assert calibration.main(["--fit-only"]) == 0
    assert str(calibration.FIT_CACHE) in capsys.readouterr().out
    cached = json.loads((calibration.FIT_CACHE / f"fits-{calibration.code_fingerprint()}.json").read_text())
    assert {"all", "stored"} <= set(cached)
