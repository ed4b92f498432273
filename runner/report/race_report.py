"""What the race stopped (trials with status "skipped", failure_kind "race_eliminated"), when, and what it saved.

Device time saved is an estimate: each skipped trial counts the median measured duration_s of the same arm's
finished trials at the same point (else of the same arm and workload), times the devices the engine holds.
"""
from __future__ import annotations

import pandas as pd

from runner.report.arms import POINT_FIELDS
from runner.schema import RACE_ELIMINATED, TrialStatus


def _round(trials: pd.DataFrame) -> pd.Series:
    if "round" in trials and trials["round"].notna().any():
        return pd.to_numeric(trials["round"], errors="coerce").fillna(trials["repeat"])
    return trials["repeat"]


def race_stops(trials: pd.DataFrame) -> pd.DataFrame:
    columns = ["workload", "arm", "from round", "trials skipped", "device s saved (est.)", "reason"]
    if not len(trials):
        return pd.DataFrame(columns=columns)
    trials = trials.assign(_round=_round(trials))
    skipped = trials[(trials.status == TrialStatus.SKIPPED) & (trials.failure_kind == RACE_ELIMINATED)]
    done = trials[trials.status == TrialStatus.OK].assign(
        _devices=lambda f: pd.to_numeric(f.tensor_parallel_size, errors="coerce").fillna(1).clip(lower=1))
    at_point = done.groupby(["arm", *POINT_FIELDS]).duration_s.median().to_dict()
    at_workload = done.groupby(["arm", "workload"]).duration_s.median().to_dict()
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
