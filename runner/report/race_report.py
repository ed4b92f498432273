"""What the race stopped (trials with status "skipped", failure_kind "race_eliminated"), when, and what it saved.

Device time saved is an estimate: each skipped trial counts the median device time of the same arm's finished
trials at the same point (else of the same arm and workload), times the devices the engine holds. A trial's
device time is its span on the timeline (phases.parquet: warm-up, prompts, the run and its counters), else
(runs without a timeline) its whole workload run plus warm-up (`wall_s` + `warmup_s`), else its measured window.
"""
from __future__ import annotations

import pandas as pd

from runner.report.arms import POINT_FIELDS
from runner.schema import RACE_ELIMINATED, Phase, TrialStatus


def _round(trials: pd.DataFrame) -> pd.Series:
    if "round" in trials and trials["round"].notna().any():
        return pd.to_numeric(trials["round"], errors="coerce").fillna(trials["repeat"])
    return trials["repeat"]


def trial_device_s(trials: pd.DataFrame, phases: pd.DataFrame | None = None) -> pd.Series:
    """Seconds of device time per trial row (see the module's docstring for the sources, best first)."""
    def column(name: str) -> pd.Series:
        return pd.to_numeric(trials[name], errors="coerce") if name in trials else pd.Series(float("nan"),
                                                                                              index=trials.index)

    fallback = (column("wall_s") + column("warmup_s").fillna(0.0)).fillna(column("duration_s"))
    if phases is None or not len(phases) or "trial_id" not in phases:
        return fallback
    spans = phases[phases.phase == Phase.TRIAL].groupby("trial_id").duration_s.last()
    return trials.trial_id.map(spans).astype(float).fillna(fallback)


def race_stops(trials: pd.DataFrame, phases: pd.DataFrame | None = None) -> pd.DataFrame:
    columns = ["workload", "arm", "from round", "trials skipped", "device s saved (est.)", "reason"]
    if not len(trials):
        return pd.DataFrame(columns=columns)
    trials = trials.assign(_round=_round(trials), _device_s=trial_device_s(trials, phases))
    skipped = trials[(trials.status == TrialStatus.SKIPPED) & (trials.failure_kind == RACE_ELIMINATED)]
    done = trials[trials.status == TrialStatus.OK]
    at_point = done.groupby(["arm", *POINT_FIELDS])._device_s.median().to_dict()
    at_workload = done.groupby(["arm", "workload"])._device_s.median().to_dict()
    rows = []
    for (workload, arm), group in skipped.groupby(["workload", "arm"], sort=False):
        devices = pd.to_numeric(group.tensor_parallel_size, errors="coerce").fillna(1).clip(lower=1)
        seconds = 0.0
        for r, d in zip(group.to_dict("records"), devices):
            estimate = at_point.get((arm, *[r[f] for f in POINT_FIELDS]), at_workload.get((arm, workload)))
            seconds += float(estimate or 0.0) * float(d)
        rows.append({"workload": workload, "arm": arm, "from round": int(group._round.min()),
                     "trials skipped": len(group), "device s saved (est.)": seconds,
                     "reason": str(group.failure_reason.dropna().iloc[0]) if group.failure_reason.notna().any()
                     else ""})
    return pd.DataFrame(rows, columns=columns)
