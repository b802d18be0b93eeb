"""Tuning tracks as data: for each lesson step, the change, the metric it moves, that metric before
and after, and the bound engine before and after.

A `Setup` is one thing to measure: a kernel launch profiled by the trn2 cost model (`launch`), or a
probe of any kind returning a ProfileSummary (a kernel beside its neighbours) or a number (an
emulator quantity, such as the largest batch that compiles). A `Step` pairs a before and an after
setup with a `Metric` and says what kind of step it is; `measure_track` measures each setup once
(the after of one step is often the before of the next) and `track_text` / `show_track` render the
results. Nothing here is measured on hardware: every number is a cost-model estimate or an emulator
count, and says which.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from nkisim.arguments import check_kind
from nkisim.profile.summary import SOURCE_ESTIMATE, ProfileSummary

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SOURCE_EMULATOR = "nkisim emulator (what compiles)"

# What a step is. A CHANGE must move its metric by at least MIN_EFFECT_PERCENT. The other kinds are
# declared by their lesson's first paragraph in these words (tests/lessons/test_track_table.py).
CHANGE = "change"
BASELINE = "baseline"                          # where a series starts: nothing before it
ENABLING = "enabling step"                     # makes something possible; `enables` names it
CORRECTNESS = "correctness step"               # makes something right; `enables` names what
NO_CHANGE_BY_DESIGN = "no change by design"    # a variant shown to leave the metric where it was
KINDS = (CHANGE, BASELINE, ENABLING, CORRECTNESS, NO_CHANGE_BY_DESIGN)
MIN_EFFECT_PERCENT = 3.0


@dataclass(frozen=True)
class Metric:
    """A number read off a ProfileSummary (or given directly by a probe), and which way is better."""

    name: str
    unit: str
    read: Callable[[ProfileSummary], float]
    lower_is_better: bool = True


TOTAL_TIME = Metric("total_time", "µs", lambda s: s.total_time_us)
EFFECTIVE_DMA = Metric("effective DMA throughput", "GB/s", lambda s: s.effective_dma_throughput / 1e9,
                       lower_is_better=False)


@dataclass(frozen=True, eq=False)
class Setup:
    """One configuration to measure; `measure()` returns a ProfileSummary or a plain number."""

    label: str
    measure: Callable[[], Any]
    source: str = SOURCE_ESTIMATE   # the source of a plain number (a summary carries its own)


def launch(label: str, kernel: Any, *args: Any, lnc: int | None = None, **kwargs: Any) -> Setup:
    """One launch of `kernel` (at `lnc`, by default 1), priced by the trn2 cost model from a dry-run trace
    (on every backend)."""
    from nkisim.emulator.runner import refuse_shadowed_options
    from nkisim.profile.profiling import model_of_launch

    refuse_shadowed_options("nkisim.profile.steps.launch", kernel, lnc=lnc)
    return Setup(label, lambda: model_of_launch(kernel, args, kwargs, 1 if lnc is None else lnc))


@dataclass(frozen=True)
class Step:
    """One lesson's change: `before` -> `after` on `metric`. A BASELINE has no before; an ENABLING or
    CORRECTNESS step names what it `enables` and may have no metric at all."""

    lesson: int
    change: str
    kernel: str
    after: Setup | None
    before: Setup | None = None
    metric: Metric | None = TOTAL_TIME
    kind: str = CHANGE
    enables: str = ""

    def __post_init__(self) -> None:
        where = f"Step(lesson {self.lesson}, {self.change!r})"
        if self.kind not in KINDS:
            raise ValueError(f"{where}: kind {self.kind!r} is not one of {KINDS}")
        if self.kind in (CHANGE, NO_CHANGE_BY_DESIGN) and (self.before is None or self.after is None
                                                           or self.metric is None):
            raise ValueError(f"{where}: a {self.kind!r} step needs a before, an after and a metric")
        if self.kind == BASELINE and (self.before is not None or self.after is None):
            raise ValueError(f"{where}: a baseline has an after and nothing before it")
        if self.kind in (ENABLING, CORRECTNESS) and not self.enables:
            raise ValueError(f"{where}: an {self.kind} must name what it enables")
        if self.after is not None and self.metric is None:
            raise ValueError(f"{where}: a measured setup needs the metric to read from it")


@dataclass(frozen=True)
class Track:
    name: str
    title: str
    setup: str          # the shape and context every step is measured in, unless its row says otherwise
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Reading:
    value: float
    bound_by: str | None
    source: str


@dataclass(frozen=True)
class StepResult:
    step: Step
    before: Reading | None
    after: Reading | None

    @property
    def effect_percent(self) -> float | None:
        """(after - before) / before in percent; None without both."""
        if self.before is None or self.after is None:
            return None
        return 100.0 * (self.after.value / self.before.value - 1.0)

    @property
    def improvement(self) -> float | None:
        """How many times better the metric got (lower-is-better metrics: before / after; infinite when a
        lower-is-better metric falls to zero, as the engine time of work the step removes)."""
        if self.before is None or self.after is None:
            return None
        better, worse = ((self.before.value, self.after.value) if self.step.metric.lower_is_better
                         else (self.after.value, self.before.value))
        return math.inf if worse == 0 else better / worse

    @property
    def moves(self) -> bool:
        """Its metric moved by at least MIN_EFFECT_PERCENT."""
        effect = self.effect_percent
        return effect is not None and abs(effect) >= MIN_EFFECT_PERCENT

    def to_dict(self) -> dict[str, Any]:
        s, m = self.step, self.step.metric
        return {"lesson": s.lesson, "change": s.change, "kernel": s.kernel, "kind": s.kind, "enables": s.enables or None,
                "metric": m.name if m else None, "unit": m.unit if m else None,
                "lower_is_better": m.lower_is_better if m else None,
                "setup_before": s.before.label if s.before else None, "setup_after": s.after.label if s.after else None,
                "before": self.before.value if self.before else None, "after": self.after.value if self.after else None,
                "effect_percent": self.effect_percent,
                "bound_before": self.before.bound_by if self.before else None,
                "bound_after": self.after.bound_by if self.after else None,
                "source": (self.after or self.before).source if (self.after or self.before) else None}


def _read(setup: Setup, metric: Metric, cache: dict[int, Any]) -> Reading:
    if id(setup) not in cache:
        cache[id(setup)] = setup.measure()
    measured = cache[id(setup)]
    if isinstance(measured, ProfileSummary):
        return Reading(float(metric.read(measured)), measured.bound_by, measured.source)
    return Reading(float(measured), None, setup.source)


def measure_track(track: Track, upto: int | None = None) -> list[StepResult]:
    """Every step of `track` (of lessons <= `upto`), each setup measured once."""
    check_kind("measure_track", "track", track, Track, "a nkisim.profile.steps.Track")
    cache: dict[int, Any] = {}
    results = []
    for step in track.steps:
        if upto is not None and step.lesson > upto:
            continue
        before = _read(step.before, step.metric, cache) if step.before else None
        after = _read(step.after, step.metric, cache) if step.after else None
        results.append(StepResult(step, before, after))
    return results


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "—"
    text = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:,.1f}"
    return f"{text} {unit}" if unit else text


def _values(r: StepResult) -> str:
    """"63.3 -> 48.5 µs", "— -> 2,514 µs" or "—"."""
    if r.step.metric is None:
        return "—"
    return (f"{_number(r.before.value if r.before else None)} -> "
            f"{_number(r.after.value if r.after else None, r.step.metric.unit)}")


def _bounds(r: StepResult) -> str:
    if not any(x is not None and x.bound_by for x in (r.before, r.after)):
        return ""   # not a profile (an emulator count), or nothing measured
    before = (r.before.bound_by or "—") if r.before else "—"
    return f"{before} -> {(r.after.bound_by or '—') if r.after else '—'}"


def track_text(track: Track, results: list[StepResult], upto: int | None = None) -> str:
    """The table as text, one line per step (a second line names a metric other than the total time,
    and a step's kind); the current lesson's rows marked."""
    lines = [f"{track.title}: {track.setup}",
             f"{'lesson':>6}  {'change':<44} {'before -> after':>24} {'effect':>8}  bound by (before -> after)"]
    for r in results:
        s = r.step
        effect = "" if r.effect_percent is None else f"{r.effect_percent:+.1f}%"
        marker = "   <- this lesson" if upto is not None and s.lesson == upto else ""
        lines.append(f"{s.lesson:>6}  {s.change:<44} {_values(r):>24} {effect:>8}  {_bounds(r)}{marker}")
        notes = []
        if s.metric is not None and s.metric is not TOTAL_TIME:
            notes.append(f"metric: {s.metric.name}")
        if s.kind != CHANGE:
            notes.append(s.kind + (f": {s.enables}" if s.enables else ""))
        if notes:
            lines.append(f"{'':>8}({'; '.join(notes)})")
    lines.append("sources: " + "; ".join(dict.fromkeys(x.source for r in results for x in (r.before, r.after) if x)))
    return "\n".join(lines)


def show_track(track: Track, results: list[StepResult], upto: int | None = None) -> "Figure":
    """How many times better each step made its metric (log axis; the grey band is the ±3% a step must
    leave), the current lesson's steps in full colour; beside each bar, its numbers and bound engines."""
    import matplotlib.pyplot as plt

    from nkisim.profile.style import WIDTH_IN

    rows = [r for r in results if r.improvement is not None]
    if not rows:
        raise ValueError(f"show_track: no step of {track.title} has both a before and an after to compare")
    fig, (ax, notes) = plt.subplots(1, 2, figsize=(WIDTH_IN, 0.42 * len(rows) + 1.4), sharey=True,
                                    gridspec_kw={"width_ratios": (1, 1)})
    labels = [f"{r.step.lesson} · {r.step.change}" for r in rows]
    finite = [r.improvement for r in rows if math.isfinite(r.improvement)]
    cap = 4 * max(finite + [25.0])   # a metric that fell to zero is drawn to here
    factors = [min(r.improvement, cap) for r in rows]
    current = [upto is None or r.step.lesson == upto for r in rows]
    ax.barh(labels, [f - 1 for f in factors], left=1, color=["#3a73b5" if c else "#a9c4e4" for c in current])
    ax.axvspan(1 / (1 + MIN_EFFECT_PERCENT / 100), 1 + MIN_EFFECT_PERCENT / 100, color="#dddddd", zorder=0)
    ax.set_xscale("log")
    ax.set_xlim(min(min(factors), 0.95) / 1.2, max(max(factors), 1.05) * 1.5)
    ax.invert_yaxis()
    ax.set_xlabel("times better on the step's own metric\n(log scale; 1 = no change)")
    for y, r in enumerate(rows):
        m = r.step.metric
        lines = [f"{_number(r.before.value, m.unit)} → {_number(r.after.value, m.unit)}"
                 f"{'' if r.step.kind == CHANGE else '  (' + r.step.kind + ')'}"]
        if m is not TOTAL_TIME:
            lines.append(m.name)
        if r.after.bound_by is not None:
            lines.append(f"bound by {r.before.bound_by or '—'} → {r.after.bound_by}")
        notes.text(0, y, "\n".join(lines), va="center", fontsize=7)
    notes.set_axis_off()
    sources = "; ".join(dict.fromkeys(r.after.source for r in rows))
    fig.suptitle(f"{track.title}: what each step moved\n{sources}", fontsize=9)
    fig.tight_layout()
    return fig
