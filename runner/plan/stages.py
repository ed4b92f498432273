"""A sweep as stages: a fixed sweep is one, an adaptive study plans each stage from the ones before. Pure.

An adaptive study (`sweep.adaptive`, a name from STUDIES) plans its first stage from the config alone and each
later one from the finished trials of its earlier stages, until it has nothing left to measure. Every stage's
trials are trials of the full grid (same engine and trial ids) in one run folder, so a command run again plans
each stage from the same rows and resumes where it stopped; the report reads the run folder as for any sweep.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Optional, Protocol

from runner.config.checks import ConfigError
from runner.config.sections import RunConfig
from runner.plan.grid import Plan

# name → "module:class" (imported when chosen, so that a study's numerics load only where it runs).
STUDIES = {
    "predict_schedule": "runner.plan.schedule_study:PredictSchedule",
    "rate_search": "runner.plan.rate_search:RateSearch",
}


@dataclass(frozen=True, kw_only=True)
class Stage:
    name: str
    plan: Plan
    why: str = ""  # one line for the terminal: what this stage measures and why
    later: bool = False  # later stages may follow (an adaptive study's): its engines stay loaded for them


class AdaptiveStudy(Protocol):
    def plannable(self, config: RunConfig) -> RunConfig:
        """The config whose plan validates the study before any engine starts (its fixed part)."""

    def stage(self, index: int, *, config: RunConfig, rows: list[dict]) -> Optional[Stage]:
        """The index-th stage from the earlier stages' trial rows (None: the study is complete)."""

    def notes(self, config: RunConfig) -> list[str]:
        """Lines for the dry run and the run's start: what the study's later stages will do (none: [])."""


def adaptive_study(name: Optional[str]) -> Optional[AdaptiveStudy]:
    if not name:
        return None
    if name not in STUDIES:
        raise ConfigError(f"sweep.adaptive={name!r} is not a known study; valid: {', '.join(sorted(STUDIES))} "
                          f"(fix: sweep.adaptive=predict_schedule, or sweep.adaptive=null for the fixed grid)")
    module, _, cls = STUDIES[name].partition(":")
    return getattr(importlib.import_module(module), cls)()


def select(plan: Plan, keep: Callable) -> Plan:
    """The plan's trials for which keep(trial, engine) holds, and the engines they need (in the plan's order)."""
    engines = {e.engine_id: e for e in plan.engines}
    trials = [t for t in plan.trials if keep(t, engines[t.engine_id])]
    used = {t.engine_id for t in trials}
    return replace(plan, engines=[e for e in plan.engines if e.engine_id in used], trials=trials)


def run_stages(*, config: RunConfig, plan: Plan, trial_rows: Callable[[], list[dict]]) -> Iterator[Stage]:
    """The stages to run, lazily: a fixed sweep's one plan, or the study's stages, each planned after the one
    before it has run (`trial_rows()` reads the run folder's trial rows then). A study sees only the rows of its
    earlier stages' trials, so that a resumed command plans each stage as the first command did. Each stage's
    engines that differ only in k share one load where the run sets draft counts live (runner.plan.draft_hosts)."""
    from runner.plan.draft_hosts import fold, live_drafts

    live = live_drafts(config)
    study = adaptive_study(config.sweep.adaptive)
    if study is None:
        yield Stage(name="grid", plan=fold(plan, live=live))
        return
    earlier: set[str] = set()
    index = 0
    while True:
        rows = [r for r in trial_rows() if r.get("trial_id") in earlier]
        stage = study.stage(index, config=config, rows=rows)
        if stage is None:
            return
        earlier |= {t.trial_id for t in stage.plan.trials}
        # One host per group for every stage: the largest k of the study's fixed plan or of this stage.
        yield replace(stage, later=True, plan=fold(stage.plan, live=live, catalogue=plan.engines))  # whether another follows is known only from this one's results
        index += 1
