"""Tensor-engine throttling on trn2: the documented dI/dt utilization limit.

SDK:tools/neuron-explorer/overview-summary-page.rst, "Understanding throttling": the hardware caps how
much of the Tensor engine's peak (its BF16-adjusted maximum FLOPs) a kernel can use. On Trn2 the cap
starts at roughly 50% when work begins and ramps to full over about the first 3 us; if utilization
drops below 50% over any ~3 us window (an idle gap), the cap re-engages and the next burst again
starts at roughly 50%.

The model, per physical core's Tensor lane, at each instruction's start t:
- an instruction's utilization is its FLOPs over what the PE array does at the bf16 peak in its
  interval (a bf16 [128, 128] x [128, 512] matmul 1; fp32 inputs, four passes, 1/4; a 64-row
  contraction 1/2), at most 1;
- the cap re-engages at the lane's first instruction, and at t when the lane's utilization over
  [t - window, t] is below the floor and that window lies wholly after the last re-engagement (a
  window reaching back before it still holds the idle time that caused it);
- the cap at t is floor + (1 - floor) x (t - re-engagement) / ramp, at most 1;
- an instruction whose utilization exceeds the cap runs at the cap: its interval is stretched by
  utilization / cap (the cap at its start: the ramp moves little within one instruction).
So work below the floor is never slowed (the docs' fp32 matmul walkthrough shows none), and a bursty
bf16 kernel pays up to 2x during each burst's first microseconds.
"""
from __future__ import annotations

from collections import deque

from nkisim.costmodel import constants as K


class Throttle:
    """The utilization cap of one Tensor lane, fed its instructions in start order."""

    def __init__(self) -> None:
        self._engaged_at: float | None = None
        self._recent: deque[tuple[float, float, float]] = deque()   # (start, end, utilization) in the window

    def interval(self, start: float, nominal: float, utilization: float) -> float:
        """The lane time of an instruction starting at `start` that takes `nominal` seconds unthrottled."""
        floor, window = K.TENSOR_THROTTLE_FLOOR, K.TENSOR_THROTTLE_WINDOW_S
        since = start - window
        while self._recent and self._recent[0][1] <= since:
            self._recent.popleft()
        if self._engaged_at is None or (since >= self._engaged_at and self._used(since, start) < floor):
            self._engaged_at = start
        cap = min(1.0, floor + (1.0 - floor) * (start - self._engaged_at) / K.TENSOR_THROTTLE_RAMP_S)
        stretched = nominal * max(1.0, utilization / cap)
        if stretched > 0:
            self._recent.append((start, start + stretched, utilization * nominal / stretched))
        return stretched

    def _used(self, since: float, now: float) -> float:
        """Mean utilization of the lane over [since, now]."""
        return sum(u * (min(end, now) - max(start, since)) for start, end, u in self._recent) / (now - since)
