"""How many repeats each point took under `sweep.converge` (trials with status "skipped", failure_kind
"converged": repeats not taken because the point's verdict had settled). Pure, over the trials table."""
from __future__ import annotations

import pandas as pd

from runner.report.arms import POINT_FIELDS, describe_point, point_axes, point_coords
from runner.report.render import md_table, section
from runner.schema import CONVERGED, TrialStatus

COLUMNS = ["workload", "point", "arms", "repeats taken", "planned", "stopped"]


def repeats_taken(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per point: the repeats its arms ran (fewest–most over its arms; skipped ones left out), of those
    planned, and whether its verdict settled before sweep.repeats."""
    if not len(trials) or "failure_kind" not in trials:
        return pd.DataFrame(columns=COLUMNS)
    rows = []
    for (workload, *_), group in trials.groupby(list(POINT_FIELDS), sort=True):
        arm = "arm" if "arm" in group else "engine_id"
        taken = group[group.status != TrialStatus.SKIPPED].groupby(arm).size()
        low, high = (int(taken.min()), int(taken.max())) if len(taken) else (0, 0)
        settled = ((group.status == TrialStatus.SKIPPED) & (group.failure_kind == CONVERGED)).any()
        rows.append({"workload": workload, "point": describe_point(point_coords(group.iloc[0].to_dict()),
                                                                   point_axes(trials[trials.workload == workload])),
                     "arms": int(group[arm].nunique()), "repeats taken": str(low) if low == high else f"{low}–{high}",
                     "planned": int(group.groupby(arm).size().max()),
                     "stopped": "settled" if settled else "at sweep.repeats"})
    return pd.DataFrame(rows, columns=COLUMNS)


def repeats_section(trials: pd.DataFrame) -> str:
    """report.md's "Repeats per point": only for a run where a point stopped early (sweep.converge)."""
    if not len(trials) or "failure_kind" not in trials or not (trials.failure_kind == CONVERGED).any():
        return ""
    table = repeats_taken(trials)
    saved = int((trials.failure_kind == CONVERGED).sum())
    return section("Repeats per point (sweep.converge)",
                   f"{saved} repeat(s) not taken: a point stops once every interval of leader / arm is clear of the "
                   f"tie band (wholly beyond it or wholly within it), never before the verdict's minimum repeats.",
                   md_table(table))
