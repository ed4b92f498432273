"""Predict, then validate, the draft count as vLLM deploys it (`sweep.adaptive=predict_schedule`). Pure.

1. predict: spec off and, per chain-drafter method and acceptance profile, only the arm drafting the most tokens,
   at every load: its per-position acceptance and the step times of k_max and of spec off predict the decode
   speed of every smaller k (runner.numerics.step_cost).
2. contenders: at each point, the k's whose predicted speed reaches the best prediction and that no engine ran
   yet (a prediction names what to measure, it never decides). Where the prediction prunes every k but the
   measured ones at every load, one spot check: the runner-up at the load where its predicted margin is smallest
   (runner.numerics.step_cost.spot_checks), so that its error is measured and "predicted" is never the only
   evidence for the answer.
3. schedule: the best measured k per batch size (the decision module) as a per-batch-size schedule arm at every
   load, beside the static k and spec off already measured; arms with a given schedule run here too. A family
   whose best k is the same at every load gets no schedule arm: that is a static k, already measured.
The trials are the full grid's (same ids), so the report reads the run as any sweep's.
"""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Optional

from runner.config.checks import ConfigError
from runner.config.sections import ArmSection, RunConfig
from runner.numerics.measured_best_k import FAMILY_COLUMNS, measured_choices
from runner.numerics.spec_predict import CHAIN_DRAFTERS, _plain
from runner.numerics.step_cost import POINT_COLUMNS, contenders, predict_speeds, spot_checks
from runner.plan.grid import Plan, build_plan
from runner.plan.spec_variants import AUTO, DEFAULT_MAX_NUM_SEQS
from runner.plan.stages import Stage, select

FIX = ("sweep.arms=[{spec_method: 'off'}, {spec_method: mtp, num_speculative_tokens: 3}, "
       "{spec_method: mtp, num_speculative_tokens_per_batch_size: auto}]")


def _scheduled(arm: ArmSection) -> bool:
    return arm.num_speculative_tokens_per_batch_size is not None


def _given(arm: ArmSection) -> bool:
    return _scheduled(arm) and arm.num_speculative_tokens_per_batch_size != AUTO


def _point(trial, engine, columns=POINT_COLUMNS) -> tuple:
    """A planned trial's coordinates as its row will hold them."""
    values = {**vars(engine.settings), "api": trial.api, "workload": trial.workload,
              "workload_params_json": trial.params_json, "concurrency": trial.concurrency}
    return tuple(_plain(values.get(c)) for c in columns)


def _deciding(config: RunConfig):
    from runner.measurement.workloads import WORKLOADS

    metrics = {WORKLOADS[name].deciding for name in config.workload}
    for metric in metrics:
        if metric.requests is not None:
            raise ConfigError(f"sweep.adaptive=predict_schedule decides on a trial figure; {metric.label} is taken "
                              f"from requests (fix: workload=[decode])")
    if len(metrics) != 1:
        raise ConfigError("sweep.adaptive=predict_schedule needs workloads decided on one figure (fix: "
                          "workload=[decode])")
    return metrics.pop()


def _max_num_seqs(config: RunConfig) -> int:
    return int(dict(config.engine.args).get("max_num_seqs") or DEFAULT_MAX_NUM_SEQS)


class PredictSchedule:
    def plannable(self, config: RunConfig) -> RunConfig:
        arms = config.sweep.arms
        if not arms:
            raise ConfigError(f"sweep.adaptive=predict_schedule needs explicit arms (fix: {FIX})")
        static = [a for a in arms if not _scheduled(a)]
        if not any(str(a.spec_method) == "off" for a in static):
            raise ConfigError(f"sweep.adaptive=predict_schedule needs a spec-off arm: its step time is k = 0 "
                              f"(fix: {FIX})")
        if not any(a.spec_method in CHAIN_DRAFTERS and (a.num_speculative_tokens or 1) >= 2 for a in static):
            raise ConfigError(f"sweep.adaptive=predict_schedule needs a chain drafter ({', '.join(sorted(CHAIN_DRAFTERS))}) "
                              f"drafting 2 or more tokens, whose counters predict every smaller k (fix: {FIX})")
        _deciding(config)
        return replace(config, sweep=replace(config.sweep, arms=static))

    def notes(self, config: RunConfig) -> list[str]:
        from runner.plan.draft_hosts import live_drafts

        live = live_drafts(config)
        if live.on:
            return ["every stage runs on the predict stage's engines: the contenders, the spot check and the schedule "
                    "arm have their draft count set on the largest-k engine, beside spec off (no load of their own)"]
        return [f"later stages load an engine per k they measure ({live.reason})"]

    def stage(self, index: int, *, config: RunConfig, rows: list[dict]) -> Optional[Stage]:
        steps = (self._predict, self._contenders, self._schedule)
        return steps[index](config, rows) if index < len(steps) else None

    def _fixed(self, config: RunConfig) -> Plan:
        return build_plan(self.plannable(config))

    def _predict(self, config: RunConfig, rows: list[dict]) -> Stage:
        plan = self._fixed(config)
        k_max: dict[tuple, int] = {}
        for e in plan.engines:
            if e.settings.spec_method != "off":
                key = (e.settings.spec_method, e.settings.spec_acceptance_profile)
                k_max[key] = max(k_max.get(key, 0), e.settings.num_speculative_tokens)

        def keep(trial, engine) -> bool:
            s = engine.settings
            return s.spec_method == "off" or s.num_speculative_tokens == k_max[(s.spec_method, s.spec_acceptance_profile)]

        return Stage(name="predict", plan=select(plan, keep),
                     why="spec off and the largest k per method: they predict every smaller k")

    def _contenders(self, config: RunConfig, rows: list[dict]) -> Stage:
        groups: dict[tuple, list] = {}
        for p in predict_speeds(rows):
            groups.setdefault((p.point_key, p.method, p.profile), []).append(p)
        wanted = set()
        for (point, method, profile), predictions in groups.items():
            ran = {p.k for p in predictions if p.measured}
            wanted |= {(point, method, profile, k) for k in contenders(predictions, aggregate=False)
                       if k not in ran and k > 0}
        checks = spot_checks([p for group in groups.values() for p in group], aggregate=False)
        spot = {(c.point_key, c.method, c.profile, c.k) for c in checks}

        def keep(trial, engine) -> bool:
            s = engine.settings
            key = (_point(trial, engine), s.spec_method, s.spec_acceptance_profile, s.num_speculative_tokens)
            return key in wanted or key in spot

        plan = select(self._fixed(config), keep)
        why = f"{len(wanted)} (point, k) pairs predicted to reach the best k and not measured yet"
        for c in checks:
            where = dict(zip(POINT_COLUMNS, c.point_key))
            why += (f"; the prediction pruned every other {c.method} k: spot check of k = {c.k} at "
                    f"c={where.get('concurrency')} ({c.margin:.1%} predicted behind k = {c.best_k})")
        return Stage(name="contenders", plan=plan, why=why)

    def _schedule(self, config: RunConfig, rows: list[dict]) -> Stage:
        metric = _deciding(config)
        derived: dict[tuple, str] = {}  # (family, method, profile) → the schedule's JSON
        arms = list(self.plannable(config).sweep.arms)
        for choices in measured_choices(rows, metric_column=metric.column, higher_is_better=metric.higher_is_better):
            schedule = choices.schedule(max_num_seqs=_max_num_seqs(config))
            if schedule is None or len(schedule.ranges) == 1:
                continue  # spec off everywhere, or one static k: already measured
            family = tuple(choices.family[c] for c in FAMILY_COLUMNS)
            derived[(family, choices.method, choices.profile)] = schedule.json()
            profile = json.loads(choices.profile) if choices.profile else "real"
            arm = ArmSection(spec_method=choices.method, spec_acceptance_profile=profile,
                             num_speculative_tokens_per_batch_size=schedule.as_list())
            if arm not in arms:
                arms.append(arm)
        given = [a for a in config.sweep.arms if _given(a)]
        staged = replace(config, sweep=replace(config.sweep, arms=arms + [a for a in given if a not in arms]))
        plan = build_plan(staged)
        derived_json = set(derived.values())

        def keep(trial, engine) -> bool:
            s = engine.settings
            if not s.spec_schedule:
                return False
            family = _point(trial, engine, FAMILY_COLUMNS)
            return s.spec_schedule not in derived_json or derived.get(
                (family, s.spec_method, s.spec_acceptance_profile)) == s.spec_schedule

        return Stage(name="schedule", plan=select(plan, keep),
                     why=f"{len(derived)} derived schedule(s) and {len(given)} given, at every load")
