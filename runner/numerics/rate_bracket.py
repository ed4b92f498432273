"""Where a latency target stops being met along offered rate: the bracket around it, whether it is tight enough,
and the rates to measure inside it. Pure (no pandas, no engine).

A point is one offered rate of one line (an arm at one workload point without the rate axes), with each targeted
figure's repeats in ms; `inf` (saturation) sits at the request throughput it measured. A point whose probes were
decided (runner.numerics.rate_probe: every repeat's verdict met, or every one missed) meets the targets as
decided; an undecided one when the median over repeats of every figure is within its limit (as the report's SLO
sections judge it). Scanning
up the rates, the bracket is [the last point meeting the targets, the first one missing them]. It is tight enough
when its width is within `precision` of its lower end, or when it is within the noise: the crossing's 95 %
interval (a seeded bootstrap of the line's repeats, as the report gives it) is at least as wide as the bracket,
so rates between would not narrow what the repeats can say.

The first rates below saturation come from its measured throughput: no rate above what the engine served with
every request at once is sustained, so the crossing lies below it, and on an engine whose queue only forms near
its capacity just below it. The saturation ladder's top rung sits halfway into the precision band under that
throughput (a probe meeting there closes the bracket at once, with room for the throughput's spread over runs);
each next rung is the lowest rate whose bracket up to the rung above is within `precision` (a probe meeting
there closes it too). Only when every rung misses does the search go wide: a low rate and rates between.
"""
from __future__ import annotations

import enum
import json
import math
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from runner.numerics.stats import interpolate_crossing
from runner.slo import Slo

# Workload params that set the offered rate: a line of points is everything else.
# max_duration_s, stop_when_decided: the rate search's cap on a probe's length (sweep.rate_search.probe_s) and its
# stop rule, set on the probes below saturation of a line alike.
RATE_AXES = ("request_rate", "time_scale", "max_duration_s", "stop_when_decided")
BOOTSTRAP = 1000  # draws of the crossing's interval
LADDER_RUNGS = 2  # rates just under saturation tried before the search goes wide (more with rates_per_stage)


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
    samples: dict[str, tuple[float, ...]]  # target name (runner.slo.Target.name) → the repeats' figures in ms
    verdicts: tuple[str, ...] = ()  # the repeats' probe verdicts (met | missed | undecided; none: not judged)

    @property
    def saturation(self) -> bool:
        return math.isinf(self.offered)

    @property
    def decided(self) -> Optional[str]:
        """"met" or "missed" where every repeat's probe said so; None: undecided (or not judged)."""
        kinds = set(self.verdicts)
        return next(iter(kinds)) if len(kinds) == 1 and kinds <= {"met", "missed"} else None

    @property
    def repeats(self) -> int:
        return max((len(v) for v in self.samples.values()), default=0)

    def median(self, name: str) -> float:
        return _median(self.samples.get(name, ()))

    def meets(self, slo: Slo) -> bool:
        if self.decided is not None:
            return self.decided == "met"
        return all(self.median(name) <= limit for name, limit in slo.limits.items())  # NaN does not meet


class BracketState(enum.StrEnum):
    """Where a line's search stands."""

    OPEN = "open"  # a bracket wider than the precision and the noise: rates between to measure
    PRECISE = "precise"  # the bracket is within `precision` of its lower end
    NOISE = "within the noise"  # the crossing's interval over the repeats is as wide as the bracket
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
    interval: tuple[float, float] = (math.nan, math.nan)  # the crossing's 95 % bootstrap interval (with both ends)

    def text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"[{self.low.x:.3g}, {self.high.x:.3g}] req/s, {self.state}"
        return str(self.state)


def ordered(points: Sequence[RatePoint]) -> list[RatePoint]:
    """Up the rates, saturation last whatever its measured throughput."""
    return sorted(points, key=lambda p: (p.saturation, p.offered))


def crossing(xs: Sequence[float], medians: Sequence[dict[str, float]], slo: Slo) -> tuple[float, int]:
    """(highest x meeting the targets, index of the first point that misses; −1 when none misses), linearly
    interpolated between the two points around the first miss. NaN when the first point misses."""
    for i, figures in enumerate(medians):
        if all(figures[n] <= limit for n, limit in slo.limits.items()):
            continue
        if i == 0:
            return math.nan, 0
        before = medians[i - 1]
        x0, x1 = xs[i - 1], max(xs[i], xs[i - 1])
        crossings = [interpolate_crossing(x0, before[n], x1, figures[n], limit)
                     for n, limit in slo.limits.items() if not figures[n] <= limit and not math.isnan(figures[n])]
        return (min(crossings) if crossings else x0), i
    return xs[-1], -1


def crossing_interval(xs: Sequence[float], samples: Sequence[dict[str, Sequence[float]]], slo: Slo, *,
                      rng: np.random.Generator, draws: int = BOOTSTRAP) -> tuple[float, float]:
    """The crossing's 95 % interval: each point's repeats resampled independently, "below the lowest rate" counted
    as that rate."""
    values = []
    for _ in range(draws):
        resampled = [{n: _nanmedian(rng.choice(s[n], size=len(s[n]))) if len(s[n]) else math.nan
                      for n in slo.limits} for s in samples]
        value, _ = crossing(xs, resampled, slo)
        values.append(xs[0] if math.isnan(value) else value)
    lo, hi = np.percentile(values, [2.5, 97.5])
    return float(lo), float(hi)


def _nanmedian(values: np.ndarray) -> float:
    """np.nanmedian's value (NaN where no value is a number) without its per-call cost: the bootstrap takes one per
    point, figure and draw, a few values each."""
    kept = sorted(v for v in values.tolist() if not math.isnan(v))
    if not kept:
        return math.nan
    mid = len(kept) // 2
    return float(kept[mid]) if len(kept) % 2 else (kept[mid - 1] + kept[mid]) / 2


def within_noise(interval: tuple[float, float], low_x: float, high_x: float) -> bool:
    """Whether the crossing's interval is as wide as the bracket: rates between cannot narrow it."""
    return interval[1] - interval[0] >= max(high_x, low_x) - low_x


def bracket(points: Sequence[RatePoint], slo: Slo, *, precision: float, seed: int = 0) -> Bracket:
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
        interval = crossing_interval([p.x for p in line], [p.samples for p in line], slo,
                                     rng=np.random.default_rng(seed))
        if max(point.x, low.x) - low.x <= precision * low.x:
            state = BracketState.PRECISE
        elif within_noise(interval, low.x, point.x):
            state = BracketState.NOISE
        else:
            state = BracketState.OPEN
        return Bracket(state=state, low=low, high=point, interval=interval, **common)
    # Every point meets: saturation is the ceiling; without it (its trials failed) there is nothing above to find.
    return Bracket(state=BracketState.SATURATION_MEETS if line[-1].saturation else BracketState.NO_POINTS,
                   low=line[-1], **common)


def ceil_rate(rate: float) -> float:
    """The smallest rate of three significant digits at or above `rate`."""
    rounded = round_rate(rate)
    if rounded >= rate or not rate > 0:
        return rounded
    return round_rate(rounded + 10.0 ** (math.floor(math.log10(rounded)) - 2))


def rate_within(high: float, *, precision: float) -> float:
    """The lowest rate (three significant digits) whose bracket up to `high` is within `precision` of it: a probe
    meeting the target there closes the bracket."""
    rate = ceil_rate(high / (1.0 + precision))
    while high - rate > precision * rate:  # the float division's last bit
        rate = ceil_rate(rate * (1.0 + 1e-9))
    return rate


def saturation_ladder(saturation_x: float, *, precision: float, count: int = 1) -> list[float]:
    """The rates just under saturation's measured throughput, top down: the first halfway into the precision band
    (`x / (1 + precision / 2)`), each next the lowest within `precision` of the one above; max(LADDER_RUNGS,
    count) of them. Empty where saturation measured nothing."""
    if not saturation_x > 0 or math.isinf(saturation_x):
        return []
    rungs = [round_rate(saturation_x / (1.0 + precision / 2.0))]
    while len(rungs) < max(LADDER_RUNGS, count):
        rungs.append(rate_within(rungs[-1], precision=precision))
    return rungs


def rates_between(low: float, high: float, *, count: int) -> list[float]:
    """`count` rates spaced evenly in log between two rates, rounded (geometric: a bracket may span decades)."""
    if not (0 < low < high) or math.isinf(high):
        return []
    ratio = high / low
    rates = [round_rate(low * ratio ** ((i + 1) / (count + 1))) for i in range(count)]
    return sorted({r for r in rates if low < r < high})
