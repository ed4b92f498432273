"""One decision per point: the leader, the arms tied with it for first, and the choice. Pure (numpy only).

Every place that names an arm to run (the verdict, the best draft count, choices under a latency target,
crossovers, the race, the recommendation, the Answer table) reads a Decision; none ranks arms itself, so
that they cannot disagree. The leader has the best median; an arm ties with it when the 95 % interval of
leader / arm (runner.numerics.stats.ratio_interval) reaches into the tie band; the choice is the simplest
arm tied for first: spec off before speculation, a smaller k before a larger one, then the sweep's arm order
(a tie is a licence to deploy the cheaper configuration, never a coin toss between the top two).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from runner.numerics.stats import MIN_REPEATS, TIE_BAND, Interval, beats, ratio_interval


class DecisionKind(enum.StrEnum):
    WINNER = "winner"
    TIE = "tie within noise"
    TOO_FEW = "not enough repeats"
    ONLY_ONE = "only arm measured"
    CAPACITY = "neither: KV capacity limit"
    NO_RESULT = "no result (all arms failed)"


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """One arm at one point: its per-repeat samples and what makes it simpler than another arm."""

    arm: str
    values: tuple[float, ...]
    k: int = 0  # draft tokens; 0 = spec off
    order: int = 0  # the sweep's arm order

    @property
    def simplicity(self) -> tuple:
        return (self.k > 0, self.k, self.order)

    @property
    def median(self) -> float:
        finite = [v for v in self.values if np.isfinite(v)]
        return float(np.median(finite)) if finite else float("nan")


@dataclass(frozen=True, kw_only=True)
class Decision:
    kind: DecisionKind
    leader: Optional[str] = None  # best median
    runner_up: Optional[str] = None  # second-best median
    tied: tuple[str, ...] = ()  # tied for first (the leader included), simplest first
    choice: Optional[str] = None  # what to deploy at this point; None when the data cannot say
    margin: Optional[Interval] = None  # leader over runner-up (> 1: the leader is better)
    n_min: int = 0
    against_leader: dict[str, Interval] = field(default_factory=dict)  # leader over each other arm

    @property
    def label(self) -> str:
        """The point's outcome in one phrase: the winner's name, or what kind of non-answer it is."""
        return self.choice if self.kind in (DecisionKind.WINNER, DecisionKind.ONLY_ONE) and self.choice \
            else self.kind.value

    def is_tied_for_first(self, arm: str) -> bool:
        return arm in self.tied


def _ranked(measured: Sequence[Candidate], higher_is_better: bool) -> list[Candidate]:
    sign = -1.0 if higher_is_better else 1.0
    return sorted(measured, key=lambda c: (sign * c.median, c.simplicity))


def decide(candidates: Sequence[Candidate], *, higher_is_better: bool, tie_band: float = TIE_BAND,
           min_repeats: int = MIN_REPEATS, seed: int = 0, walled: bool = False) -> Decision:
    """The decision at one point among `candidates` (see the module's rule). `walled`: an arm is at the KV
    capacity wall here, so the numbers measure the pool, not the configuration: no choice."""
    measured = [c for c in candidates if any(np.isfinite(v) for v in c.values)]
    if not measured:
        return Decision(kind=DecisionKind.NO_RESULT)
    ranked = _ranked(measured, higher_is_better)
    leader = ranked[0]
    n_min = min(sum(1 for v in c.values if np.isfinite(v)) for c in measured)
    against: dict[str, Interval] = {}
    tied = [leader]
    for other in ranked[1:]:
        both = min(len(leader.values), len(other.values)) >= 2
        ratio = ratio_interval(leader.values, other.values, higher_is_better=higher_is_better,
                               seed=seed) if both else None
        if ratio is not None:
            against[other.arm] = ratio
        if not beats(ratio, tie_band=tie_band):
            tied.append(other)
    tied.sort(key=lambda c: c.simplicity)
    base = dict(leader=leader.arm, runner_up=ranked[1].arm if len(ranked) > 1 else None,
                tied=tuple(c.arm for c in tied), margin=against.get(ranked[1].arm) if len(ranked) > 1 else None,
                n_min=n_min, against_leader=against)
    if walled:
        return Decision(kind=DecisionKind.CAPACITY, **base)
    if n_min < min_repeats:
        return Decision(kind=DecisionKind.TOO_FEW, **base)
    if len(ranked) == 1:
        return Decision(kind=DecisionKind.ONLY_ONE, choice=leader.arm, **base)
    if len(tied) == 1:
        return Decision(kind=DecisionKind.WINNER, choice=leader.arm, **base)
    return Decision(kind=DecisionKind.TIE, choice=tied[0].arm, **base)


def one_for_all(decisions: Sequence[Decision], simplicity: dict[str, tuple]) -> Optional[str]:
    """When one setting must serve every point: the arm tied for first at the most points (equal counts go to
    the simpler arm); None when no point has a choice."""
    counts: dict[str, int] = {}
    for d in decisions:
        if d.choice is None:
            continue
        for arm in d.tied:
            counts[arm] = counts.get(arm, 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda a: (-counts[a], simplicity.get(a, (True, 1 << 30, 1 << 30))))
