"""Fit the cost model's uncertain DMA constants on published figures, and check them held out.

At most a few constants are fitted, each inside the range its row states (`BOUNDS`); the objective is
the target misses in units of their tolerance, worst first (the workshop's GELU figures: total_time 5% relative,
dma_active_time_percent 4 points, a variant published as "no change" 3 points; the development set's
kernels: 15% relative, `DEV_SET_TOLERANCE`), so a value <= 1 means every target is met. The search is
a compass (pattern) search in the box of the bounds: from the box's centre, try a step up and down
along each constant, move to the best improvement, halve the step when none improves. The objective
is a max of piecewise-linear schedule outputs, so gradients do not help, and a grid over four
constants would cost thousands of schedules of the development set's kernels.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from nkisim.costmodel import constants as K

# The fitted rows; each is searched over the range its constants.py row states (one source for both).
FITTED = ("dma_engine_bandwidth", "dma_transfer_fixed", "hbm_write_efficiency")
BOUNDS = {c.name: (min(c.low, c.high), max(c.low, c.high)) for c in K.TABLE if c.name in FITTED}
# metric -> (kind, tolerance): the targets of the GELU calibration. vs_baseline_pct is a variant's change
# against its kernel, for the variants published as "no change"
TOLERANCE = {"total_time_us": ("relative", 0.05), "dma_active_time_percent": ("points", 4.0),
             "vs_baseline_pct": ("points", 3.0)}
DEV_SET_TOLERANCE = ("relative", 0.15)   # every figure of the development set (issue: within ±15%)
SMALLEST_STEP = 1 / 128                  # of each bound's width: where the search stops
MISS_RESOLUTION = 2                      # decimals of a miss (in tolerance units) the search tells apart

Params = dict[str, float]
Predictions = dict[str, dict[str, float]]      # kernel -> metric -> value


@dataclass(frozen=True)
class Target:
    kernel: str
    metric: str
    published: float
    tolerance: tuple[str, float] | None = None   # (kind, size); None: TOLERANCE[metric]

    def miss(self, modeled: float) -> float:
        """How far `modeled` is from the published figure, in units of the tolerance."""
        kind, tol = self.tolerance or TOLERANCE[self.metric]
        delta = modeled / self.published - 1 if kind == "relative" else modeled - self.published
        return abs(delta) / tol


@dataclass(frozen=True)
class Fit:
    params: Params
    misfit: float                 # worst miss over the fitted targets (<= 1: all within tolerance)
    predictions: Predictions


def misfit(targets: list[Target], predicted: Predictions) -> float:
    return max(t.miss(predicted[t.kernel][t.metric]) for t in targets)


class Model:
    """Predictions of a cost model at given constants, cached by parameter values."""

    def __init__(self, evaluate: Callable[[], Predictions]) -> None:
        self._evaluate = evaluate
        self._cache: dict[tuple, Predictions] = {}

    def __call__(self, params: Params) -> Predictions:
        key = tuple(sorted((k, round(v, 15)) for k, v in params.items()))
        if key not in self._cache:
            with K.overridden(params):
                self._cache[key] = self._evaluate()
        return self._cache[key]


def fit(model: Model, targets: list[Target], bounds: dict[str, tuple[float, float]] = BOUNDS) -> Fit:
    """The parameters (within `bounds`) minimising the worst target miss, then the next worst, and so on
    (misses compared to `MISS_RESOLUTION` decimals): a figure no fitted constant can move (a miss of another
    mechanism) then does not decide the fit, the figures the constants do move do."""
    if not targets:
        raise ValueError("fit needs at least one published target")
    names = sorted(bounds)

    def params_at(unit: dict[str, float]) -> Params:
        return {n: bounds[n][0] + unit[n] * (bounds[n][1] - bounds[n][0]) for n in names}

    def score(unit: dict[str, float]) -> tuple[float, ...]:
        predicted = model(params_at(unit))
        return tuple(sorted((round(t.miss(predicted[t.kernel][t.metric]), MISS_RESOLUTION) for t in targets),
                            reverse=True))

    best = {n: 0.5 for n in names}
    best_score, step = score(best), 0.25
    while step >= SMALLEST_STEP:
        trials = [{**best, n: min(1.0, max(0.0, best[n] + sign * step))} for n in names for sign in (-1, 1)]
        scored = min(((score(t), i, t) for i, t in enumerate(trials)), key=lambda s: (s[0], s[1]))
        if scored[0] < best_score:
            best_score, best = scored[0], scored[2]
        else:
            step /= 2
    params = params_at(best)
    return Fit(params, misfit(targets, model(params)), model(params))
