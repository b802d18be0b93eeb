"""ProfileSummary printing, the hardware branch's summary-json parser, published figures, reports."""
import dataclasses
import json
import sys
from pathlib import Path

import pytest
from tracebuild import TraceBuilder, gelu_like

from nkisim.costmodel import constants as K
from nkisim.profile import published
from nkisim.profile.summary import SOURCE_ESTIMATE, SOURCE_MEASURED, ProfileSummary, estimate

FIXTURE = Path(__file__).parent / "fixtures" / "explorer_summary_gelu_fwd.json"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))


def test_estimate_carries_its_label_in_every_printout():
    s = estimate(gelu_like(256, 512))
    assert s.source == SOURCE_ESTIMATE
    text = str(s)
    assert SOURCE_ESTIMATE in text and "total_time" in text and "mbu_estimated_percent" in text
    assert "ACTIVATE" in s.table() and s.to_dict()["source"] == SOURCE_ESTIMATE


def test_fixture_parses_into_a_measured_summary():
    s = ProfileSummary.from_explorer_json(FIXTURE, kernel="gelu_fwd")
    assert s.source == SOURCE_MEASURED and SOURCE_MEASURED in str(s)
    assert s.total_time_us == pytest.approx(166.8)
    assert s.dma_active_time_percent == pytest.approx(90.9)
    assert s.mbu_estimated_percent == pytest.approx(44.1)          # fraction in the JSON -> percent
    assert s.effective_dma_throughput / 1e9 == pytest.approx(315.9, abs=0.1)
    assert s.instruction_counts[("Scalar", "ACTIVATE")] == 26
    assert s.opcode_time("ACTIVATE") == pytest.approx(93.9e-6)
    assert s.engine_active_time["Scalar"] == pytest.approx(93.9e-6)
    assert s.timeline is None
    # the same fields flat, or under "summary": [...], parse the same
    fields = json.loads(FIXTURE.read_text())["gelu_fwd_3216x4096_bf16"]
    assert ProfileSummary.from_explorer_json({"summary": [fields]}).total_time == s.total_time
    assert ProfileSummary.from_explorer_json(json.dumps(fields)).hbm_read_bytes == 26345472


def test_parser_reads_the_fields_that_replace_the_ones_neuron_2_34_deprecates():
    fields = json.loads(FIXTURE.read_text())["gelu_fwd_3216x4096_bf16"]
    renamed = {k: v for k, v in fields.items() if k not in ("mbu_estimated_percent", "hbm_read_bytes", "hbm_write_bytes",
                                                            "dma_transfer_total_bytes")}
    renamed.update(hbm_mbu_estimated_percent=44.1, instruction_hbm_read_bytes=26345472,
                   instruction_hbm_write_bytes=26345472, static_dma_size=52690944, software_dynamic_dma_size=0)
    old, new = ProfileSummary.from_explorer_json(fields), ProfileSummary.from_explorer_json(renamed)
    assert (new.mbu_estimated_percent, new.hbm_read_bytes, new.hbm_write_bytes, new.dma_transfer_total_bytes) == \
        (pytest.approx(old.mbu_estimated_percent), old.hbm_read_bytes, old.hbm_write_bytes, old.dma_transfer_total_bytes)
    assert "mbu_estimated_percent" not in renamed               # the caller's dict is left as it was


def test_parser_rejects_what_is_not_a_summary():
    with pytest.raises(ValueError, match="not a Neuron Explorer summary"):
        ProfileSummary.from_explorer_json({"foo": {"bar": 1}})
    fields = json.loads(FIXTURE.read_text())["gelu_fwd_3216x4096_bf16"]
    for bad in (None, 0, -1.0):
        with pytest.raises(ValueError, match=r"total_time must be a positive time in seconds, got "):
            ProfileSummary.from_explorer_json({**fields, "total_time": bad})
    with pytest.raises(ValueError, match=r"field 'hbm_read_bytes' must be a number, got 'n/a'"):
        ProfileSummary.from_explorer_json({**fields, "hbm_read_bytes": "n/a"})
    with pytest.raises(ValueError, match="no line opens a JSON document"):
        ProfileSummary.from_explorer_json("neuron-explorer: no profile {name} found\n")


def test_parser_takes_neuron_explorer_output_as_printed():
    """A log line before the JSON (neuron-explorer's stdout), a zero dma_transfer_total_bytes (2.34's notice: "0 in
    many profiles") with the per-kind sizes given, and an ACTIVATE count without the Scalar engine's total."""
    fields = json.loads(FIXTURE.read_text())["gelu_fwd_3216x4096_bf16"]
    logged = "INFO: loading profile\n" + json.dumps({"p": fields})
    assert ProfileSummary.from_explorer_json(logged).total_time == ProfileSummary.from_explorer_json(fields).total_time
    zero = {**fields, "dma_transfer_total_bytes": 0, "static_dma_size": 1000, "software_dynamic_dma_size": 24}
    assert ProfileSummary.from_explorer_json(zero).dma_transfer_total_bytes == 1024
    no_scalar_total = {k: v for k, v in fields.items() if k != "scalar_engine_instruction_count"}
    counts = ProfileSummary.from_explorer_json(no_scalar_total).instruction_counts
    assert counts[("Scalar", "ACTIVATE")] == 26 and ("Scalar", "*") not in counts


def test_published_summary_is_labelled_with_its_source():
    s = published.published_summary("gelu_bwd")
    assert s.source == published.SOURCE and published.SOURCE in str(s)
    assert s.total_time_us == pytest.approx(218.5)
    assert s.effective_dma_throughput / 1e9 == pytest.approx(362.0)
    with pytest.raises(ValueError, match="no published profile for 'gelu_mid'"):
        published.published_summary("gelu_mid")


def test_hardware_report_from_recorded_summaries(tmp_path):
    from hardware_validation import write_report

    measured = ProfileSummary.from_explorer_json(FIXTURE, kernel="gelu_fwd")
    modeled = estimate(gelu_like(3216, 4096))
    text = write_report([("gelu_fwd", modeled, measured)], tmp_path / "r.md")
    assert (tmp_path / "r.md").read_text() == text
    assert "166.8 µs" in text and SOURCE_MEASURED in text and "trn2 cost model (estimate)" in text
    assert "| gelu_fwd | total_time |" in text and "ok (±15%)" in text
    with pytest.raises(ValueError, match="must be a hardware measurement"):
        write_report([("gelu_fwd", modeled, modeled)])
    assert f"| dma_transfer_fixed | {K.DMA_TRANSFER_FIXED_S:g} s | Fitted | gelu_fwd at [3216, 4096] bf16:" in text


def test_every_fitted_uncertain_or_low_confidence_constant_has_a_recalibrating_measurement():
    from hardware_validation import RECALIBRATION

    needed = {c.name for c in K.TABLE if c.uncertain or c.confidence in ("Fitted", "Low", "Low-Medium", "Medium-Low")}
    needed -= {"sbuf_usable_per_partition", "sync_clock"}     # not timing constants the profile can refit
    assert needed <= set(RECALIBRATION), sorted(needed - set(RECALIBRATION))


def test_estimates_carry_their_range_over_uncertain_constants():
    from nkisim.profile.summary import bound_by_meaning
    s = estimate(gelu_like(1024, 4096, lnc=2))
    lo, hi = s.total_time_range
    assert lo < s.total_time < hi
    with K.overridden(K.varied("high")):
        assert estimate(gelu_like(1024, 4096, lnc=2), with_range=False).total_time == pytest.approx(hi)
    assert f"range {lo * 1e6:,.1f} .. {hi * 1e6:,.1f} µs over uncertain constants" in s.table()
    assert estimate(gelu_like(128, 64), with_range=False).total_time_range is None
    assert "not GpSimd compute" in bound_by_meaning("DMA/GpSimd") and "dge_mode.none" in bound_by_meaning("DMA/static")
    assert bound_by_meaning("Vector") == ""


def test_an_lnc2_table_says_which_numbers_are_any_core_and_which_are_summed():
    one, two = estimate(gelu_like(640, 2048)), estimate(gelu_like(640, 2048, lnc=2))
    assert "any core" not in one.table() and "summed" not in one.table()
    text = two.table()
    assert "active (any core)" in text and "instructions (sum)" in text and "time (sum of cores)" in text
    assert "summed over the 2 cores" in text
    # the opcode time really is the sum over the cores, the engine's active time the union
    assert two.opcode_time("DMA") > two.dma_active_time


def test_dma_packet_time_sums_each_transfer_over_the_engines_it_moves_on():
    """Explorer's Dma Packet Time adds up every engine's packets. A transfer into 128 partitions moves on
    all 16 engines, one into 4 partitions on one (SDK:nki/get-started/about/nki-dma-overview.rst,
    examples 1 and 2), so the 128-row load counts 16 times its time and the 4-row load once."""
    b = TraceBuilder()
    wide, narrow = b.alloc(), b.alloc()
    b.dma(b.sbuf(wide, 128, 2048), b.hbm(b.alloc(), 0, 128 * 2048))
    b.dma(b.sbuf(narrow, 4, 2048), b.hbm(b.alloc(), 0, 4 * 2048))
    s = estimate(b.trace, with_range=False)
    transfers = sorted((x for x in s.timeline.slots if x.engine == "DMA"), key=lambda x: x.nbytes)
    assert [x.engines for x in transfers] == [1, 16]
    # the 16 engines of the wide load get their descriptors one after another: each moves as long, from its own start
    wide_engines = transfers[1].engine_intervals()
    assert len({start for start, _ in wide_engines}) == 16 and len({round(e - s, 15) for s, e in wide_engines}) == 1
    busy = wide_engines[0][1] - wide_engines[0][0]
    assert s.dma_packet_time == pytest.approx(transfers[0].duration + 16 * busy)
    assert s.dma_packet_time > s.dma_active_time          # the engines work side by side


def test_parser_reads_the_dma_packet_time():
    fields = {"total_time": 1e-3, "dma_active_time": 0.9e-3, "dma_packet_time": 12e-3}
    assert ProfileSummary.from_explorer_json(fields).dma_packet_time == pytest.approx(12e-3)


def test_parser_reads_explorer_span_and_the_band_checks_it_when_the_profile_has_it():
    # SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary: total_exec_time runs "from the earliest
    # non-setup instruction or DMA packet to the latest, excluding setup/teardown opcodes"; total_time from the
    # runtime's start to its stop notification. A published LNC=1 profile (a small attention kernel, SDK 2.32) has
    # total_time 21.99 us and total_exec_time 10.07 us: ~12 us of setup and teardown the model does not estimate.
    from nkisim.profile.calibration import compare

    fields = json.loads(FIXTURE.read_text())["gelu_fwd_3216x4096_bf16"]
    modeled = estimate(gelu_like(3216, 4096))
    assert modeled.total_exec_time == modeled.total_time and modeled.to_dict()["total_exec_time_us"] > 0
    span = modeled.total_time
    measured = ProfileSummary.from_explorer_json({**fields, "total_time": span + 12e-6, "total_exec_time": span})
    assert measured.total_exec_time == pytest.approx(span) and "total_exec_time" in measured.table()
    rows = {r.metric: r for r in compare("k", modeled, measured.to_dict())}
    assert rows["total_exec_time"].banded and rows["total_exec_time"].ok
    assert not rows["total_time"].banded
    # both are compared as the profile reads them: total_time with the modeled launch setup, total_exec_time as is
    assert rows["total_exec_time"].modeled == pytest.approx(span * 1e6)
    assert rows["total_time"].modeled == pytest.approx((span + K.launch_preamble_s(1)) * 1e6)
    # without the span, total_time keeps the band (the published GELU figures are total_time only), against the
    # estimate's span plus setup, and the DMA share counts the setup's DMA too
    plain = {r.metric: r for r in compare("k", modeled, ProfileSummary.from_explorer_json(fields).to_dict())}
    assert plain["total_time"].banded and "total_exec_time" not in plain
    assert plain["total_time"].modeled == pytest.approx((span + K.launch_preamble_s(1)) * 1e6)
    assert plain["dma_active_time_percent"].modeled == pytest.approx(
        100 * (modeled.dma_active_time + K.LAUNCH_SETUP_DMA_S) / (span + K.launch_preamble_s(1)))
    assert "total_exec_time" not in modeled.table()      # an estimate prints its span once, as total_time


def test_an_estimate_read_as_a_whole_launch_gets_the_launch_setup_once():
    # SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary: total_time runs from the runtime's start to its
    # stop, total_exec_time is the span, dma_active_time counts every DMA packet (the setup's too), and the shares
    # (MBU, dma_active_time_percent) are of total_time
    span = estimate(gelu_like(512, 2048))
    for lnc in (1, 2):
        est = dataclasses.replace(span, lnc=lnc)
        launch = est.with_launch_setup()
        setup = K.launch_preamble_s(lnc)
        assert launch.total_time == pytest.approx(est.total_time + setup) and launch.total_exec_time == est.total_time
        assert launch.dma_active_time == pytest.approx(est.dma_active_time + K.LAUNCH_SETUP_DMA_S)
        assert launch.mbu_estimated_percent == pytest.approx(est.mbu_estimated_percent * est.total_time / launch.total_time)
        lo, hi = launch.total_time_range
        assert lo > est.total_time_range[0] and hi > est.total_time_range[1] + setup   # the setup's own range on top
        assert "total_exec_time" in launch.table() and "launch setup" in launch.notes[-1]
        assert launch.engine_active_time == est.engine_active_time
    # a profile that spans the launch already is kept as it is: the setup is added once
    launch = span.with_launch_setup()
    assert launch.with_launch_setup() is launch
    pub = published.published_summary("gelu_fwd")
    assert pub.with_launch_setup() is pub
