"""ProfileSummary: the numbers a Neuron Explorer summary shows, from the cost model or from hardware.

Field names follow the profiler's Summary table (nki-semantics-and-trn2.md §4). Times are seconds,
as in the profiler; the printout shows microseconds. Every summary carries `source`, printed in
every table and plot title, so an estimate is never mistaken for a measurement.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from nkisim.arguments import check_count, check_kind
from nkisim.costmodel import constants as K
from nkisim.costmodel.costs import operations
from nkisim.costmodel.dma import spill_transfer
from nkisim.costmodel.scheduler import Schedule, TaskGraph
from nkisim.emulator.kernel import Run
from nkisim.emulator.trace import HBM, Trace
from nkisim.vocabulary import DMA, DMA_QUEUE_LANES, ENGINES, IDLE_OPCODES, LANES, NO_QUEUE, PSEUDO_OPCODES

SOURCE_ESTIMATE = "trn2 cost model (estimate)"
SOURCE_MEASURED = "trn2 hardware (measured)"
# Summary fields Neuron 2.34 deprecates -> the replacement holding the same value (see from_explorer_json)
RENAMED_FIELDS = {"mbu_estimated_percent": "hbm_mbu_estimated_percent",
                  "hbm_read_bytes": "instruction_hbm_read_bytes", "hbm_write_bytes": "instruction_hbm_write_bytes"}
DMA_SIZE_FIELDS = ("static_dma_size", "software_dynamic_dma_size", "hardware_dynamic_dma_size")


@dataclass
class ProfileSummary:
    """The Summary of one kernel launch, as Neuron Explorer reports it: from the cost model (`estimate`,
    `profile_model`), a trn2 capture (`from_explorer_json`) or a publication. An estimate's total_time is the span of
    the kernel's instructions; a profile's spans the whole launch, setup included: compare the two through
    `with_launch_setup()`. `source` says which it is, in every printout."""

    kernel: str
    source: str
    total_time: float | None                      # s
    lnc: int = 1
    # s: Explorer's total_exec_time, "from the earliest non-setup instruction or DMA packet to the latest, excluding
    # setup/teardown opcodes" (SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary); total_time runs
    # from the runtime's start to its stop notification. An estimate models the span: both are its total_time.
    total_exec_time: float | None = None
    engine_active_time: dict[str, float] = field(default_factory=dict)  # s, per lane in LANES
    # the two DMA times as Explorer's Summary defines them (SDK:tools/neuron-explorer/profile-schema-reference.rst)
    dma_active_time: float | None = None          # s, "at least one DMA packet is transferring"
    dma_packet_time: float | None = None          # s, every engine's packets, overlaps "added together"
    hbm_read_bytes: int | None = None
    hbm_write_bytes: int | None = None
    dma_transfer_count: int | None = None
    dma_transfer_total_bytes: int | None = None
    mbu_estimated_percent: float | None = None    # vs ONE HBM stack, as the profiler computes it
    instruction_counts: dict[tuple[str, str], int] = field(default_factory=dict)   # (engine, opcode)
    instruction_time: dict[tuple[str, str], float] = field(default_factory=dict)   # s, summed
    sbuf_peak_bytes_per_partition: int | None = None
    bound_by: str | None = None                   # lane that bounds the kernel ("DMA/GpSimd", "Scalar", ...)
    critical_path_time: dict[str, float] = field(default_factory=dict)  # s on the critical path, per lane
    engine_operations: dict[str, float] = field(default_factory=dict)   # roofline work per engine (costs.operations)
    total_time_range: tuple[float, float] | None = None   # s: every uncertain constant at its fast / slow end
    timeline: Schedule | None = None              # only for estimates
    notes: tuple[str, ...] = ()

    # ---- derived fields ---------------------------------------------------------------------
    def _percent(self, t: float | None) -> float | None:
        return None if t is None or not self.total_time else 100.0 * t / self.total_time

    @property
    def engine_active_time_percent(self) -> dict[str, float]:
        return {k: self._percent(v) for k, v in self.engine_active_time.items()}

    @property
    def dma_active_time_percent(self) -> float | None:
        return self._percent(self.dma_active_time)

    @property
    def effective_dma_throughput(self) -> float | None:
        """Bytes moved by DMA per second of kernel time (B/s), as the published figures define it."""
        if self.dma_transfer_total_bytes is None or not self.total_time:
            return None
        return self.dma_transfer_total_bytes / self.total_time

    @property
    def total_time_us(self) -> float | None:
        return None if self.total_time is None else self.total_time * 1e6

    def range_text(self) -> str:
        """"  (range 140.2 .. 170.1 µs over uncertain constants)", or "" without a range."""
        if self.total_time_range is None:
            return ""
        lo, hi = self.total_time_range
        return f"  (range {lo * 1e6:,.1f} .. {hi * 1e6:,.1f} µs over uncertain constants)"

    def opcode_time(self, opcode: str, engine: str | None = None) -> float:
        """Summed instruction time (s) of one opcode, optionally on one engine."""
        return sum(t for (e, o), t in self.instruction_time.items() if o == opcode and engine in (None, e))

    def opcode_count(self, opcode: str, engine: str | None = None) -> int:
        return sum(n for (e, o), n in self.instruction_counts.items() if o == opcode and engine in (None, e))

    def with_launch_setup(self) -> "ProfileSummary":
        """This summary as a whole-launch profile reports it. Explorer's total_time runs "from the runtime's start
        to its stop notification", setup included, and total_exec_time is the kernel's span; dma_active_time counts
        the setup's own packets, and MBU and the percentages are shares of total_time
        (SDK:tools/neuron-explorer/profile-schema-reference.rst, Summary). An estimate models the span only: this
        adds the modeled launch setup of its LNC (constants rows launch_preamble*, launch_setup_dma). A profile
        that already spans the launch (measured, published, or this method's result) is returned as it is.
        Compare a published total_time through this; a published total_exec_time with the estimate's span."""
        if self.source != SOURCE_ESTIMATE or self.total_exec_time != self.total_time:
            return self
        span = self.total_time
        setup = K.launch_preamble_s(self.lnc)
        total = span + setup
        total_range = None
        if self.total_time_range is not None:      # the setup's own range added at either end
            ends = []
            for end, t in zip(("low", "high"), self.total_time_range):
                with K.overridden(K.varied(end)):
                    ends.append(t + K.launch_preamble_s(self.lnc))
            total_range = tuple(ends)
        mbu = self.mbu_estimated_percent
        return dataclasses.replace(
            self, total_time=total, total_exec_time=span, total_time_range=total_range,
            dma_active_time=(self.dma_active_time or 0.0) + K.LAUNCH_SETUP_DMA_S,
            mbu_estimated_percent=None if mbu is None else mbu * span / total,
            notes=(*self.notes, f"total_time spans the launch: the modeled span + {setup * 1e6:.2f} µs of modeled launch "
                                f"setup at LNC={self.lnc} ({K.LAUNCH_SETUP_DMA_S * 1e6:.2f} µs of it DMA-active)"))

    # ---- printing -------------------------------------------------------------------------
    def table(self) -> str:
        def us(t):
            return "—" if t is None else f"{t * 1e6:,.1f} µs"

        def pct(p):
            return "—" if p is None else f"{p:.1f}%"

        lines = [f"{self.kernel}  [{self.source}]  LNC={self.lnc}",
                 f"  total_time               {us(self.total_time)}{self.range_text()}",
                 *([f"  total_exec_time          {us(self.total_exec_time)}  (setup and teardown excluded)"]
                   if self.total_exec_time not in (None, self.total_time) else []),
                 f"  bound by                 {self.bound_by or '—'}{bound_by_meaning(self.bound_by)}"]
        cores = self.lnc > 1
        if cores:
            lines += [f"  {self.lnc} cores: 'active' is the time an engine is busy on at least one core;",
                      f"  instruction counts and opcode times are summed over the {self.lnc} cores"]
        active_head, count_head = ("active (any core)", "instructions (sum)") if cores else ("active", "instructions")
        width, count_width = max(12, len(active_head)), max(13, len(count_head))
        lines.append(f"  {'engine':<10} {active_head:>{width}} {'active %':>9} {count_head:>{count_width}}")
        counts_by_engine: dict[str, int] = {}
        for (e, _), n in self.instruction_counts.items():
            counts_by_engine[e] = counts_by_engine.get(e, 0) + n
        for lane in LANES:
            active = self.dma_active_time if lane == DMA else self.engine_active_time.get(lane)
            n = counts_by_engine.get(lane)
            if active is None and n is None:
                continue
            lines.append(f"  {lane:<10} {us(active):>{width}} {pct(self._percent(active)):>9} "
                         f"{'—' if n is None else n:>{count_width}}")
        mb = lambda b: "—" if b is None else f"{b / 1e6:,.2f} MB"  # noqa: E731
        thr = self.effective_dma_throughput
        lines += [f"  dma_active_time_percent  {pct(self.dma_active_time_percent)}",
                  f"  HBM read / write         {mb(self.hbm_read_bytes)} / {mb(self.hbm_write_bytes)}"
                  f"  ({self.dma_transfer_count if self.dma_transfer_count is not None else '—'} DMA transfers)",
                  f"  effective DMA throughput {'—' if thr is None else f'{thr / 1e9:,.0f} GB/s'}",
                  f"  mbu_estimated_percent    {pct(self.mbu_estimated_percent)}"
                  f"  (of one HBM stack, {K.HBM_STACK_BYTES_PER_S / 1e9:.0f} GB/s)",
                  f"  SBUF peak / partition    "
                  + ("—" if self.sbuf_peak_bytes_per_partition is None
                     else f"{self.sbuf_peak_bytes_per_partition / 1024:,.1f} KiB of "
                          f"{K.SBUF_BYTES_PER_PARTITION // 1024} KiB")]
        keys = sorted(set(self.instruction_counts) | set(self.instruction_time))
        if keys:
            time_head = "time (sum of cores)" if cores else "time"
            lines.append(f"  {'engine':<10} {'opcode':<16} {'count':>6} {time_head:>{max(12, len(time_head))}}")
            for e, o in keys:
                n = self.instruction_counts.get((e, o), "—")
                lines.append(f"  {e:<10} {o:<16} {n:>6} {us(self.instruction_time.get((e, o))):>{max(12, len(time_head))}}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers for reports (µs, %, GB/s)."""
        thr = self.effective_dma_throughput
        return {"kernel": self.kernel, "source": self.source, "lnc": self.lnc,
                "total_time_us": self.total_time_us,
                "total_exec_time_us": None if self.total_exec_time is None else self.total_exec_time * 1e6,
                "dma_active_time_percent": self.dma_active_time_percent,
                "mbu_estimated_percent": self.mbu_estimated_percent,
                "effective_dma_gbps": None if thr is None else thr / 1e9,
                "activate_time_us": self.opcode_time("ACTIVATE") * 1e6 if self.instruction_time else None,
                "vector_tensor_tensor_time_us":
                    self.opcode_time("TENSOR_TENSOR", "Vector") * 1e6 if self.instruction_time else None,
                "bound_by": self.bound_by}

    # ---- constructors ---------------------------------------------------------------------
    @classmethod
    def from_schedule(cls, trace: Trace, sched: Schedule, sbuf_peak_bytes: int | None = None) -> "ProfileSummary":
        total = sched.total_time
        working = [s for s in sched.slots if s.opcode not in IDLE_OPCODES]   # not a barrier's wait or a receive
        transfers = [s for s in working if s.engine == DMA]
        hbm_read = hbm_write = 0
        for ins in (*trace.instructions, *map(spill_transfer, trace.spills)):   # spills move HBM bytes too
            if ins.dma is not None:
                src, dst = ins.dma.direction.split("->")
                hbm_read += ins.dma.nbytes if src in HBM else 0
                hbm_write += ins.dma.nbytes if dst in HBM else 0
        instruction_time: dict[tuple[str, str], float] = {}
        for s in sched.slots:
            if s.opcode not in PSEUDO_OPCODES:
                key = (s.engine, s.opcode)
                instruction_time[key] = instruction_time.get(key, 0.0) + s.duration
        on_path: dict[str, float] = {}
        path = sched.critical_path
        for s, after in zip(path, [*path[1:], None]):
            # a pipelined Tensor instruction's span overlaps the next one it issued before: count it
            # until the next step of the path starts, so the path never holds more than the total
            held = s.duration if after is None else min(s.duration, max(0.0, after.start - s.start))
            on_path[s.lane] = on_path.get(s.lane, 0.0) + held
        work: dict[str, float] = {}
        for ins in trace.instructions:
            if ins.dma is None:
                work[ins.engine] = work.get(ins.engine, 0.0) + operations(ins)
        if sbuf_peak_bytes is None and trace.sbuf_peak_bytes_per_partition:
            sbuf_peak_bytes = max(trace.sbuf_peak_bytes_per_partition.values())
        return cls(
            kernel=trace.kernel, source=SOURCE_ESTIMATE, total_time=total, total_exec_time=total, lnc=trace.lnc,
            engine_active_time={e: _union((s.start, s.end) for s in working if s.engine == e) for e in ENGINES
                                if any(s.engine == e for s in working)},
            dma_active_time=_union(iv for s in transfers for iv in s.engine_intervals()),
            dma_packet_time=sum(end - start for s in transfers for start, end in s.engine_intervals()),
            hbm_read_bytes=hbm_read, hbm_write_bytes=hbm_write,
            dma_transfer_count=len(transfers), dma_transfer_total_bytes=sum(s.nbytes for s in transfers),
            mbu_estimated_percent=(100.0 * (hbm_read + hbm_write) / total / K.HBM_STACK_BYTES_PER_S
                                   if total else None),
            instruction_counts=trace.counts(), instruction_time=instruction_time,
            sbuf_peak_bytes_per_partition=sbuf_peak_bytes,
            bound_by=max(on_path, key=on_path.get) if on_path else None,
            critical_path_time=on_path, engine_operations=work, timeline=sched)

    @classmethod
    def from_explorer_json(cls, data: str | Path | dict, kernel: str | None = None, lnc: int = 1) -> "ProfileSummary":
        """Parse `neuron-explorer view --output-format summary-json` output (a path, JSON text or dict).

        Accepted layouts: `{<profile key>: {fields}}` (what nki-library's harness reads), `{"summary":
        [{fields}]}` (the json format's summary list), or the flat field dict. The `*_percent` fields
        are shares of 1 in summary-json (`_percent_of`).
        Neuron 2.34 deprecates some Summary fields (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/
        about-neuron/announcements/neuron2.x/announce-intent-eos-explorer-summary-fields.html): where an
        old field is missing, its replacement is read (`RENAMED_FIELDS`), and the bytes moved are the sum
        of the static, software- and hardware-dynamic DMA sizes.
        """
        if isinstance(data, str) and "{" in data:
            data = _json_in(data)
        elif isinstance(data, (str, Path)):
            data = _json_in(Path(data).read_text())
        fields = dict(_summary_fields(data))
        for old_name, new_name in RENAMED_FIELDS.items():
            if fields.get(old_name) is None and fields.get(new_name) is not None:
                fields[old_name] = fields[new_name]
        # 2.34's notice: dma_transfer_total_bytes is "0 in many profiles"; the per-kind sizes replace it then too
        if not fields.get("dma_transfer_total_bytes") and any(fields.get(k) for k in DMA_SIZE_FIELDS):
            fields["dma_transfer_total_bytes"] = sum(int(fields.get(k) or 0) for k in DMA_SIZE_FIELDS)
        if "total_time" not in fields:
            raise ValueError("not a Neuron Explorer summary: no 'total_time' field "
                             f"(found {sorted(fields)[:8]}...)")
        num = functools.partial(_number, fields, float)
        count = functools.partial(_number, fields, int)
        total = num("total_time")
        if total is None or total <= 0:
            raise ValueError(f"Neuron Explorer summary: total_time must be a positive time in seconds, got "
                             f"{fields['total_time']!r}")
        active = {e: num(f"{e.lower()}_engine_active_time") for e in ENGINES
                  if fields.get(f"{e.lower()}_engine_active_time") is not None}
        counts = {(e, "*"): count(f"{e.lower()}_engine_instruction_count") for e in ENGINES
                  if fields.get(f"{e.lower()}_engine_instruction_count") is not None}
        times: dict[tuple[str, str], float] = {}
        if fields.get("activate_instruction_count") is not None:
            counts[("Scalar", "ACTIVATE")] = count("activate_instruction_count")
            if ("Scalar", "*") in counts:       # the Scalar engine's other instructions, when its total is given
                counts[("Scalar", "*")] -= counts[("Scalar", "ACTIVATE")]
            if fields.get("activate_instruction_time") is not None:
                times[("Scalar", "ACTIVATE")] = num("activate_instruction_time")
        mbu = _percent_of(num("mbu_estimated_percent"))
        dma_active = num("dma_active_time")
        if dma_active is None and fields.get("dma_active_time_percent") is not None:
            dma_active = _percent_of(num("dma_active_time_percent")) / 100.0 * total
        return cls(
            kernel=kernel or str(fields.get("kernel_name", fields.get("neff_name", "kernel"))),
            source=SOURCE_MEASURED, total_time=total, total_exec_time=num("total_exec_time"), lnc=lnc,
            engine_active_time=active,
            dma_active_time=dma_active, dma_packet_time=num("dma_packet_time"),
            hbm_read_bytes=count("hbm_read_bytes"), hbm_write_bytes=count("hbm_write_bytes"),
            dma_transfer_count=count("dma_transfer_count"),
            dma_transfer_total_bytes=count("dma_transfer_total_bytes"),
            mbu_estimated_percent=mbu,
            instruction_counts={k: v for k, v in counts.items() if v},
            instruction_time=times,
            notes=("engine instruction counts not split by opcode in summary-json ('*')",) if counts else ())


def _percent_of(share: float | None) -> float | None:
    """A summary-json `*_percent` field in percent. summary-json stores a share of 1 (a trn2 capture, SDK 2.32:
    dma_active_time_percent 0.2574 = dma_active_time 5.746 us / total_time 22.32 us; nki-library's harness
    multiplies mbu_estimated_percent by 100), though the schema's unit column says percent: a value above 1 is
    taken as already in percent."""
    return None if share is None else share * 100.0 if share <= 1.0 else share


def estimate(trace: Trace, sbuf_peak_bytes: int | None = None, with_range: bool = True) -> ProfileSummary:
    """The trn2 cost model's profile of one instruction trace (labelled as an estimate), with the
    total time's range over the uncertain constants (`constants.varied`) unless `with_range=False`."""
    check_kind("nkisim.estimate", "trace", trace, Trace, "a nkisim Trace (run.trace, nkisim.last_trace())",
               "; for a Run pass run.trace and run.sbuf_peak_bytes" if isinstance(trace, Run) else "")
    if sbuf_peak_bytes is not None:
        check_count("nkisim.estimate", "sbuf_peak_bytes", sbuf_peak_bytes)
    check_kind("nkisim.estimate", "with_range", with_range, bool, "True or False")
    graph = TaskGraph(trace)   # one task graph for the three schedules
    summary = ProfileSummary.from_schedule(trace, graph.schedule(), sbuf_peak_bytes)
    if with_range:
        ends = []
        for end in ("low", "high"):
            with K.overridden(K.varied(end)):
                ends.append(graph.total_time())
        summary.total_time_range = (min(ends), max(ends))
    return summary


def bound_by_meaning(lane: str | None) -> str:
    """What a "bound by" lane means, for printouts: a DMA queue is data movement, not its issuing engine."""
    queue = {lane_name: q for q, lane_name in DMA_QUEUE_LANES.items()}.get(lane or "")
    if queue is None:
        return ""
    if queue == NO_QUEUE:
        return "  (data movement on the queue of prebuilt descriptors, dge_mode.none)"
    return f"  (data movement on the DMA queue whose descriptors {queue} issues; not {queue} compute)"


def _union(intervals: Iterable[tuple[float, float]]) -> float:
    """Length of the union of (start, end) intervals."""
    total, end = 0.0, float("-inf")
    for lo, hi in sorted(intervals):
        if lo >= end:
            total += hi - lo
            end = hi
        elif hi > end:
            total += hi - end
            end = hi
    return total


def _number(fields: dict[str, Any], kind: type, name: str) -> Any:
    """A summary field as `kind` (None if absent); a value that is not a number names its field."""
    value = fields.get(name)
    if value is None:
        return None
    try:
        return kind(float(value)) if kind is int else kind(value)
    except (TypeError, ValueError):
        raise ValueError(f"Neuron Explorer summary: field {name!r} must be a number, got {value!r}") from None


def _json_in(text: str) -> Any:
    """The JSON document in `neuron-explorer` output: from its first line that opens one (a log line may come
    first)."""
    starts = [i for i, line in enumerate(text.splitlines(keepends=True)) if line.lstrip().startswith(("{", "["))]
    if not starts:
        raise ValueError("not a Neuron Explorer summary-json: no line opens a JSON document")
    offset = sum(len(line) for line in text.splitlines(keepends=True)[:starts[0]])
    return json.loads(text[offset:])


def _summary_fields(data: Any) -> dict[str, Any]:
    if isinstance(data, dict) and "total_time" in data:
        return data
    if isinstance(data, dict) and isinstance(data.get("summary"), list) and data["summary"]:
        return data["summary"][0]
    if isinstance(data, dict) and len(data) >= 1:
        inner = [v for v in data.values() if isinstance(v, dict) and "total_time" in v]
        if inner:
            return inner[0]
    raise ValueError("not a Neuron Explorer summary-json: expected {key: {total_time, ...}}, "
                     "{'summary': [...]} or a flat field dict")
