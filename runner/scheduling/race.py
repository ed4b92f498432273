"""The race between arms (`sweep.race`) and settled points (`sweep.converge`): samples of finished trials, what
stops after each round (pure)."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Optional, Sequence

from runner.measurement.workloads import workload_class
from runner.numerics import converge, race
from runner.plan.grid import Plan
from runner.schema import CONVERGED, RACE_ELIMINATED, TrialStatus


def _request_values(requests: Sequence, metric) -> list[float]:
    selection = metric.requests
    values = []
    for r in requests:
        if getattr(r, "error", None):
            continue
        if selection.turn is not None and r.turn != selection.turn:
            continue
        if selection.phases is not None and r.phase not in selection.phases:
            continue
        value = getattr(r, metric.column, None)
        if value is None:
            continue
        if selection.reciprocal:
            if value <= 0:
                continue
            value = 1.0 / value
        values.append(float(value))
    return values


def trial_sample(trial, requests) -> Optional[float]:
    """A finished trial's deciding value (its workload's declared metric); None when it has none.

    A metric over requests takes the median of the selected requests (fixed_task: of its measured runs), so
    that one trial gives one sample per round.
    """
    if getattr(trial, "status", TrialStatus.OK) != TrialStatus.OK:
        return None
    metric = workload_class(trial.workload).deciding
    if metric.requests is None:
        value = getattr(trial, metric.column, None)
        return None if value is None else float(value)
    values = _request_values(requests, metric)
    return statistics.median(values) if values else None


def point_key(params_json: str, concurrency) -> str:
    """A point within its workload: its parameters and its load."""
    return f"{params_json} c={concurrency}"


@dataclass(kw_only=True)
class Race:
    plan: Plan
    enabled: bool
    tie_band: float
    seed: int
    converge: bool = False  # sweep.converge: a settled point stops taking repeats
    samples: list = field(default_factory=list)
    eliminated: dict[tuple, str] = field(default_factory=dict)  # (arm engine id, workload) -> reason
    settled: dict[tuple, str] = field(default_factory=dict)  # (workload, point) -> reason
    _arms: dict | None = None
    _arm_ids: dict | None = None  # trial id -> its arm's engine id (Trial.arm_engine_id: one engine, several k)

    def add(self, record, requests) -> None:
        """A finished trial's sample (OK trials only, and only while racing or converging)."""
        if not (self.enabled or self.converge) or record.status != TrialStatus.OK:
            return
        value = trial_sample(record, requests)
        if value is None:
            return
        metric = workload_class(record.workload).deciding
        arm_id = self.arm_id(record.trial_id, record.engine_id)
        self.samples.append(race.RaceSample(
            engine_id=arm_id, arm=self.arm(arm_id), workload=record.workload,
            point=point_key(record.workload_params_json, record.concurrency), round=int(record.round),
            value=float(value), higher_is_better=bool(metric.higher_is_better)))

    def arm_id(self, trial_id: str, engine_id: str) -> str:
        if self._arm_ids is None:
            self._arm_ids = {t.trial_id: t.arm_engine_id for t in self.plan.trials}
        return self._arm_ids.get(trial_id, engine_id)

    def arm(self, engine_id: str) -> str:
        if self._arms is None:
            try:
                from runner.labels import engine_labels

                arms: dict = {}  # arm engine id -> (settings, api): an arm set on a larger engine is its own
                for t in self.plan.trials:
                    e = self.plan.engine(t.engine_id)
                    arms.setdefault(t.arm_engine_id, (e.settings if t.draft is None else
                                                      t.draft.settings_on(e.settings), e.api))
                labels = engine_labels([s for s, _ in arms.values()], apis=[a for _, a in arms.values()])
                self._arms = dict(zip(arms, labels))
            except Exception:  # labels are another module's; the engine id always names the arm
                self._arms = {}
        return self._arms.get(engine_id, engine_id)

    def after_round(self, finished_round: int) -> None:
        if not self.samples:
            return
        if self.enabled:
            found = race.race_eliminations(self.samples, tie_band=self.tie_band, seed=self.seed)
            for key, reason in found.items():
                self.eliminated.setdefault(tuple(key), f"{reason} (round {finished_round})")
        if self.converge:
            found = converge.settled_points(self.samples, planned=self.planned_points(), tie_band=self.tie_band,
                                            seed=self.seed)
            for key, reason in found.items():
                self.settled.setdefault(tuple(key), reason)

    def planned_points(self) -> dict[tuple[str, str], set[str]]:
        points: dict[tuple[str, str], set[str]] = {}
        for t in self.plan.trials:
            points.setdefault((t.workload, point_key(t.params_json, t.concurrency)), set()).add(t.arm_engine_id)
        return points

    def stop(self, trial) -> tuple[str, str] | None:
        """(failure_kind, reason) when this trial is not to run: its arm is out of the race, or its point settled."""
        reason = self.elimination(trial)
        if reason is not None:
            return RACE_ELIMINATED, reason
        reason = self.settled.get((trial.workload, point_key(trial.params_json, trial.concurrency)))
        return (CONVERGED, reason) if reason is not None else None

    def elimination(self, trial) -> str | None:
        """Why this trial's arm is out of its workload's race (None: it runs)."""
        return self.eliminated.get((trial.arm_engine_id, trial.workload))
