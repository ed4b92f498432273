"""Early elimination between interleaved rounds (`sweep.race: true`). Pure.

After a round, an arm stops for the remaining rounds of a workload when, at
every point of that workload, it is outside the decision's tied-for-first set
(runner.numerics.decision, the report's own rule): the 95 % interval of
leader / arm lies wholly above 1 + tie_band. An arm that ties the leader
anywhere, or lacks `min_rounds` samples at a point, keeps running.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from runner.numerics.decision import Candidate, DecisionKind, decide
from runner.numerics.stats import TIE_BAND


@dataclass(frozen=True, kw_only=True)
class RaceSample:
    engine_id: str
    arm: str
    workload: str
    point: str  # workload_params_json + concurrency
    round: int
    value: float
    higher_is_better: bool


def _by_point(samples: Sequence[RaceSample]) -> dict[str, dict[str, list[RaceSample]]]:
    points: dict[str, dict[str, list[RaceSample]]] = {}
    for s in samples:
        points.setdefault(s.point, {}).setdefault(s.engine_id, []).append(s)
    return points


# The verdict's minimum repeats (runner.report: below 3, no winner): an arm stopped with fewer could never be
# reported behind, and the race would change the sweep's answer instead of only its cost.
MIN_ROUNDS = 3


def race_eliminations(samples: Sequence[RaceSample], *, tie_band: float = TIE_BAND, min_rounds: int = MIN_ROUNDS,
                      seed: int = 0) -> dict[tuple[str, str], str]:
    """(engine_id, workload) -> human reason, for arms outside the decision's tied-for-first set
    (runner.numerics.decision) at EVERY point of that workload."""
    out: dict[tuple[str, str], str] = {}
    workloads: dict[str, list[RaceSample]] = {}
    for s in samples:
        if s.value is not None and s.value == s.value:  # NaN is no sample
            workloads.setdefault(s.workload, []).append(s)
    for workload, mine in sorted(workloads.items()):
        points = _by_point(mine)
        engines = {s.engine_id for s in mine}
        evidence: dict[str, list[str]] = {e: [] for e in engines}
        for point, arms in sorted(points.items()):
            higher = arms[next(iter(arms))][0].higher_is_better
            decision = decide([Candidate(arm=engine, values=tuple(x.value for x in rows))
                               for engine, rows in sorted(arms.items())],
                              higher_is_better=higher, tie_band=tie_band, min_repeats=min_rounds, seed=seed)
            for engine in engines:
                rows = arms.get(engine, [])
                if evidence[engine] is None:
                    continue
                if decision.kind is DecisionKind.TOO_FEW or len(rows) < min_rounds \
                        or decision.is_tied_for_first(engine):
                    evidence[engine] = None  # type: ignore[assignment]
                    continue
                leader_arm = arms[decision.leader][0].arm
                evidence[engine].append(f"{point}: {leader_arm} {decision.against_leader[engine].ratio_text()}")
        for engine, lines in sorted(evidence.items()):
            if not lines:
                continue
            arm = next(s.arm for s in mine if s.engine_id == engine)
            last_round = max(s.round for s in mine if s.engine_id == engine)
            out[(engine, workload)] = (
                f"{arm} behind the leader beyond the ±{tie_band:.0%} tie band at all {len(lines)} point(s) of "
                f"{workload} after round {last_round} (leader / {arm}, ratio of medians [95% interval]): "
                + "; ".join(lines))
    return out
