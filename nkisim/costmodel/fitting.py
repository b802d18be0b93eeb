"""Fit the cost model's uncertain DMA constants on published figures, and check them held out.

At most a few constants are fitted, each inside the range its row states (`BOUNDS`); the objective is
the worst target miss in units of its tolerance (total_time: 5% relative, dma_active: 4 points, a
variant published as "no change": 3 points), so a value <= 1 means every target is met. The search
is a coarse-to-fine grid (the objective is a max of piecewise-linear schedule outputs, so gradients
do not help). Leave-one-out: fit on one kernel's figures, predict the other's.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

from nkisim.costmodel import constants as K

# The fitted rows; each is searched over the range its constants.py row states (one source for both).
FITTED = ("dma_engine_bandwidth", "dma_transfer_fixed", "hbm_write_efficiency")
BOUNDS = {c.name: (min(c.low, c.high), max(c.low, c.high)) for c in K.TABLE if c.name in FITTED}
# metric -> (kind, tolerance): the targets of the calibration. vs_baseline_pct is a variant's change
# against its kernel, for the variants published as "no change"
TOLERANCE = {"total_time_us": ("relative", 0.05), "dma_active_time_percent": ("points", 4.0),
             "vs_baseline_pct": ("points", 3.0)}

Params = dict[str, float]
Predictions = dict[str, dict[str, float]]      # kernel -> metric -> value


@dataclass(frozen=True)
class Target:
    kernel: str
    metric: str          # a TOLERANCE key
    published: float

    def miss(self, modeled: float) -> float:
        """How far `modeled` is from the published figure, in units of the tolerance."""
        kind, tol = TOLERANCE[self.metric]
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


def fit(model: Model, targets: list[Target], bounds: dict[str, tuple[float, float]] = BOUNDS,
        points: int = 7, rounds: int = 3) -> Fit:
    """The parameters (within `bounds`) minimising the worst target miss; ties -> smaller squared miss."""
    if not targets:
        raise ValueError("fit needs at least one published target")
    names = sorted(bounds)
    box = {n: bounds[n] for n in names}
    best: tuple[tuple[float, float], Params] | None = None
    for _ in range(rounds):
        grids = [_linspace(*box[n], points) for n in names]
        for values in itertools.product(*grids):
            params = dict(zip(names, values))
            predicted = model(params)
            misses = [t.miss(predicted[t.kernel][t.metric]) for t in targets]
            score = (max(misses), sum(m * m for m in misses))
            if best is None or score < best[0]:
                best = (score, params)
        # zoom in: the next grid spans two steps around the best point, clipped to the bounds
        box = {n: _around(best[1][n], box[n], bounds[n], points) for n in names}
    params = best[1]
    return Fit(params, best[0][0], model(params))


def _linspace(lo: float, hi: float, n: int) -> list[float]:
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def _around(x: float, box: tuple[float, float], bounds: tuple[float, float], n: int) -> tuple[float, float]:
    step = (box[1] - box[0]) / (n - 1)
    return max(bounds[0], x - step), min(bounds[1], x + step)
