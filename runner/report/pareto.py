"""Per workload: tok/s per session against tok/s per device across concurrency, and the non-dominated front. Pure.

Each (arm, concurrency) point is the median over repeats of the trial's decode tok/s per session (vLLM-style,
1 / median TPOT) and of its aggregate decode tok/s divided by the devices the engine holds. A point is on the
front when no other point of the same workload and params is at least as good on both axes and better on one.
"""
from __future__ import annotations

import pandas as pd

from runner.report.latency_target import PER_DEVICE, per_device
from runner.schema import TrialStatus


def pareto_points(trials: pd.DataFrame) -> pd.DataFrame:
    ok = trials[trials.status == TrialStatus.OK].copy()
    ok[PER_DEVICE] = per_device(ok)
    ok["per_session"] = pd.to_numeric(ok.decode_tok_s_per_session, errors="coerce")
    keys = ["workload", "workload_params_json", "arm", "concurrency"]
    frame = (ok.groupby(keys, sort=False)
             .agg(arm_order=("arm_order", "first"), per_device=(PER_DEVICE, "median"),
                  per_session=("per_session", "median"), n=("trial_id", "size"))
             .reset_index().dropna(subset=["per_device", "per_session"]))
    frame["on_front"] = False
    for _, group in frame.groupby(["workload", "workload_params_json"], sort=False):
        frame.loc[group.index, "on_front"] = front_mask(group.per_device.tolist(), group.per_session.tolist())
    return frame


def front_mask(xs: list[float], ys: list[float]) -> list[bool]:
    """True where no other point is ≥ on both axes and > on one (both axes: higher is better)."""
    points = list(zip(xs, ys))
    return [not any(ox >= x and oy >= y and (ox > x or oy > y) for ox, oy in points) for x, y in points]
