"""Acceptance and decode speed per prompt category (prompt_set workloads), and the same figures re-weighted to the
workload's production `mix`. Pure: reads persisted requests only.

Per category, pooled over the repeats of one arm at one point (measured requests, vLLM's definitions on the
per-request counters of vLLM ≥ 0.32): acceptance at position i = accepted drafts at i / verify steps; acceptance
rate = accepted / draft tokens; mean acceptance length = 1 + accepted / steps; decode tok/s per session =
1 / median TPOT. Under a mix each category's requests weigh w_c / n_c: the counters are the mix's per-request
means (Σ w_c · mean_c over Σ w_c), the TPOT median a weighted median.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from runner.report.render import md_table, section
from runner.schema import TrialStatus

REQUEST_COLUMNS = ["trial_id", "phase", "category", "tpot_s", "spec_num_steps", "spec_num_draft_tokens",
                   "spec_num_accepted_tokens", "spec_accepted_per_position", "error"]
TABLE_COLUMNS = ["workload", "params", "concurrency", "arm", "category", "requests", "share", "mix weight",
                 "decode tok/s per session", "mean acceptance length", "acceptance rate",
                 "acceptance per position"]


def read_category_requests(run_dirs: list[Path], sources: list[str]) -> pd.DataFrame:
    """The requests that carry a category, with the columns this section needs, tagged with their source."""
    from runner.sinks.parquet import has_table, read_frame

    frames = []
    for run_dir, source in zip(run_dirs, sources):
        if not has_table(Path(run_dir), "requests"):
            continue
        frame = read_frame(Path(run_dir), "requests", REQUEST_COLUMNS)
        frame = frame[frame.category.notna()]
        frame["source"] = source
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=[*REQUEST_COLUMNS, "source"])


def _mix(params_json: str) -> dict[str, float]:
    try:
        mix = json.loads(params_json or "{}").get("mix") or {}
    except (TypeError, ValueError, AttributeError):
        return {}
    return {str(k): float(v) for k, v in mix.items()} if isinstance(mix, dict) else {}


def _positions(values) -> np.ndarray:
    rows = [list(v) for v in values if v is not None and len(v)]
    if not rows:
        return np.zeros(0)
    width = max(len(r) for r in rows)
    return np.array([r + [0] * (width - len(r)) for r in rows], dtype=float)


def weighted_median(values: np.ndarray, weights: np.ndarray) -> float:
    """The value where the cumulative weight first reaches half (NaN for no weight)."""
    keep = ~np.isnan(values) & (weights > 0)
    values, weights = values[keep], weights[keep]
    if not len(values) or weights.sum() <= 0:
        return float("nan")
    order = np.argsort(values)
    cumulative = np.cumsum(weights[order])
    return float(values[order][np.searchsorted(cumulative, cumulative[-1] / 2.0)])


def _figures(group: pd.DataFrame, weights: np.ndarray) -> dict:
    """Weighted per-request means of the counters (weight 1 each: plain pooled sums) and the TPOT median."""
    tpot = pd.to_numeric(group.tpot_s, errors="coerce").to_numpy(dtype=float)
    median_tpot = weighted_median(tpot, weights)
    steps = pd.to_numeric(group.spec_num_steps, errors="coerce").to_numpy(dtype=float)
    has_spec = ~np.isnan(steps) & (steps > 0)
    out = {"decode tok/s per session": 1.0 / median_tpot if median_tpot > 0 else float("nan"),
           "mean acceptance length": float("nan"), "acceptance rate": float("nan"), "acceptance per position": "–"}
    if not has_spec.any():
        return out
    w = weights[has_spec]
    accepted = pd.to_numeric(group.spec_num_accepted_tokens, errors="coerce").to_numpy(dtype=float)[has_spec]
    drafted = pd.to_numeric(group.spec_num_draft_tokens, errors="coerce").to_numpy(dtype=float)[has_spec]
    steps = steps[has_spec]
    per_position = _positions(group.spec_accepted_per_position[has_spec])
    total_steps = float((w * steps).sum())
    out["mean acceptance length"] = 1.0 + float((w * accepted).sum()) / total_steps
    out["acceptance rate"] = float((w * accepted).sum()) / float((w * drafted).sum()) if (w * drafted).sum() else \
        float("nan")
    if per_position.size:
        rates = (w[:, None] * per_position).sum(axis=0) / total_steps
        out["acceptance per position"] = " / ".join(f"{r:.2f}" for r in rates)
    return out


def category_figures(trials: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """One row per (point, arm, category) of the ok trials' measured requests that carry a category, then one
    "mix" row per (point, arm) whose params name a mix."""
    ok = trials[trials.status == TrialStatus.OK]
    if not len(requests) or not len(ok):
        return pd.DataFrame(columns=TABLE_COLUMNS)
    chosen = requests[requests.error.isna() & (requests.phase == "measured")]
    chosen = chosen.merge(ok[["source", "trial_id", "workload", "workload_params_json", "concurrency", "arm",
                              "arm_order"]], on=["source", "trial_id"])
    rows = []
    keys = ["workload", "workload_params_json", "concurrency", "arm"]
    for (workload, params, concurrency, arm), group in chosen.groupby(keys, sort=False):
        counts = group.category.value_counts()
        mix = _mix(params)
        total_mix = sum(mix.values())
        base = {"workload": workload, "params": params, "concurrency": int(concurrency), "arm": arm,
                "arm_order": group.arm_order.iloc[0]}
        for category, mine in group.groupby("category", sort=True):
            rows.append({**base, "category": category, "requests": len(mine), "share": len(mine) / len(group),
                         "mix weight": mix.get(category, 0.0) / total_mix if mix else float("nan"),
                         **_figures(mine, np.ones(len(mine)))})
        if mix:
            weights = np.array([mix.get(c, 0.0) / total_mix / counts[c] for c in group.category], dtype=float)
            text = ", ".join(f"{c} {w / total_mix:.0%}" for c, w in mix.items())
            rows.append({**base, "category": f"mix ({text})", "requests": int((weights > 0).sum()),
                         "share": float("nan"), "mix weight": 1.0, **_figures(group, weights)})
    frame = pd.DataFrame(rows)
    frame = frame.sort_values(["workload", "params", "concurrency", "arm_order"], kind="stable")
    return frame[TABLE_COLUMNS].reset_index(drop=True)


def category_section(a) -> str:
    """The report's "Per prompt category" section (empty when no request carries a category)."""
    requests = a.frames.category_requests
    if not len(requests):
        return ""
    table = category_figures(a.trials, requests)
    if not len(table):
        return ""
    table["params"] = [a.params_text(w, p) or "–" for w, p in zip(table.workload, table.params)]
    table["share"] = [f"{v:.0%}" if v == v else "–" for v in table.share]
    table["mix weight"] = [f"{v:.0%}" if v == v else "–" for v in table["mix weight"]]
    return section(
        "Per prompt category",
        "Measured requests of each category, pooled over repeats: decode tok/s per session = 1 / median TPOT; "
        "mean acceptance length = 1 + accepted / verify steps; acceptance rate = accepted / draft tokens; "
        "acceptance per position = accepted at position i / verify steps (vLLM's definitions, from each request's "
        "own counters: vLLM ≥ 0.32; \"–\" where the engine gives none). A \"mix\" row re-weights the categories "
        "to the workload's `mix` (each category's requests weigh its weight over its count; the TPOT median is "
        "the weighted one).",
        md_table(table))
