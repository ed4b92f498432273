"""When a rate probe is decided: the stop rule of an open-loop probe against a TTFT percentile target. Pure.

A probe offers `planned` requests at one rate; the question is whether the `percentile` of their TTFT is within
`target_s`. While it runs, each sent request is either answered (its first token came: its TTFT is known) or
waiting (its TTFT is at least its age so far). From those, the percentile's distribution-free interval (order
statistics of a binomial count; a waiting request counts as its age for the lower end and as unbounded for the
upper end) decides the probe:

- met: the interval's upper end is within the target, on at least `min_requests` requests;
- missed: its lower end is above the target on at least `min_requests` requests (a handful of first requests
  says little: they are not independent draws, an engine's first requests after a pause run slow), or so many
  requests already took longer than the target (answered late, or still waiting past it: the queue growing) that
  the percentile over all `planned` requests cannot be within it whatever the rest do — the figure the full probe
  would have measured, whatever its remaining requests did;
- undecided: neither (the probe runs on to its planned end; the rate search repeats it only where it bounds the
  answer).

A decided probe sends no further requests; those already sent finish, so its figures cover exactly the requests
it sent up to the stop. Each end of the interval is a one-sided bound at (1 + CONFIDENCE) / 2: with CONFIDENCE
0.9, a 95 % bound each side, which at p99 needs 299 answered requests before "met" can be said (fewer and the
upper end is unbounded: no quantile estimate from fewer requests can say more without assuming a shape).
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

CONFIDENCE = 0.9  # two-sided: each end a one-sided 95 % bound


class ProbeDecision(enum.StrEnum):
    MET = "met"
    MISSED = "missed"
    UNDECIDED = "undecided"


@dataclass(frozen=True, kw_only=True)
class ProbeVerdict:
    decision: ProbeDecision
    lo_s: float  # the percentile's interval, seconds (0: no lower bound yet; inf: no upper bound yet)
    hi_s: float
    requests: int  # requests judged (sent)
    reason: str = ""

    @property
    def decided(self) -> bool:
        return self.decision is not ProbeDecision.UNDECIDED

    def interval_text(self) -> str:
        hi = "∞" if math.isinf(self.hi_s) else f"{self.hi_s * 1000:.0f}"
        return f"[{self.lo_s * 1000:.0f}, {hi}] ms"


def _log_pmf(n: int, k: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return (math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
            + k * math.log(p) + (n - k) * math.log1p(-p))


@lru_cache(maxsize=4096)
def order_bounds(n: int, q: float, confidence: float = CONFIDENCE) -> tuple[int, int]:
    """(l, u), 1-based order statistics X_(l) ≤ ξ_q ≤ X_(u) each with probability ≥ (1 + confidence) / 2;
    l = 0: no lower bound, u = n + 1: no upper bound. P(X_(l) ≤ ξ) = P(B ≥ l), P(X_(u) ≥ ξ) = P(B ≤ u − 1),
    B ~ Binomial(n, q)."""
    side = (1.0 + confidence) / 2.0
    cdf, cumulative = [], 0.0
    for k in range(n + 1):
        cumulative += math.exp(_log_pmf(n, k, q))
        cdf.append(min(cumulative, 1.0))  # cdf[k] = P(B ≤ k)
    u = next((k + 1 for k in range(n + 1) if cdf[k] >= side), n + 1)
    lower = [l for l in range(1, n + 1) if 1.0 - (cdf[l - 1] if l >= 1 else 0.0) >= side]
    l = max(lower) if lower else 0
    return l, min(u, n + 1)


def misses_allowed(planned: int, q: float) -> int:
    """The most requests of `planned` that may exceed the target with the percentile (linear interpolation, as
    the trial's columns compute it) still possibly within it: one more and its lower neighbour is a miss."""
    if planned <= 0:
        return 0
    return planned - math.floor((planned - 1) * q) - 1


@dataclass(frozen=True, kw_only=True)
class StopRule:
    target_s: float
    percentile: float  # 99 for p99
    planned: int  # the probe's requests as planned
    min_requests: int = 1
    confidence: float = CONFIDENCE
    can_meet: bool = True  # False where other targets than TTFT count too: a TTFT probe can only miss

    @property
    def q(self) -> float:
        return self.percentile / 100.0

    def judge(self, answered_s: Sequence[float], waiting_s: Sequence[float] = ()) -> ProbeVerdict:
        """The verdict from the answered requests' TTFTs and the waiting ones' ages (seconds)."""
        n = len(answered_s) + len(waiting_s)
        if n == 0:
            return ProbeVerdict(decision=ProbeDecision.UNDECIDED, lo_s=0.0, hi_s=math.inf, requests=0)
        low_values = sorted([*answered_s, *waiting_s])  # a waiting request's TTFT is at least its age
        high_values = sorted([*answered_s, *([math.inf] * len(waiting_s))])
        l, u = order_bounds(n, self.q, self.confidence)
        lo = low_values[l - 1] if l >= 1 else 0.0
        hi = high_values[u - 1] if u <= n else math.inf
        late = sum(1 for v in low_values if v > self.target_s)
        common = dict(lo_s=lo, hi_s=hi, requests=n)
        shown = ProbeVerdict(decision=ProbeDecision.UNDECIDED, **common).interval_text()
        allowed = misses_allowed(self.planned, self.q)
        if late > allowed:
            return ProbeVerdict(decision=ProbeDecision.MISSED, reason=(
                f"{late} of {self.planned} planned requests already over {self.target_s * 1000:g} ms (at most "
                f"{allowed} may be for p{self.percentile:g} to be met)"), **common)
        if lo > self.target_s and n >= self.min_requests:
            return ProbeVerdict(decision=ProbeDecision.MISSED, reason=(
                f"p{self.percentile:g} interval {shown} above {self.target_s * 1000:g} ms"), **common)
        if self.can_meet and hi <= self.target_s and n >= self.min_requests:
            return ProbeVerdict(decision=ProbeDecision.MET, reason=(
                f"p{self.percentile:g} interval {shown} within {self.target_s * 1000:g} ms"), **common)
        return ProbeVerdict(decision=ProbeDecision.UNDECIDED, **common)


def verdict_columns(verdict: Optional[ProbeVerdict], *, planned: int, stopped: bool) -> dict:
    """A trial row's probe columns (empty without a verdict)."""
    if verdict is None:
        return {}
    reason = verdict.reason
    return {"probe_verdict": str(verdict.decision), "probe_ttft_lo_s": verdict.lo_s,
            "probe_ttft_hi_s": None if math.isinf(verdict.hi_s) else verdict.hi_s,
            "probe_planned_requests": planned,
            "probe_stop": (f"stopped after {verdict.requests} of {planned} requests: {reason}; figures cover the "
                           f"requests sent up to the stop") if stopped else (reason or None)}
