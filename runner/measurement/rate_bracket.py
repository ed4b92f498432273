"""Where a latency target stops being met along offered rate: the bracket around it, whether it is tight enough,
and the rates to measure inside it. Pure (no pandas, no engine).

A point is one offered rate of one line (an arm at one workload point without the rate axes), with each targeted
figure's repeats in ms; `inf` (saturation) sits at the request throughput it measured. A point meets the targets
when the median over repeats of every figure is within its limit (as the report's SLO sections judge it). Scanning
up the rates, the bracket is [the last point meeting the targets, the first one missing them]. It is tight enough
when its width is within `precision` of its lower end, or when the figure changes across it by no more than its
repeats spread at either end below saturation (the noise: rates between could not be told apart).
"""
from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import Optional, Sequence

# Workload params that set the offered rate: a line of points is everything else.
RATE_AXES = ("request_rate", "time_scale")


def line_params(params_json: str) -> str:
    """The params without the rate axes: what makes one line of points against rate."""
    params = json.loads(params_json or "{}")
    return json.dumps({k: v for k, v in params.items() if k not in RATE_AXES}, sort_keys=True)


def round_rate(rate: float) -> float:
    """Three significant digits: a rate the search proposes names one trial id however it was reached."""
    return float(f"{rate:.3g}")


def _median(values: Sequence[float]) -> float:
    clean = sorted(v for v in values if not math.isnan(v))
    if not clean:
        return math.nan
    mid = len(clean) // 2
    return clean[mid] if len(clean) % 2 else (clean[mid - 1] + clean[mid]) / 2


@dataclass(frozen=True, kw_only=True)
class RatePoint:
    offered: float  # req/s as planned; inf: saturation
    x: float  # its place on the rate axis: the offered rate, or at saturation the measured throughput
    samples: dict[str, tuple[float, ...]]  # target name → the repeats' figures in ms

    @property
    def saturation(self) -> bool:
        return math.isinf(self.offered)

    def median(self, name: str) -> float:
        return _median(self.samples.get(name, ()))

    def spread(self, name: str) -> float:
        clean = [v for v in self.samples.get(name, ()) if not math.isnan(v)]
        return max(clean) - min(clean) if clean else math.nan

    def meets(self, slo: dict[str, float]) -> bool:
        return all(self.median(name) <= limit for name, limit in slo.items())  # NaN does not meet


class BracketState(enum.StrEnum):
    """Where a line's search stands."""

    OPEN = "open"  # a bracket wider than the precision and the noise: rates between to measure
    PRECISE = "precise"  # the bracket is within `precision` of its lower end
    NOISE = "within the noise"  # the figure changes across the bracket less than its repeats spread
    SATURATION_MEETS = "saturation meets"  # every measured rate, saturation included, meets the targets
    LOWEST_MISSES = "lowest misses"  # even the lowest measured rate misses them
    NO_POINTS = "no points"  # nothing measured (every trial of the line failed)


@dataclass(frozen=True, kw_only=True)
class Bracket:
    state: BracketState
    low: Optional[RatePoint] = None  # the last point meeting the targets
    high: Optional[RatePoint] = None  # the first point missing them
    lowest: Optional[RatePoint] = None
    saturation_x: float = math.nan  # the throughput saturation measured (NaN: not measured)

    def text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"[{self.low.x:.3g}, {self.high.x:.3g}] req/s, {self.state}"
        return str(self.state)


def ordered(points: Sequence[RatePoint]) -> list[RatePoint]:
    """Up the rates, saturation last whatever its measured throughput."""
    return sorted(points, key=lambda p: (p.saturation, p.offered))


def _noise_bound(low: RatePoint, high: RatePoint, slo: dict[str, float]) -> bool:
    """Whether every missed target's figure rises across the bracket by no more than its repeats' spread (at
    saturation the spread is its queue's, not noise at a rate: only the ends at a rate count)."""
    missed = [n for n, limit in slo.items() if not high.median(n) <= limit]
    ends = [p for p in (low, high) if not p.saturation]
    if not missed or not ends:
        return False
    for name in missed:
        rise = high.median(name) - low.median(name)
        spread = max(p.spread(name) for p in ends)
        if math.isnan(rise) or math.isnan(spread) or not rise <= spread:
            return False
    return True


def bracket(points: Sequence[RatePoint], slo: dict[str, float], *, precision: float) -> Bracket:
    """The bracket around the highest rate meeting `slo` and whether it needs rates between."""
    line = ordered(points)
    if not line:
        return Bracket(state=BracketState.NO_POINTS)
    saturation_x = next((p.x for p in line if p.saturation), math.nan)
    common = dict(lowest=line[0], saturation_x=saturation_x)
    for i, point in enumerate(line):
        if point.meets(slo):
            continue
        if i == 0:
            return Bracket(state=BracketState.LOWEST_MISSES, high=point, **common)
        low = line[i - 1]
        if max(point.x, low.x) - low.x <= precision * low.x:
            state = BracketState.PRECISE
        elif _noise_bound(low, point, slo):
            state = BracketState.NOISE
        else:
            state = BracketState.OPEN
        return Bracket(state=state, low=low, high=point, **common)
    # Every point meets: saturation is the ceiling; without it (its trials failed) there is nothing above to find.
    return Bracket(state=BracketState.SATURATION_MEETS if line[-1].saturation else BracketState.NO_POINTS,
                   low=line[-1], **common)


def rates_between(low: float, high: float, *, count: int) -> list[float]:
    """`count` rates spaced evenly in log between two rates, rounded (geometric: a bracket may span decades)."""
    if not (0 < low < high) or math.isinf(high):
        return []
    ratio = high / low
    rates = [round_rate(low * ratio ** ((i + 1) / (count + 1))) for i in range(count)]
    return sorted({r for r in rates if low < r < high})
