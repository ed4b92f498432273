"""Each workload's deciding figure (declared by the workload registry) and its value per trial and point.

The metric itself lives with the workload (`Workload.deciding`, runner/numerics/deciding.py); this module
turns trials and requests into its samples: one per trial (= per repeat), or one per selected request where
the metric says so (fixed_task: each measured run).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.numerics.deciding import DecidingMetric, RequestSelection  # noqa: F401  (re-exported)
from runner.numerics.stats import median_interval
from runner.report.arms import POINT_FIELDS
from runner.schema import TrialStatus


class UnknownWorkload(ValueError):
    pass


def deciding_metric(workload: str) -> DecidingMetric:
    """The workload's declared metric; a workload the registry does not know is an error naming the valid ones."""
    from runner.measurement.workloads import WORKLOADS

    try:
        return WORKLOADS[workload].deciding
    except KeyError:
        raise UnknownWorkload(f"no deciding metric for workload {workload!r}: not in the workload registry; "
                              f"valid: {', '.join(sorted(WORKLOADS))} (fix: declare `deciding` on its "
                              f"Workload class in runner/measurement/workloads/)") from None


# A trial point: the same engine at the same draft count (one engine may run several: runner.plan.draft_hosts),
# workload, params and concurrency (its repeats differ in round and prompts).
POINT = ["engine_id", "workload", "workload_params_json", "concurrency", "num_speculative_tokens", "spec_schedule"]


def ok_trial_values(trials: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """The ok trials with their deciding figure (`value`: the median of their samples); trials without one dropped."""
    value = samples.groupby(["source", "trial_id"]).value.median()
    ok = trials[trials.status == TrialStatus.OK].copy()
    ok["num_speculative_tokens"] = ok.get("num_speculative_tokens", pd.Series(0, index=ok.index)).fillna(0)
    ok["spec_schedule"] = ok.get("spec_schedule", pd.Series("", index=ok.index)).fillna("")  # a key, not a null
    ok["value"] = [value.get((s, t)) for s, t in zip(ok.source, ok.trial_id)]
    return ok.dropna(subset=["value"])


def better_ratio(workload: str, mine: float, theirs: float) -> float:
    """How much better `mine` is than `theirs` on the workload's deciding figure (> 1: better)."""
    return mine / theirs if deciding_metric(workload).higher_is_better else theirs / mine


def _selected(requests: pd.DataFrame, selection: RequestSelection, column: str) -> pd.DataFrame:
    chosen = requests[requests.error.isna()] if "error" in requests else requests
    if selection.turn is not None:
        chosen = chosen[chosen.turn == selection.turn]
    if selection.phases is not None:
        chosen = chosen[chosen.phase.isin(selection.phases)]
    values = pd.to_numeric(chosen[column], errors="coerce")
    if selection.reciprocal:
        values = 1.0 / values.where(values > 0)
    return pd.DataFrame({"source": chosen.source, "trial_id": chosen.trial_id, "value": values})


def sample_values(trials: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """The deciding figure's samples (source, trial_id, value) of the ok trials: one per trial, or per request."""
    frames = []
    ok = trials[trials.status == TrialStatus.OK]
    for workload, group in ok.groupby("workload"):
        metric = deciding_metric(workload)
        keys = group[["source", "trial_id"]]
        if metric.requests is not None:
            chosen = _selected(requests, metric.requests, metric.column) if len(requests) else \
                pd.DataFrame(columns=["source", "trial_id", "value"])
            chosen = chosen.merge(keys, on=["source", "trial_id"])
            if not metric.requests.per_request:
                chosen = chosen.groupby(["source", "trial_id"], as_index=False).value.median()
            frames.append(chosen)
        elif metric.column in group:
            frames.append(keys.assign(value=pd.to_numeric(group[metric.column], errors="coerce").to_numpy()))
    samples = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["source", "trial_id", "value"])
    return samples.dropna(subset=["value"])


def mad(values) -> float:
    values = np.asarray(values, dtype=float)
    return float(np.median(np.abs(values - np.median(values)))) if len(values) else float("nan")



def point_table(trials: pd.DataFrame, samples: pd.DataFrame, *, seed: int = 0) -> pd.DataFrame:
    """One row per (point, arm): the samples, their median with its 95 % bootstrap interval, MAD and count.

    Points are shared across folders (the arm carries the source); `samples` comes from sample_values.
    """
    keys = [*POINT_FIELDS, "arm"]
    tagged = samples.merge(trials[["source", "trial_id", *keys]], on=["source", "trial_id"])
    values_of = {key: g.value.to_numpy(dtype=float) for key, g in tagged.groupby(keys, sort=False)}
    rows = []
    for key, group in trials.groupby(keys, sort=False, dropna=False):
        values = values_of.get(key, np.array([]))
        first = group.iloc[0]
        interval = median_interval(values, seed=seed) if len(values) >= 2 else None
        rows.append({
            "workload": key[0], "workload_params_json": key[1], "concurrency": int(key[2]), "arm": key[3],
            "arm_order": first.arm_order, "k": first.k, "spec_method": first.spec_method, "source": first.source,
            "family": first.family, "scheduled": bool(first.get("scheduled", False)), "n": len(values),
            "n_failed": int(((group.status != TrialStatus.OK) & (group.status != TrialStatus.SKIPPED)).sum()),
            "n_skipped": int((group.status == TrialStatus.SKIPPED).sum()),
            "values": [float(v) for v in values],
            "median": float(np.median(values)) if len(values) else float("nan"),
            "ci_lo": interval.lo if interval else float("nan"), "ci_hi": interval.hi if interval else float("nan"),
            "mad": mad(values) if len(values) else float("nan"),
        })
    columns = ["workload", "workload_params_json", "concurrency", "arm", "arm_order", "k", "spec_method", "source",
               "family", "scheduled", "n", "n_failed", "n_skipped", "values", "median", "ci_lo", "ci_hi", "mad"]
    return pd.DataFrame(rows, columns=columns)
