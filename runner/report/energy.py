"""GPU energy per arm and point beside throughput: mean power and joules per output token over each trial's measure
window (runner.execution.energy), medians over repeats. Pure: reads the trials frame only.

A point none of whose trials was measured says why (the trials' energy_unmeasured), never 0. Where engines shared
their GPUs (engines_on_device above 1) the GPUs' energy is theirs together: the row says "shared".
"""
from __future__ import annotations

import pandas as pd

from runner.report.arms import POINT_FIELDS
from runner.schema import TrialStatus

J_PER_TOKEN = "J per output token"
COLUMNS = ["workload", "workload_params_json", "concurrency", "arm", "arm_order", "aggregate tok/s", "power W",
           "idle W", J_PER_TOKEN, "J per token range", "GPUs", "source", "measured", "n"]


def _number(frame: pd.DataFrame, column: str) -> pd.Series:
    return pd.to_numeric(frame[column], errors="coerce") if column in frame else pd.Series(float("nan"),
                                                                                             index=frame.index)


def energy_per_token(group: pd.DataFrame) -> float:
    """The median J per output token over a point's measured repeats (NaN: none measured)."""
    return float(_number(group, "energy_per_output_token_j").median())


def energy_table(trials: pd.DataFrame) -> pd.DataFrame:
    """One row per point and arm; empty where no trial carries energy columns (a run from before them)."""
    if trials is None or not len(trials) or "energy_unmeasured" not in trials:
        return pd.DataFrame(columns=COLUMNS)
    ok = trials[trials.status == TrialStatus.OK]
    rows = []
    for key, group in ok.groupby([*POINT_FIELDS, "arm"], sort=False):
        per_token = _number(group, "energy_per_output_token_j").dropna()
        shared = int(_number(group, "engines_on_device").fillna(1).max()) > 1
        if len(per_token):
            measured = f"{len(per_token)}/{len(group)}" + (" (shared GPU)" if shared else "")
        else:
            reasons = sorted({str(r) for r in group.energy_unmeasured.dropna()})
            measured = "not measured: " + ("; ".join(reasons) or "no reading")
        sources = sorted({str(s) for s in group.get("energy_source", pd.Series(dtype=str)).dropna()})
        rows.append({"workload": key[0], "workload_params_json": key[1], "concurrency": key[2], "arm": key[3],
                     "arm_order": group.arm_order.iloc[0] if "arm_order" in group else 0,
                     "aggregate tok/s": float(_number(group, "decode_tok_s_aggregate").median()),
                     "power W": float(_number(group, "power_mean_w").median()),
                     "idle W": float(_number(group, "power_idle_w").median()),
                     J_PER_TOKEN: energy_per_token(group),
                     "J per token range": (f"{per_token.min():.4g}–{per_token.max():.4g}" if len(per_token) > 1
                                           else "–"),
                     "GPUs": int(_number(group, "energy_gpus").max()) if _number(group, "energy_gpus").notna().any()
                     else None,
                     "source": "+".join(sources) or "–", "measured": measured, "n": len(group)})
    return pd.DataFrame(rows, columns=COLUMNS)


def energy_section(a) -> str:
    """report.md's "Energy" section ("" where the run's trials carry no energy columns)."""
    from runner.report.render import md_table, section

    table = energy_table(a.trials)
    if not len(table):
        return ""
    table = table.assign(point=a.point_text(table)).sort_values(["workload", "point", "arm_order"])
    shown = table[["workload", "point", "arm", "aggregate tok/s", "power W", "idle W", J_PER_TOKEN,
                   "J per token range", "GPUs", "source", "measured"]]
    return section("Energy", "Per arm and point, medians over repeats: the GPUs' energy over each trial's measure "
                   "window (NVML's total-energy counter, or power sampled where a GPU has none), summed over the "
                   "engine's GPUs; power W = energy ÷ window; J per output token = energy ÷ the measured requests' "
                   "output tokens. Idle W: the engine's GPUs at rest, read at its start. \"shared GPU\": engines ran "
                   "side by side there, so the energy is theirs together. Warm-up is outside every window.",
                   md_table(shown))
