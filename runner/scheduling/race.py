"""The race between arms (`sweep.race`): samples of finished trials, eliminations after each round (pure)."""
from __future__ import annotations

from dataclasses import dataclass, field

from runner.measurement import race
from runner.measurement.workloads import workload_class
from runner.plan.grid import Plan
from runner.schema import TrialStatus


@dataclass(kw_only=True)
class Race:
    plan: Plan
    enabled: bool
    tie_band: float
    seed: int
    samples: list = field(default_factory=list)
    eliminated: dict[tuple, str] = field(default_factory=dict)  # (engine_id, workload) -> reason
    _arms: dict | None = None

    def add(self, record, requests) -> None:
        """A finished trial's sample (OK trials only, and only while racing)."""
        if not self.enabled or record.status != TrialStatus.OK:
            return
        value = race.trial_sample(record, requests)
        if value is None:
            return
        metric = workload_class(record.workload).deciding
        self.samples.append(race.RaceSample(
            engine_id=record.engine_id, arm=self.arm(record.engine_id), workload=record.workload,
            point=f"{record.workload_params_json} c={record.concurrency}", round=int(record.round),
            value=float(value), higher_is_better=bool(metric.higher_is_better)))

    def arm(self, engine_id: str) -> str:
        if self._arms is None:
            try:
                from runner.labels import engine_labels

                engines = self.plan.engines
                labels = engine_labels([e.settings for e in engines], apis=[e.api for e in engines])
                self._arms = {e.engine_id: label for e, label in zip(engines, labels)}
            except Exception:  # labels are another module's; the engine id always names the arm
                self._arms = {}
        return self._arms.get(engine_id, engine_id)

    def after_round(self, finished_round: int) -> None:
        if not self.enabled or not self.samples:
            return
        found = race.race_eliminations(self.samples, tie_band=self.tie_band, seed=self.seed)
        for key, reason in found.items():
            self.eliminated.setdefault(tuple(key), f"{reason} (round {finished_round})")

    def elimination(self, trial) -> str | None:
        """Why this trial's arm is out of its workload's race (None: it runs)."""
        return self.eliminated.get((trial.engine_id, trial.workload))
