"""Side-by-side tables of modeled vs reference (published or measured) profile figures.

Used by benchmarks/calibration.py (model vs published), benchmarks/hardware_validation.py (model vs
a trn2 run) and the book's calibration page. The reference column always names its source.
"""
from __future__ import annotations

from dataclasses import dataclass

from nkisim.profile.summary import ProfileSummary

BAND = 0.15   # the target: modeled total_time within +-15% of the published figure

# (key of ProfileSummary.to_dict(), label, unit)
METRICS = (("total_time_us", "total_time", "µs"),
           ("total_exec_time_us", "total_exec_time", "µs"),
           ("dma_active_time_percent", "dma_active_time_percent", "%"),
           ("mbu_estimated_percent", "MBU", "%"),
           ("effective_dma_gbps", "effective DMA throughput", "GB/s"),
           ("activate_time_us", "Scalar ACTIVATE time", "µs"),
           ("vector_tensor_tensor_time_us", "Vector TENSOR_TENSOR time", "µs"),
           ("bound_by", "bound by", ""))


@dataclass(frozen=True)
class Row:
    config: str
    metric: str
    reference: float | str | None
    modeled: float | str | None
    unit: str
    banded: bool = False       # checked against BAND (numbers) or by kind (bound_by)

    @property
    def delta_percent(self) -> float | None:
        if isinstance(self.reference, (int, float)) and isinstance(self.modeled, (int, float)) and self.reference:
            return 100.0 * (self.modeled - self.reference) / self.reference
        return None

    @property
    def ok(self) -> bool | None:
        if not self.banded:
            return None
        if self.metric == "bound by":
            return str(self.modeled or "").split("/")[0] == str(self.reference).split("/")[0]
        return self.delta_percent is not None and abs(self.delta_percent) <= 100 * BAND


def compare(config: str, modeled: ProfileSummary, reference: dict, banded: tuple[str, ...] = ("total_time_us", "bound_by")) -> list[Row]:
    """One Row per metric present in `reference` (a `ProfileSummary.to_dict()`-style dict of a whole-launch
    profile). An estimate is compared as that profile reads it, `modeled.with_launch_setup()`: total_time with the
    modeled launch setup, total_exec_time the span, the percentages shares of total_time. Where the reference has
    Explorer's total_exec_time (the span the model estimates) the band checks it and total_time is shown
    unbanded; without it the band checks total_time against the estimate's span plus setup."""
    got = modeled.with_launch_setup().to_dict()
    if "total_time_us" in banded and reference.get("total_exec_time_us") is not None:
        banded = tuple("total_exec_time_us" if key == "total_time_us" else key for key in banded)
    rows = []
    for key, label, unit in METRICS:
        if reference.get(key) is None:
            continue
        value = got.get(key)
        rows.append(Row(config, label, reference[key], value, unit, key in banded))
    return rows


def failures(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.ok is False]


def format_table(rows: list[Row], reference_label: str, markdown: bool = False) -> str:
    """Plain-text (or Markdown) table: config, metric, reference, model, delta, in band."""
    def fmt(v, unit):
        if v is None:
            return "—"
        if isinstance(v, str):
            return v
        return f"{v:,.1f} {unit}".strip()

    header = ["config", "metric", reference_label, "trn2 cost model (estimate)", "delta", "check"]
    body = []
    for r in rows:
        d = r.delta_percent
        check = {None: "", True: f"ok (±{BAND:.0%})" if r.metric != "bound by" else "ok", False: "MISS"}[r.ok]
        body.append([r.config, r.metric, fmt(r.reference, r.unit), fmt(r.modeled, r.unit),
                     "" if d is None else f"{d:+.1f}%", check])
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(header, *body)]
    out = ["  ".join(h.ljust(w) for h, w in zip(header, widths)), "  ".join("-" * w for w in widths)]
    out += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in body]
    return "\n".join(out)
