"""Repeats that stop once the answer is settled (`sweep.converge: true`). Pure.

A point (workload × its parameters × load) stops taking repeats, for all of its arms, once its decision
(runner.numerics.decision, the report's own rule) can no longer move across the tie band's edge: every arm
has at least `min_rounds` samples there (the verdict's minimum, race.MIN_ROUNDS), and for every arm behind
the leader the 95 % interval of leader / arm lies wholly beyond 1 + tie_band (behind for sure) or wholly
within it (tied for sure). An interval that straddles the edge, or an arm short of samples, keeps the point
running, up to `sweep.repeats`. A point measured on one arm only settles at `min_rounds` (nothing to decide).
"""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from runner.numerics.decision import Candidate, Decision, DecisionKind, decide
from runner.numerics.race import MIN_ROUNDS, RaceSample
from runner.numerics.stats import TIE_BAND, Interval

UNSETTLED_KINDS = (DecisionKind.TOO_FEW, DecisionKind.NO_RESULT, DecisionKind.CAPACITY)


def interval_settled(ratio: Optional[Interval], *, tie_band: float) -> bool:
    """leader / arm wholly above the band (the arm is behind) or wholly inside it (the two tie)."""
    if ratio is None:
        return False
    edge = 1.0 + tie_band
    return ratio.lo > edge or ratio.hi <= edge


def decision_settled(decision: Decision, *, tie_band: float) -> bool:
    if decision.kind in UNSETTLED_KINDS:
        return False
    return all(interval_settled(decision.against_leader.get(arm), tie_band=tie_band)
               for arm in _others(decision))


def _others(decision: Decision) -> list[str]:
    arms = set(decision.against_leader) | set(decision.tied)
    if decision.runner_up:
        arms.add(decision.runner_up)
    arms.discard(decision.leader)
    return sorted(arms)


def _verdict_text(decision: Decision, arm_names: Mapping[str, str]) -> str:
    if decision.kind is DecisionKind.ONLY_ONE:
        return "one arm measured"
    parts = [f"{arm_names.get(arm, arm)} {decision.against_leader[arm].ratio_text()}" for arm in _others(decision)]
    leader = arm_names.get(decision.leader, decision.leader)
    return f"{decision.kind.value}, leader {leader} (leader / arm: {'; '.join(parts)})"


def settled_points(samples: Sequence[RaceSample], *, planned: Mapping[tuple[str, str], set[str]],
                   tie_band: float = TIE_BAND, min_rounds: int = MIN_ROUNDS, seed: int = 0) -> dict[tuple[str, str], str]:
    """(workload, point) -> why it stopped, for each planned point whose decision is settled.

    `planned`: (workload, point) -> the engine ids with trials there; each of them needs `min_rounds` samples
    (an arm whose trials failed keeps its point open, and a lane running behind never lets others decide)."""
    by_point: dict[tuple[str, str], dict[str, list[RaceSample]]] = {}
    for s in samples:
        if s.value is not None and s.value == s.value:  # NaN is no sample
            by_point.setdefault((s.workload, s.point), {}).setdefault(s.engine_id, []).append(s)
    out: dict[tuple[str, str], str] = {}
    for key, engines in sorted(planned.items()):
        arms = by_point.get(key, {})
        if not engines or any(len(arms.get(e, [])) < min_rounds for e in engines):
            continue
        rows = [arms[e] for e in sorted(engines)]
        decision = decide([Candidate(arm=e, values=tuple(x.value for x in r)) for e, r in zip(sorted(engines), rows)],
                          higher_is_better=rows[0][0].higher_is_better, tie_band=tie_band, min_repeats=min_rounds,
                          seed=seed)
        if not decision_settled(decision, tie_band=tie_band):
            continue
        names = {e: r[0].arm for e, r in zip(sorted(engines), rows)}
        last = max(x.round for r in rows for x in r)
        out[key] = (f"settled after round {last} ({min(len(r) for r in rows)} repeats): "
                    f"{_verdict_text(decision, names)}, clear of the ±{tie_band:.0%} tie band")
    return out
