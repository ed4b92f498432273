"""Under a latency target: the configuration with the most output tok/s per device that meets it, per point,
and the highest concurrency each arm sustains within it. Pure.

A point meets the SLO when the median over repeats of every targeted figure (TTFT/TPOT/E2E percentiles of the
trial) is within its limit. Throughput per device is the trial's aggregate decode tok/s divided by the devices
the engine holds (tensor_parallel_size). The highest sustained concurrency is interpolated linearly between the
last measured concurrency that meets the SLO and the first that does not.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from runner.numerics.decision import Candidate, DecisionKind, decide
from runner.numerics.stats import MIN_REPEATS, TIE_BAND, interpolate_crossing
from runner.report.arms import CONCURRENCY, POINT_FIELDS
from runner.schema import TrialStatus
from runner.slo import Slo

PER_DEVICE = "tok_s_per_device"


def per_device(trials: pd.DataFrame) -> pd.Series:
    devices = pd.to_numeric(trials.tensor_parallel_size, errors="coerce").fillna(1).clip(lower=1)
    return pd.to_numeric(trials.decode_tok_s_aggregate, errors="coerce") / devices


def arm_point_figures(trials: pd.DataFrame, slo: Slo) -> pd.DataFrame:
    """Per (point, arm): tok/s per device (samples and median), each targeted figure's median in ms, meets."""
    ok = trials[trials.status == TrialStatus.OK].copy()
    ok[PER_DEVICE] = per_device(ok)
    rows = []
    for key, group in ok.groupby([*POINT_FIELDS, "arm"], sort=False):
        row = {"workload": key[0], "workload_params_json": key[1], "concurrency": int(key[2]), "arm": key[3],
               "arm_order": group.arm_order.iloc[0], "k": int(group.k.iloc[0]), "n": len(group),
               "per_device_values": [float(v) for v in group[PER_DEVICE].dropna()],
               "per_device": float(group[PER_DEVICE].median())}
        meets = True
        for name, limit in slo.limits.items():
            value = float(pd.to_numeric(group[slo.column(name)], errors="coerce").median()) * 1000.0
            row[name] = value
            meets = meets and bool(value <= limit)  # NaN (not measured) does not meet
        row["meets"] = meets
        rows.append(row)
    columns = ["workload", "workload_params_json", "concurrency", "arm", "arm_order", "k", "n", "per_device_values",
               "per_device", *slo.limits, "meets"]
    return pd.DataFrame(rows, columns=columns)


def slo_choices(figures: pd.DataFrame, *, tie_band: float = TIE_BAND, min_repeats: int = MIN_REPEATS,
                seed: int = 0) -> pd.DataFrame:
    """Per point: the decision (runner.numerics.decision) on tok/s per device among the arms that meet the SLO."""
    rows = []
    for key, group in figures.groupby(list(POINT_FIELDS), sort=False):
        meeting = group[group.meets]
        row = {"workload": key[0], "workload_params_json": key[1], "concurrency": key[2],
               "meeting": f"{len(meeting)}/{len(group)}", "choice": None, "tok/s per device": np.nan,
               "next": None, "ratio": "–", "verdict": "no arm meets the SLO"}
        if len(meeting):
            decision = decide([Candidate(arm=r["arm"], values=tuple(r["per_device_values"]), k=int(r["k"]),
                                         order=int(r["arm_order"])) for r in meeting.to_dict("records")],
                              higher_is_better=True, tie_band=tie_band, min_repeats=min_repeats, seed=seed)
            per_device = dict(zip(meeting.arm, meeting.per_device))
            shown = decision.choice or decision.leader
            row.update({"choice": decision.choice, "tok/s per device": per_device.get(shown, np.nan),
                        "next": decision.runner_up})
            if decision.margin is not None:
                row["ratio"] = decision.margin.ratio_text()
            elif decision.runner_up and per_device[decision.leader] and per_device[decision.runner_up]:
                row["ratio"] = f"{per_device[decision.leader] / per_device[decision.runner_up]:.2f}×"
            row["verdict"] = {
                DecisionKind.WINNER: "best", DecisionKind.ONLY_ONE: "only arm within the SLO",
                DecisionKind.TIE: f"tie within noise among {', '.join(decision.tied)}: the simplest taken",
                DecisionKind.TOO_FEW: f"not enough repeats (ahead: {decision.leader})"}[decision.kind]
        rows.append(row)
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "concurrency", "meeting", "choice",
                                       "tok/s per device", "next", "ratio", "verdict"])


def _crossing(before: pd.Series, after: pd.Series, slo: Slo) -> float:
    """The concurrency between two measured points where the first targeted figure reaches its limit."""
    crossings = [interpolate_crossing(before[CONCURRENCY], before[name], after[CONCURRENCY], after[name], limit)
                 for name, limit in slo.limits.items() if not after[name] <= limit]
    return min(crossings) if crossings else float(before[CONCURRENCY])


def max_concurrency(figures: pd.DataFrame, slo: Slo) -> pd.DataFrame:
    """Per workload, params and arm: the highest concurrency within the SLO, interpolated between measured points.

    The sustained range is from the lowest measured concurrency up to the first one that misses the SLO; a line
    through the two neighbouring medians gives the crossing. "≥ c" when every measured point meets it, "< c"
    when even the lowest does not.
    """
    rows = []
    for (workload, params, arm), line in figures.groupby(["workload", "workload_params_json", "arm"], sort=False):
        line = line.sort_values(CONCURRENCY).reset_index(drop=True)
        misses = line.index[~line.meets]
        if not len(misses):
            text, value = f"≥ {int(line[CONCURRENCY].max())} (every measured point meets it)", float(line[CONCURRENCY].max())
        elif misses[0] == 0:
            text, value = f"< {int(line[CONCURRENCY].iloc[0])} (the lowest measured point misses it)", float("nan")
        else:
            before, after = line.iloc[misses[0] - 1], line.iloc[misses[0]]
            value = _crossing(before, after, slo)
            text = f"≈ {value:.1f} (interpolated between c={int(before[CONCURRENCY])} and c={int(after[CONCURRENCY])})"
        rows.append({"workload": workload, "workload_params_json": params, "arm": arm,
                     "arm_order": line.arm_order.iloc[0], "max concurrency": value, "within the SLO": text,
                     "measured": ", ".join(str(int(c)) for c in line[CONCURRENCY])})
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "arm", "arm_order", "max concurrency",
                                       "within the SLO", "measured"])
