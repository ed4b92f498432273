"""Intervals over repeats and the rule that turns two arms' samples into a verdict. Pure (numpy only).

Every interval is a seeded percentile bootstrap (95 % by default) over per-repeat
values: the same data and seed give the same interval. A ratio is of medians,
oriented so that > 1 means the first arm is better; its interval resamples each
arm's repeats independently and takes the ratio of the two resampled medians.
A bootstrap of 3 repeats resamples only 3 values and comes out narrower than the
data allow (two fresh runs of the CPU demo: a winner at 1.18x [1.03-1.37] in one, a
tie in the other), so the ratio's interval is widened to two small-sample intervals
at the same level where they are wider: Welch's t interval on log values (the ratio
of geometric means; t quantiles for few repeats are large) and the distribution-free
one, the order statistics of the pairwise ratios a_i / b_j that the Mann-Whitney
test gives (Moses' interval for a shift, on log values; with 3 or 4 repeats per arm
the whole range of pairwise ratios, which for 3 against 3 covers only 90 %).
A winner needs the whole ratio interval outside the tie band and at least
MIN_REPEATS repeats per arm; anything less is said as such.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

MIN_REPEATS = 3
TIE_BAND = 0.02
LEVEL = 0.95
N_BOOT = 4000


@dataclass(frozen=True, kw_only=True)
class Interval:
    """A point estimate with its bootstrap interval."""

    point: float
    lo: float
    hi: float
    level: float = LEVEL

    def ratio_text(self) -> str:
        """'1.25× [1.22–1.28]'."""
        return f"{self.point:.2f}× [{self.lo:.2f}–{self.hi:.2f}]"

    def bounds_text(self, fmt: str = ".3g", scale: float = 1.0) -> str:
        return f"{self.lo * scale:{fmt}}–{self.hi * scale:{fmt}}"


def _clean(values: Sequence[float]) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    return array[np.isfinite(array)]


def _resampled_medians(values: np.ndarray, rng: np.random.Generator, n_boot: int) -> np.ndarray:
    picks = rng.integers(0, len(values), size=(n_boot, len(values)))
    return np.median(values[picks], axis=1)


def _percentiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(draws, [tail, 100 - tail])
    return float(lo), float(hi)


def median_interval(values: Sequence[float], *, seed: int = 0, n_boot: int = N_BOOT,
                    level: float = LEVEL) -> Optional[Interval]:
    """The median of the repeats and its bootstrap interval (None without values)."""
    array = _clean(values)
    if not len(array):
        return None
    rng = np.random.default_rng(seed)
    lo, hi = _percentiles(_resampled_medians(array, rng, n_boot), level)
    return Interval(point=float(np.median(array)), lo=lo, hi=hi, level=level)


def _rank_sum_counts(m: int, n: int) -> list[int]:
    """How many of the C(m+n, m) orderings of two samples (sizes m, n; no ties) give each Mann-Whitney U."""
    table = {(0, j): [1] for j in range(n + 1)}
    for i in range(1, m + 1):
        table[(i, 0)] = [1]
        for j in range(1, n + 1):
            # The largest value is from the first sample (it beats all j of the second) or from the second.
            shifted = [0] * j + table[(i - 1, j)]
            rest = table[(i, j - 1)]
            size = max(len(shifted), len(rest))
            table[(i, j)] = [(shifted[u] if u < len(shifted) else 0) + (rest[u] if u < len(rest) else 0)
                             for u in range(size)]
    return table[(m, n)]


def pairwise_ratio_bounds(first: Sequence[float], second: Sequence[float], *, higher_is_better: bool,
                          level: float = LEVEL) -> Optional[tuple[float, float]]:
    """The distribution-free interval of the ratio (first better when > 1): the c-th smallest and c-th largest
    of the pairwise ratios, c from the Mann-Whitney null distribution at `level` (the whole range where the
    sample sizes cannot reach it). None without positive values on both sides."""
    a, b = _clean(first), _clean(second)
    a, b = a[a > 0], b[b > 0]
    if not len(a) or not len(b):
        return None
    logs = np.subtract.outer(np.log(a), np.log(b)).ravel()
    logs = np.sort(logs if higher_is_better else -logs)
    counts = np.asarray(_rank_sum_counts(len(a), len(b)), dtype=float)
    below = np.cumsum(counts) / counts.sum()  # P(U <= u)
    tail = (1 - level) / 2
    c = max(1, int(np.searchsorted(below, tail, side="right")))  # the largest c with P(U <= c - 1) <= tail
    c = min(c, (len(logs) + 1) // 2)
    return float(np.exp(logs[c - 1])), float(np.exp(logs[len(logs) - c]))


@functools.lru_cache(maxsize=4096)
def _t_quantile(p: float, df: float) -> float:
    """Student's t quantile for p > 0.5 (bisection on the CDF, integrated numerically: numpy only). Kept per
    (p, df): a report asks the same few (n − 1 repeats at one level) thousands of times, 62 integrations each."""
    from math import exp, lgamma, pi, sqrt

    scale = exp(lgamma((df + 1) / 2) - lgamma(df / 2)) / sqrt(df * pi)

    def cdf(t: float) -> float:
        grid = np.linspace(0.0, t, 4001)
        density = scale * (1 + grid ** 2 / df) ** (-(df + 1) / 2)
        return 0.5 + float(np.sum((density[1:] + density[:-1]) / 2 * np.diff(grid)))

    lo, hi = 0.0, 1.0
    while cdf(hi) < p:
        lo, hi = hi, hi * 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < p else (lo, mid)
    return (lo + hi) / 2


def welch_ratio_bounds(first: Sequence[float], second: Sequence[float], *, higher_is_better: bool,
                       level: float = LEVEL) -> Optional[tuple[float, float]]:
    """Welch's t interval of the ratio of geometric means (first better when > 1); None below 2 positive values
    a side."""
    a, b = _clean(first), _clean(second)
    a, b = np.log(a[a > 0]), np.log(b[b > 0])
    if len(a) < 2 or len(b) < 2:
        return None
    diff = float(a.mean() - b.mean()) if higher_is_better else float(b.mean() - a.mean())
    va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
    se = float(np.sqrt(va + vb))
    if se == 0:
        return float(np.exp(diff)), float(np.exp(diff))
    df = se ** 4 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    half = _t_quantile(1 - (1 - level) / 2, df) * se
    return float(np.exp(diff - half)), float(np.exp(diff + half))


def ratio_interval(first: Sequence[float], second: Sequence[float], *, higher_is_better: bool, seed: int = 0,
                   n_boot: int = N_BOOT, level: float = LEVEL) -> Optional[Interval]:
    """Ratio of medians, first over second when higher is better (second over first otherwise): > 1 means
    `first` is better. None when either side has no positive median."""
    a, b = _clean(first), _clean(second)
    if not len(a) or not len(b) or np.median(a) <= 0 or np.median(b) <= 0:
        return None
    rng = np.random.default_rng(seed)
    ma, mb = _resampled_medians(a, rng, n_boot), _resampled_medians(b, rng, n_boot)
    with np.errstate(divide="ignore", invalid="ignore"):
        draws = ma / mb if higher_is_better else mb / ma
    draws = draws[np.isfinite(draws)]
    point = float(np.median(a) / np.median(b) if higher_is_better else np.median(b) / np.median(a))
    lo, hi = _percentiles(draws, level) if len(draws) else (float("nan"), float("nan"))
    for bounds in (pairwise_ratio_bounds(a, b, higher_is_better=higher_is_better, level=level),
                   welch_ratio_bounds(a, b, higher_is_better=higher_is_better, level=level)):
        if bounds is not None:
            lo, hi = min(lo, bounds[0]), max(hi, bounds[1])
    return Interval(point=point, lo=lo, hi=hi, level=level)


def beats(ratio: Optional[Interval], *, tie_band: float = TIE_BAND) -> bool:
    """The whole interval lies above the tie band: the first arm is better beyond noise."""
    return ratio is not None and ratio.lo > 1 + tie_band


def interpolate_crossing(x0: float, y0: float, x1: float, y1: float, target: float) -> float:
    """Where the straight line through (x0, y0) and (x1, y1) reaches `target` (y0 within, y1 past it)."""
    if y1 == y0:
        return float(x0)
    return float(x0 + (target - y0) * (x1 - x0) / (y1 - y0))


def mean_interval(values: Sequence[float], *, level: float = LEVEL) -> Optional[Interval]:
    """The mean of the repeats and its Student t interval (None without values; NaN bounds with one value)."""
    array = _clean(values)
    if not len(array):
        return None
    mean = float(array.mean())
    if len(array) < 2:
        return Interval(point=mean, lo=float("nan"), hi=float("nan"), level=level)
    half = _t_quantile(1 - (1 - level) / 2, len(array) - 1) * float(array.std(ddof=1)) / float(np.sqrt(len(array)))
    return Interval(point=mean, lo=mean - half, hi=mean + half, level=level)
