"""Who wins where: per-point outcomes, the verdict table, crossovers and the best draft count.

Within 1% counts as a tie throughout. At a point where any arm is at the KV
capacity wall the outcome is "neither: KV capacity limit", whatever the
numbers say, so that a capacity limit is not read as a configuration effect.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from runner.report.arms import POINT_FIELDS, axis_short, point_axes, point_coords
from runner.report.metrics import deciding_metric

TIE_TOLERANCE = 0.01
MIN_REPEATS = 3
CAPACITY_OUTCOME = "neither: KV capacity limit"
TIE_OUTCOME = "tie (within 1%)"


def _speedup(better: float, worse: float, *, higher_is_better: bool) -> float:
    if not better or not worse or np.isnan(better) or np.isnan(worse):
        return float("nan")
    return better / worse if higher_is_better else worse / better


def point_outcomes(points: pd.DataFrame, *, walled: set[tuple]) -> pd.DataFrame:
    """One row per workload point: the outcome, the arm ahead on the numbers, the runner-up and the margin."""
    rows = []
    for key, group in points.groupby(list(POINT_FIELDS), sort=False):
        metric = deciding_metric(key[0])
        measured = group[group.n > 0]
        ranked = measured.sort_values(["median", "arm_order"], ascending=[not metric.higher_is_better, True])
        row = {"workload": key[0], "workload_params_json": key[1], "concurrency": key[2],
               "arms": len(measured), "n_min": int(measured.n.min()) if len(measured) else 0,
               "leader": None, "runner_up": None, "margin": float("nan"), "vs_off": float("nan"), "off_arm": None,
               "failed_arms": ", ".join(group[group.n == 0].arm)}
        if not len(ranked):
            row["outcome"] = "no result (all arms failed)"
        else:
            leader = ranked.iloc[0]
            row["leader"] = leader.arm
            off = measured[measured.k == 0].sort_values("arm_order")
            if len(off) and leader.k != 0:
                row["off_arm"] = off.iloc[0].arm
                row["vs_off"] = _speedup(leader["median"], off.iloc[0]["median"],
                                         higher_is_better=metric.higher_is_better)
            if len(ranked) > 1:
                second = ranked.iloc[1]
                row["runner_up"] = second.arm
                row["margin"] = _speedup(leader["median"], second["median"],
                                         higher_is_better=metric.higher_is_better)
            if key in walled:
                row["outcome"] = CAPACITY_OUTCOME
            elif len(ranked) > 1 and row["margin"] < 1 + TIE_TOLERANCE:
                row["outcome"] = TIE_OUTCOME
            else:
                row["outcome"] = leader.arm
        rows.append(row)
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "concurrency", "outcome", "leader",
                                       "runner_up", "margin", "vs_off", "off_arm", "arms", "n_min", "failed_arms"])


def _sort_key(value):
    return (0, float(value), "") if isinstance(value, (int, float, np.integer, np.floating)) else (1, 0.0, str(value))


def _axis_values(values, all_values) -> str:
    """Compact text for a set of axis values: a range when they are contiguous among the axis's values."""
    ordered = sorted(set(all_values), key=_sort_key)
    chosen = sorted(set(values), key=_sort_key)
    positions = [ordered.index(v) for v in chosen]
    if len(chosen) > 2 and positions == list(range(positions[0], positions[-1] + 1)):
        return f"{chosen[0]}–{chosen[-1]}"
    return ", ".join(str(v) for v in chosen)


def describe_range(coords: list[dict], all_coords: list[dict], axes: list[str]) -> str:
    """Where an outcome holds, over the workload's axes: per-axis values when they form a full grid, else points."""
    if not axes:
        return "the one point measured"
    if len(coords) == len(all_coords):
        return " × ".join(f"{axis_short(a)}={_axis_values([c[a] for c in all_coords], [c[a] for c in all_coords])}"
                          for a in axes) + " (all)"
    per_axis = {a: sorted({c[a] for c in coords}, key=_sort_key) for a in axes}
    grid = math.prod(len(v) for v in per_axis.values())
    if grid == len(coords):
        return ", ".join(f"{axis_short(a)}={_axis_values(per_axis[a], [c[a] for c in all_coords])}" for a in axes)
    shown = ["(" + ", ".join(f"{axis_short(a)}={c[a]}" for a in axes) + ")" for c in coords[:6]]
    return "; ".join(shown) + (f"; … {len(coords) - 6} more" if len(coords) > 6 else "")


def _ratio_range(values) -> str:
    values = [v for v in values if v is not None and not np.isnan(v)]
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}×" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}×"


def verdict_table(outcomes: pd.DataFrame, trials: pd.DataFrame, *, capacity: pd.DataFrame,
                  divergence: pd.DataFrame) -> pd.DataFrame:
    """Per workload, one row per outcome: the winner, by how much, over which range, and what to distrust."""
    rows = []
    for workload, group in outcomes.groupby("workload", sort=False):
        axes = point_axes(trials[trials.workload == workload])
        coords = [point_coords(r) for r in group.to_dict("records")]
        for outcome in dict.fromkeys(group.outcome):
            mine = group[group.outcome == outcome]
            mine_coords = [point_coords(r) for r in mine.to_dict("records")]
            if outcome == CAPACITY_OUTCOME:
                share = capacity.merge(mine[list(POINT_FIELDS)], on=list(POINT_FIELDS)).demand_share
                span = f"{share.min():.0%}" if share.max() - share.min() < 0.005 else f"{share.min():.0%}–{share.max():.0%}"
                by = f"live KV demand {span} of the KV pool" if len(share) else "see capacity flags"
            elif outcome == TIE_OUTCOME:
                by = "< 1% between " + ", ".join(sorted({f"{a} / {b}" for a, b in zip(mine.leader, mine.runner_up)}))
            elif mine.leader.isna().all():
                by = "–"
            elif mine.runner_up.notna().any():
                by = f"{_ratio_range(mine.margin)} over " + ", ".join(dict.fromkeys(mine.runner_up.dropna()))
            else:
                by = "only arm measured"
            off_differs = mine.vs_off.notna() & (mine.runner_up != mine.off_arm)
            if outcome != CAPACITY_OUTCOME and off_differs.any():
                # The leader's gain over spec off, when off is not already the runner-up.
                off_arms = ", ".join(dict.fromkeys(mine.off_arm[off_differs]))
                by += f" ({_ratio_range(mine.vs_off[off_differs])} over {off_arms})"
            notes = []
            if 0 < mine.n_min.min() < MIN_REPEATS:
                notes.append(f"{int(mine.n_min.min())} repeat(s): below {MIN_REPEATS}, not robust")
            if len(divergence):
                diverged = divergence.merge(mine[list(POINT_FIELDS)], on=list(POINT_FIELDS))
                if len(diverged):
                    notes.append("outputs differ: " + ", ".join(sorted(set(diverged.arm))) + " vs "
                                 + ", ".join(sorted(set(diverged.reference))))
            failed = ", ".join(sorted({a for f in mine.failed_arms for a in f.split(", ") if a}))
            if failed:
                notes.append(f"failed: {failed}")
            rows.append({"workload": workload, "winner": outcome, "by how much": by,
                         "over": describe_range(mine_coords, coords, axes),
                         "points": f"{len(mine)}/{len(group)}", "notes": "; ".join(notes)})
    return pd.DataFrame(rows, columns=["workload", "winner", "by how much", "over", "points", "notes"])


def crossovers(outcomes: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Adjacent points along one axis (the others fixed) where the outcome changes."""
    rows = []
    for workload, group in outcomes.groupby("workload", sort=False):
        axes = point_axes(trials[trials.workload == workload])
        records = [{**point_coords(r), "_outcome": r["outcome"]} for r in group.to_dict("records")]
        for axis in axes:
            others = [a for a in axes if a != axis]
            lines: dict[tuple, list[dict]] = {}
            for r in records:
                lines.setdefault(tuple(str(r[a]) for a in others), []).append(r)
            for fixed, line in lines.items():
                line = sorted(line, key=lambda r: _sort_key(r[axis]))
                for before, after in zip(line, line[1:]):
                    if before["_outcome"] != after["_outcome"]:
                        rows.append({"workload": workload, "axis": axis_short(axis),
                                     "between": f"{before[axis]} → {after[axis]}",
                                     "with": ", ".join(f"{axis_short(a)}={v}" for a, v in zip(others, fixed)) or "–",
                                     "from": before["_outcome"], "to": after["_outcome"]})
    return pd.DataFrame(rows, columns=["workload", "axis", "between", "with", "from", "to"])


def _k_label(k: int) -> str:
    return "0 (off)" if k == 0 else str(int(k))


def choose_k(candidates: pd.DataFrame, *, higher_is_better: bool) -> dict:
    """The best draft count among one family's arms at one point.

    Score = median ∓ 1.4826·MAD (a noisy arm is judged by its pessimistic side); scores within 1% of the
    best tie, and the smallest tied k wins (fewer drafts cost less memory and waste less when they miss).
    """
    scored = candidates.dropna(subset=["score"])
    if not len(scored):
        return {"best_k": None, "tied": [], "n_min": 0}
    best = scored.score.max() if higher_is_better else scored.score.min()
    tolerance = TIE_TOLERANCE * abs(best)
    tied = scored[(scored.score - best).abs() <= tolerance].k.astype(int).tolist()
    return {"best_k": min(tied), "tied": sorted(tied), "n_min": int(scored.n.min())}


def draft_count_choices(points: pd.DataFrame) -> pd.DataFrame:
    """Per workload point and family × spec method, the chosen k with its scores and repeat count."""
    rows = []
    spec = points[points.k > 0]
    for (workload, family, method), arms in spec.groupby(["workload", "family", "spec_method"], sort=False):
        metric = deciding_metric(workload)
        off = points[(points.workload == workload) & (points.family == family) & (points.k == 0)]
        pool = pd.concat([off, arms])
        for key, candidates in pool.groupby(["workload_params_json", "concurrency"], sort=False):
            choice = choose_k(candidates, higher_is_better=metric.higher_is_better)
            scores = ", ".join(f"k={int(r.k)}: {metric.display(r.score)} (n={int(r.n)})" if r.n else
                               f"k={int(r.k)}: failed" for r in candidates.sort_values("k").itertuples())
            rows.append({"workload": workload, "family": family, "method": method, "workload_params_json": key[0],
                         "concurrency": key[1], "best_k": choice["best_k"], "tied": choice["tied"],
                         "n_min": choice["n_min"], "k_values": sorted(candidates.k.astype(int)), "scores": scores})
    return pd.DataFrame(rows, columns=["workload", "family", "method", "workload_params_json", "concurrency",
                                       "best_k", "tied", "n_min", "k_values", "scores"])


def draft_count_summary(choices: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """One row per workload and family: the best k and where, ties named, too few repeats said."""
    rows = []
    for (workload, family, method), group in choices.groupby(["workload", "family", "method"], sort=False):
        axes = point_axes(trials[trials.workload == workload])
        coords = [point_coords(r) for r in group.to_dict("records")]
        parts = []
        for k in dict.fromkeys(group.best_k):
            mine = group[group.best_k == k] if k is not None else group[group.best_k.isna()]
            where = describe_range([point_coords(r) for r in mine.to_dict("records")], coords, axes)
            parts.append(f"k={_k_label(k) if k is not None else '?'} at {where}")
        notes = []
        tied = group[group.tied.map(len) > 1]
        if len(tied):
            notes.append("ties (within 1%, smaller k taken): " + "; ".join(
                f"{'/'.join(map(str, t))}" for t in dict.fromkeys(tuple(x) for x in tied.tied)))
        n_min = int(group.n_min.min())
        if n_min < MIN_REPEATS:
            notes.append(f"only {n_min} repeat(s) per arm: fewer than {MIN_REPEATS}, so this is not a robust "
                         f"choice (fix: sweep.repeats={MIN_REPEATS})")
        k_values = sorted({k for ks in group.k_values for k in ks})
        if len([k for k in k_values if k > 0]) < 2:
            notes.append(f"only k={', '.join(map(str, k_values))} measured")
        rows.append({"workload": workload, "method": method + (f" ({family})" if family else ""),
                     "k tried": ", ".join(_k_label(k) for k in k_values), "best k": "; ".join(parts),
                     "repeats": n_min, "notes": "; ".join(notes)})
    return pd.DataFrame(rows, columns=["workload", "method", "k tried", "best k", "repeats", "notes"])
