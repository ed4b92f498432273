"""$ per 1M output tokens per arm and point, from the aggregate decode tok/s and the devices an engine holds. Pure.

cost = gpu_hour_usd × devices / (aggregate tok/s × 3600 s/h) × 1e6, with the median aggregate over repeats.
It prices decode throughput at that concurrency only: idle time, prefill-heavy traffic and other phases are
not in it. Beside it, the median GPU joules per output token (runner.report.energy; NaN where not measured).
"""
from __future__ import annotations

import pandas as pd

from runner.report.arms import POINT_FIELDS
from runner.report.energy import J_PER_TOKEN, energy_per_token
from runner.schema import TrialStatus


def cost_table(trials: pd.DataFrame, *, gpu_hour_usd: float) -> pd.DataFrame:
    ok = trials[trials.status == TrialStatus.OK].copy()
    ok["agg_tok_s"] = pd.to_numeric(ok.decode_tok_s_aggregate, errors="coerce")
    ok["devices"] = pd.to_numeric(ok.tensor_parallel_size, errors="coerce").fillna(1).clip(lower=1)
    rows = []
    for key, group in ok.groupby([*POINT_FIELDS, "arm"], sort=False):
        aggregate, devices = float(group.agg_tok_s.median()), int(group.devices.iloc[0])
        usd = gpu_hour_usd * devices / (aggregate * 3600.0) * 1e6 if aggregate > 0 else float("nan")
        rows.append({"workload": key[0], "workload_params_json": key[1], "concurrency": key[2], "arm": key[3],
                     "arm_order": group.arm_order.iloc[0], "devices": devices, "aggregate tok/s": aggregate,
                     "$ per 1M output tokens": usd, J_PER_TOKEN: energy_per_token(group), "n": len(group)})
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "concurrency", "arm", "arm_order",
                                       "devices", "aggregate tok/s", "$ per 1M output tokens", J_PER_TOKEN, "n"])
