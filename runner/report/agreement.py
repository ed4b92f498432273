"""Runs of the same points in several folders: does a later run agree with the first one? Pure.

The check behind "run the same trials twice (another order, a pooled engine, another day): the figures must agree
within their spread". Each shared point (engine identity, workload, params, concurrency) compares the later
run's median with the first folder's. Two tests, since ratios alone cannot tell spread from shift: a sign test
(a shift moves most points one way) and the share of later figures inside the first run's range, against the
share equal distributions give (a sample lands inside the range of k others with probability (k-1)/(k+1)).
"""
from __future__ import annotations

import math
from typing import Optional

import pandas as pd

from runner.report.samples import POINT, better_ratio, ok_trial_values

BAND = 0.10  # "within 10 %" of the first run's median


def agreement_rows(trials: pd.DataFrame, samples: pd.DataFrame, sources: list[str]) -> pd.DataFrame:
    """One row per (later source, shared point): its median against the first source's (`ratio` > 1: the later
    run better), how many of its samples lie inside the first run's range, and the chance of each if they agree."""
    columns = ["source", "reference", *POINT, "n_reference", "n_later", "ratio", "inside", "p_inside"]
    if len(sources) < 2 or not len(trials) or not len(samples):
        return pd.DataFrame(columns=columns)
    ok = ok_trial_values(trials, samples)
    reference = sources[0]
    ref = {key: g.value for key, g in ok[ok.source == reference].groupby(POINT)}
    rows = []
    for source in sources[1:]:
        for key, g in ok[ok.source == source].groupby(POINT):
            base = ref.get(key)
            if base is None or not len(base):
                continue
            better = better_ratio(key[1], float(g.value.median()), float(base.median()))
            k = len(base)
            rows.append({"source": source, "reference": reference, **dict(zip(POINT, key)), "n_reference": k,
                         "n_later": len(g), "ratio": better,
                         "inside": int(g.value.between(base.min(), base.max()).sum()), "p_inside": (k - 1) / (k + 1)})
    return pd.DataFrame(rows, columns=columns)


def binomial_two_sided(successes: int, n: int, p: float = 0.5) -> float:
    """Exact two-sided binomial p-value (the outcomes no more likely than the one seen)."""
    if n == 0:
        return 1.0
    probs = [math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(n + 1)]
    seen = probs[successes]
    return min(1.0, sum(q for q in probs if q <= seen * (1 + 1e-9)))


def sign_test(above: int, below: int) -> tuple[float, Optional[str]]:
    """Two-sided sign test over ratios above and below 1: its p-value and how the report writes it ("p = 0.42";
    None where so few ratios could never give p < 0.05)."""
    p = binomial_two_sided(above, above + below)
    if binomial_two_sided(0, above + below) >= 0.05:
        return p, None
    return p, f"p {'< 0.01' if p < 0.01 else f'= {p:.2f}'}"


def binomial_range(n: int, p: float, *, level: float = 0.95) -> tuple[int, int]:
    """The central range of a Binomial(n, p) count holding at least `level` of its mass."""
    probs = [math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(n + 1)]
    tail = (1 - level) / 2
    low, acc = 0, 0.0
    while low < n and acc + probs[low] <= tail:
        acc += probs[low]
        low += 1
    high, acc = n, 0.0
    while high > 0 and acc + probs[high] <= tail:
        acc += probs[high]
        high -= 1
    return low, high


def agreement_line(rows: pd.DataFrame) -> str:
    """One sentence for a later source: within the band, shift (sign test), inside the range against chance."""
    n = len(rows)
    if not n:
        return ""
    within = int(((rows.ratio - 1).abs() <= BAND).sum())
    above = int((rows.ratio > 1).sum())
    below = int((rows.ratio < 1).sum())
    p_shift, p_text = sign_test(above, below)
    inside, samples = int(rows.inside.sum()), int(rows.n_later.sum())
    p_inside = float((rows.p_inside * rows.n_later).sum() / samples)
    low, high = binomial_range(samples, p_inside)  # the samples share their reference: an approximation
    expected = "as equal distributions give" if low <= inside <= high else (
        "fewer than equal distributions give: they differ" if inside < low else "more than equal distributions give")
    shift = "no shift" if p_shift >= 0.05 else ("the later run better" if above > below else "the later run worse")
    test = f"sign test {p_text}: {shift}" if p_text else "too few for a sign test to show a shift"
    return (f"{rows.source.iloc[0]} against {rows.reference.iloc[0]} at {n} shared points: {within} within "
            f"{BAND:.0%} of its median (median ratio {rows.ratio.median():.3f}, {rows.ratio.min():.3f}–"
            f"{rows.ratio.max():.3f}; > 1: {rows.source.iloc[0]} better); better at {above}, worse at {below} "
            f"({test}); {inside} of {samples} figures inside the reference's range at their point, {low}–{high} "
            f"expected if the two agree ({expected})")
