"""Intervals over repeats and the rule that turns two arms' samples into a verdict. Pure (numpy only).

Every interval is a seeded percentile bootstrap (95 % by default) over per-repeat
values: the same data and seed give the same interval. A ratio is of medians,
oriented so that > 1 means the first arm is better; its interval resamples each
arm's repeats independently and takes the ratio of the two resampled medians.
A winner needs the whole ratio interval outside the tie band and at least
MIN_REPEATS repeats per arm; anything less is said as such.
"""
from __future__ import annotations

import enum
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


class Outcome(enum.Enum):
    WINNER = "winner"
    TIE = "tie within noise"
    TOO_FEW = "not enough repeats"
    ONLY_ONE = "only arm measured"


@dataclass(frozen=True, kw_only=True)
class Comparison:
    """The leader against the runner-up: what can be said, the ratio (> 1: leader better) and the repeats."""

    outcome: Outcome
    ratio: Optional[Interval]
    n_min: int


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
    return Interval(point=point, lo=lo, hi=hi, level=level)


def beats(ratio: Optional[Interval], *, tie_band: float = TIE_BAND) -> bool:
    """The whole interval lies above the tie band: the first arm is better beyond noise."""
    return ratio is not None and ratio.lo > 1 + tie_band


def compare(leader: Sequence[float], runner_up: Optional[Sequence[float]], *, higher_is_better: bool,
            tie_band: float = TIE_BAND, min_repeats: int = MIN_REPEATS, seed: int = 0,
            n_boot: int = N_BOOT) -> Comparison:
    """Leader (the better median) against the runner-up: winner, tie within noise, or too few repeats."""
    a = _clean(leader)
    if runner_up is None:
        return Comparison(outcome=Outcome.ONLY_ONE if len(a) >= min_repeats else Outcome.TOO_FEW, ratio=None,
                          n_min=len(a))
    b = _clean(runner_up)
    n_min = min(len(a), len(b))
    # Below two repeats a bootstrap has nothing to resample: the ratio alone is shown.
    ratio = ratio_interval(a, b, higher_is_better=higher_is_better, seed=seed, n_boot=n_boot) if n_min >= 2 else None
    if n_min < min_repeats:
        return Comparison(outcome=Outcome.TOO_FEW, ratio=ratio, n_min=n_min)
    outcome = Outcome.WINNER if beats(ratio, tie_band=tie_band) else Outcome.TIE
    return Comparison(outcome=outcome, ratio=ratio, n_min=n_min)


def interpolate_crossing(x0: float, y0: float, x1: float, y1: float, target: float) -> float:
    """Where the straight line through (x0, y0) and (x1, y1) reaches `target` (y0 within, y1 past it)."""
    if y1 == y0:
        return float(x0)
    return float(x0 + (target - y0) * (x1 - x0) / (y1 - y0))
