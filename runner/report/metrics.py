"""Which figure decides each workload — defined here and nowhere else — and its value per trial and point.

Decode-type workloads are decided by decode speed per session (higher wins);
latency-type workloads by TTFT p50 (lower wins). The trial columns already
summarise each workload's measured phase (second_request: the repeats;
long_context: the first long request); multi_turn is decided on the first
follow-up turn (turn index 1), as in the reference study, because turn 0 is a
cold prefill for every arm and would dilute the difference caching makes.
fixed_task takes each measured run as a sample (its decode speed, 1 / TPOT), so
that its R runs in one trial count as R repeats, as in the reference study.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np
import pandas as pd

from runner.report.arms import POINT_FIELDS


@dataclass(frozen=True, kw_only=True)
class RequestSelection:
    """Take these requests of a trial instead of a trial column: their p50, or each one as a sample."""

    description: str
    turn: Optional[int] = None
    phases: Optional[tuple[str, ...]] = None
    per_request: bool = False  # every selected request is a sample (else: one sample per trial, their p50)
    reciprocal: bool = False  # the sample is 1 / column (TPOT → decode tok/s)


@dataclass(frozen=True, kw_only=True)
class DecidingMetric:
    label: str
    column: str  # a trials column; with `requests`, the requests column whose p50 is taken
    higher_is_better: bool
    unit: str
    scale: float = 1.0  # display scale (seconds → ms)
    requests: Optional[RequestSelection] = None

    def display(self, value) -> str:
        if value is None or pd.isna(value):
            return "–"
        return f"{value * self.scale:.4g}"

    @property
    def heading(self) -> str:
        return f"{self.label} ({self.unit}, {'higher' if self.higher_is_better else 'lower'} is better)"


DECODE_SPEED = DecidingMetric(label="decode tok/s per session", column="decode_tok_s_per_session",
                              higher_is_better=True, unit="tok/s")
TTFT_P50 = DecidingMetric(label="TTFT p50", column="ttft_p50_s", higher_is_better=False, unit="ms", scale=1000.0)

DECIDING_METRICS: dict[str, DecidingMetric] = {
    "decode": DECODE_SPEED,
    "fixed_task": replace(DECODE_SPEED, label="decode tok/s per run", column="tpot_s",
                          requests=RequestSelection(description="each measured run is a sample (1 / TPOT)",
                                                    phases=("measured",), per_request=True, reciprocal=True)),
    "shared_prefix": TTFT_P50,
    "second_request": replace(TTFT_P50, label="repeat TTFT p50"),
    "multi_turn": replace(TTFT_P50, label="turn-2 TTFT p50", column="ttft_s",
                          requests=RequestSelection(description="turn index 1 (first follow-up)", turn=1)),
    "long_context": replace(TTFT_P50, label="first-request TTFT p50"),
}


def deciding_metric(workload: str) -> DecidingMetric:
    """The workload's metric; a workload not listed yet is judged on decode speed."""
    return DECIDING_METRICS.get(workload, DECODE_SPEED)


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
    ok = trials[trials.status == "ok"]
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


def robust_score(values, *, higher_is_better: bool) -> float:
    """Median penalised by 1.4826·MAD (the normal-consistent spread): a noisy arm scores worse."""
    values = np.asarray(values, dtype=float)
    values = values[~np.isnan(values)]
    if not len(values):
        return float("nan")
    spread = 1.4826 * mad(values)
    median = float(np.median(values))
    return median - spread if higher_is_better else median + spread


def point_table(trials: pd.DataFrame, samples: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, arm): median, MAD, robust score and sample count of the deciding figure.

    Points are shared across folders (the arm carries the source); `samples` comes from sample_values.
    """
    keys = [*POINT_FIELDS, "arm"]
    tagged = samples.merge(trials[["source", "trial_id", *keys]], on=["source", "trial_id"])
    values_of = {key: g.value.to_numpy(dtype=float) for key, g in tagged.groupby(keys, sort=False)}
    rows = []
    for key, group in trials.groupby(keys, sort=False, dropna=False):
        values = values_of.get(key, np.array([]))
        metric = deciding_metric(key[0])
        first = group.iloc[0]
        rows.append({
            "workload": key[0], "workload_params_json": key[1], "concurrency": int(key[2]), "arm": key[3],
            "arm_order": first.arm_order, "k": first.k, "spec_method": first.spec_method, "source": first.source,
            "family": first.family, "n": len(values), "n_failed": int((group.status != "ok").sum()),
            "median": float(np.median(values)) if len(values) else float("nan"),
            "mad": mad(values) if len(values) else float("nan"),
            "score": robust_score(values, higher_is_better=metric.higher_is_better),
        })
    columns = ["workload", "workload_params_json", "concurrency", "arm", "arm_order", "k", "spec_method", "source",
               "family", "n", "n_failed", "median", "mad", "score"]
    return pd.DataFrame(rows, columns=columns)
