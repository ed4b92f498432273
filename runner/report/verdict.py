"""Who wins where: per-point outcomes with intervals, the verdict table, crossovers and the best draft count.

Every comparison is the leader's median against the runner-up's, with a seeded
95 % interval of the ratio of medians (a bootstrap widened for few repeats:
runner.numerics.stats). A
winner is named only when that interval lies wholly outside the tie band and
each arm has at least MIN_REPEATS repeats; otherwise the outcome is "tie within
noise" or "not enough repeats". At a point where any arm is at the KV capacity
wall the outcome is "neither: KV capacity limit", whatever the numbers say, so
that a capacity limit is not read as a configuration effect.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

from runner.numerics.decision import Candidate, DecisionKind, decide
from runner.numerics.stats import MIN_REPEATS, TIE_BAND, ratio_interval
from runner.report.arms import POINT_FIELDS, axis_short, point_axes, point_coords
from runner.report.samples import deciding_metric

CAPACITY_OUTCOME = DecisionKind.CAPACITY.value
TIE_OUTCOME = DecisionKind.TIE.value
TOO_FEW_OUTCOME = DecisionKind.TOO_FEW.value
NO_RESULT_OUTCOME = DecisionKind.NO_RESULT.value
OUTCOME_COLUMNS = ["workload", "workload_params_json", "concurrency", "outcome", "kind", "choice", "tied", "leader",
                   "runner_up", "margin", "margin_lo", "margin_hi", "vs_off", "vs_off_lo", "vs_off_hi", "off_arm",
                   "arms", "n_min", "failed_arms", "decision"]


def candidates_of(group: pd.DataFrame) -> list[Candidate]:
    """The arms measured at one point (rows of the point table) as the decision module's candidates."""
    return [Candidate(arm=r.get("arm", f"k={int(r['k'])}"), values=tuple(r["values"]), k=int(r["k"]),
                      order=int(r.get("arm_order", 0))) for r in group.to_dict("records") if r["n"] > 0]


def point_outcomes(points: pd.DataFrame, *, walled: set[tuple], tie_band: float = TIE_BAND,
                   min_repeats: int = MIN_REPEATS, seed: int = 0) -> pd.DataFrame:
    """One row per workload point: its Decision (runner.numerics.decision) and the figures shown with it —
    the leader against the runner-up (> 1: the leader is better) and the choice against spec off."""
    rows = []
    for key, group in points.groupby(list(POINT_FIELDS), sort=False):
        metric = deciding_metric(key[0])
        measured = group[group.n > 0]
        decision = decide(candidates_of(group), higher_is_better=metric.higher_is_better, tie_band=tie_band,
                          min_repeats=min_repeats, seed=seed, walled=key in walled)
        row = {"workload": key[0], "workload_params_json": key[1], "concurrency": key[2],
               "outcome": decision.label, "kind": decision.kind.value, "choice": decision.choice,
               "tied": list(decision.tied), "leader": decision.leader, "runner_up": decision.runner_up,
               "arms": len(measured), "n_min": decision.n_min, "margin": np.nan, "margin_lo": np.nan,
               "margin_hi": np.nan, "vs_off": np.nan, "vs_off_lo": np.nan, "vs_off_hi": np.nan, "off_arm": None,
               "failed_arms": ", ".join(group[(group.n == 0) & (group.n_failed > 0)].arm), "decision": decision}
        by_arm = {r["arm"]: r for r in measured.to_dict("records")}
        if decision.runner_up is not None:
            row["margin"] = _point_ratio(by_arm[decision.leader]["median"], by_arm[decision.runner_up]["median"],
                                         metric.higher_is_better)
            if decision.margin is not None:
                row["margin_lo"], row["margin_hi"] = decision.margin.lo, decision.margin.hi
        shown = decision.choice or decision.leader
        off = measured[measured.k == 0].sort_values("arm_order")
        if shown is not None and len(off) and by_arm[shown]["k"] != 0:
            off_row = off.iloc[0]
            row["off_arm"] = off_row.arm
            row["vs_off"] = _point_ratio(by_arm[shown]["median"], off_row["median"], metric.higher_is_better)
            if min(by_arm[shown]["n"], off_row.n) >= 2:
                vs_off = ratio_interval(by_arm[shown]["values"], off_row["values"],
                                        higher_is_better=metric.higher_is_better, seed=seed)
                if vs_off is not None:
                    row["vs_off_lo"], row["vs_off_hi"] = vs_off.lo, vs_off.hi
        rows.append(row)
    return pd.DataFrame(rows, columns=OUTCOME_COLUMNS)


def _point_ratio(better: float, worse: float, higher_is_better: bool) -> float:
    if not better or not worse or np.isnan(better) or np.isnan(worse):
        return float("nan")
    return better / worse if higher_is_better else worse / better


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


def _finite(values) -> list[float]:
    return [float(v) for v in values if v is not None and not pd.isna(v)]


def ratio_range(values) -> str:
    values = _finite(values)
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:.2f}×" if abs(hi - lo) < 0.005 else f"{lo:.2f}–{hi:.2f}×"


def interval_range(los, his) -> str:
    """The span of the points' 95 % intervals: lowest lower bound to highest upper bound."""
    los, his = _finite(los), _finite(his)
    return f"{min(los):.2f}–{max(his):.2f}×" if los and his else "–"


def _by_how_much(kind: str, mine: pd.DataFrame, capacity: pd.DataFrame) -> str:
    if kind == CAPACITY_OUTCOME:
        share = capacity.merge(mine[list(POINT_FIELDS)], on=list(POINT_FIELDS)).demand_share
        if not len(share):
            return "see capacity flags"
        span = f"{share.min():.0%}" if share.max() - share.min() < 0.005 else f"{share.min():.0%}–{share.max():.0%}"
        return f"live KV demand {span} of the KV pool"
    if mine.leader.isna().all():
        return "–"
    pairs = ", ".join(dict.fromkeys(f"{a} / {b}" for a, b in zip(mine.leader, mine.runner_up) if b))
    if kind == TIE_OUTCOME:
        return f"{ratio_range(mine.margin)} ({pairs})"
    if kind == TOO_FEW_OUTCOME:
        if not pairs:
            return "ahead: " + ", ".join(dict.fromkeys(mine.leader))
        return f"ahead on the numbers: {pairs} {ratio_range(mine.margin)}"
    if mine.runner_up.notna().any():
        return f"{ratio_range(mine.margin)} over " + ", ".join(dict.fromkeys(mine.runner_up.dropna()))
    return "only arm measured"


def _outcome_text(kind: str, mine: pd.DataFrame) -> str:
    if kind == DecisionKind.WINNER:
        return "wins beyond noise"
    if kind == TIE_OUTCOME:
        tied = dict.fromkeys(a for t in mine.tied for a in t)
        return f"tie within noise among {', '.join(tied)}: the simplest taken"
    return kind


VERDICT_COLUMNS = ["workload", "choice", "outcome", "by how much", "95% interval", "over", "points", "notes"]


def verdict_table(outcomes: pd.DataFrame, trials: pd.DataFrame, *, capacity: pd.DataFrame,
                  divergence: pd.DataFrame, min_repeats: int = MIN_REPEATS) -> pd.DataFrame:
    """Per workload, one row per (choice, outcome): the arm to run, whether it won or was the simplest of a tie,
    by how much with its 95 % interval, over which range, and what to distrust."""
    rows = []
    for workload, group in outcomes.groupby("workload", sort=False):
        axes = point_axes(trials[trials.workload == workload])
        coords = [point_coords(r) for r in group.to_dict("records")]
        keys = list(zip(group.choice.fillna("–"), group.kind))
        for choice, kind in dict.fromkeys(keys):
            mine = group[[k == (choice, kind) for k in keys]]
            by = _by_how_much(kind, mine, capacity)
            interval = "–" if kind == CAPACITY_OUTCOME else interval_range(mine.margin_lo, mine.margin_hi)
            off_differs = mine.vs_off.notna() & (mine.runner_up != mine.off_arm)
            if kind != CAPACITY_OUTCOME and off_differs.any():
                # The choice's gain over spec off, when off is not already the runner-up.
                off_arms = ", ".join(dict.fromkeys(mine.off_arm[off_differs]))
                off_interval = interval_range(mine.vs_off_lo[off_differs], mine.vs_off_hi[off_differs])
                off_interval = "" if off_interval == "–" else f" [{off_interval}]"
                subject = choice if choice != "–" else "leader"
                by += f" ({subject}: {ratio_range(mine.vs_off[off_differs])}{off_interval} over {off_arms})"
            notes = []
            if 0 < mine.n_min.min() < min_repeats:
                notes.append(f"{int(mine.n_min.min())} repeat(s): below {min_repeats}, no choice "
                             f"(fix: sweep.repeats={min_repeats})")
            if len(divergence):
                diverged = divergence.merge(mine[list(POINT_FIELDS)], on=list(POINT_FIELDS))
                if len(diverged):
                    notes.append("outputs differ: " + ", ".join(sorted(set(diverged.arm))) + " vs "
                                 + ", ".join(sorted(set(diverged.reference))))
            failed = ", ".join(sorted({a for f in mine.failed_arms for a in f.split(", ") if a}))
            if failed:
                notes.append(f"failed: {failed}")
            rows.append({"workload": workload, "choice": choice, "outcome": _outcome_text(kind, mine),
                         "by how much": by, "95% interval": interval,
                         "over": describe_range([point_coords(r) for r in mine.to_dict("records")], coords, axes),
                         "points": f"{len(mine)}/{len(group)}", "notes": "; ".join(notes)})
    return pd.DataFrame(rows, columns=VERDICT_COLUMNS)


def crossovers(outcomes: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Adjacent points along one axis (the others fixed) where the choice (or the kind of non-answer) changes."""
    rows = []
    for workload, group in outcomes.groupby("workload", sort=False):
        axes = point_axes(trials[trials.workload == workload])
        records = [{**point_coords(r), "_outcome": r["choice"] if isinstance(r["choice"], str) else r["kind"]} for r in group.to_dict("records")]
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


def _k_label(k) -> str:
    return "0 (off)" if k == 0 else str(int(k))


def choose_k(candidates: pd.DataFrame, *, higher_is_better: bool, tie_band: float = TIE_BAND,
             min_repeats: int = MIN_REPEATS, seed: int = 0) -> dict:
    """The best draft count among one family's arms at one point (`arm`, `k`, `values`, `n`, `arm_order` per arm):
    the decision module's choice among them, so the smallest k tied with the leader (fewer drafts cost less
    memory and waste less when they miss). Below min_repeats repeats there is no choice (best_k None);
    `leader_k` still names the k ahead on the numbers."""
    decision = decide(candidates_of(candidates), higher_is_better=higher_is_better, tie_band=tie_band,
                      min_repeats=min_repeats, seed=seed)
    k_of = {c.arm: c.k for c in candidates_of(candidates)}
    if decision.leader is None:
        return {"best_k": None, "leader_k": None, "tied": [], "n_min": 0}
    return {"best_k": None if decision.choice is None else k_of[decision.choice], "leader_k": k_of[decision.leader],
            "tied": sorted(k_of[a] for a in decision.tied), "n_min": decision.n_min}


def draft_count_choices(points: pd.DataFrame, *, tie_band: float = TIE_BAND, min_repeats: int = MIN_REPEATS,
                        seed: int = 0) -> pd.DataFrame:
    """Per workload point and family × spec method, the chosen k with each candidate's median and interval."""
    rows = []
    spec = points[(points.k > 0) & ~points.scheduled.astype(bool)]
    for (workload, family, method), arms in spec.groupby(["workload", "family", "spec_method"], sort=False):
        metric = deciding_metric(workload)
        off = points[(points.workload == workload) & (points.family == family) & (points.k == 0)]
        pool = pd.concat([off, arms])
        for key, candidates in pool.groupby(["workload_params_json", "concurrency"], sort=False):
            choice = choose_k(candidates, higher_is_better=metric.higher_is_better, tie_band=tie_band,
                              min_repeats=min_repeats, seed=seed)
            scores = ", ".join(
                f"k={int(r.k)}: {metric.display(r.median)} [{metric.display(r.ci_lo)}–{metric.display(r.ci_hi)}] "
                f"(n={int(r.n)})" if r.n else f"k={int(r.k)}: failed" for r in candidates.sort_values("k").itertuples())
            rows.append({"workload": workload, "family": family, "method": method, "workload_params_json": key[0],
                         "concurrency": key[1], "best_k": choice["best_k"], "leader_k": choice["leader_k"],
                         "tied": choice["tied"], "n_min": choice["n_min"],
                         "k_values": sorted(candidates.k.astype(int)), "scores": scores})
    return pd.DataFrame(rows, columns=["workload", "family", "method", "workload_params_json", "concurrency",
                                       "best_k", "leader_k", "tied", "n_min", "k_values", "scores"])


SINGLE_K_RULE = ("when one k must serve every load: the k tied for first at the most measured points (as the "
                 "recommendation's one setting for all); equal counts go to the smaller k")


def single_k(group: pd.DataFrame):
    """One k for every load level of a family (see SINGLE_K_RULE); None when no point has a choice."""
    counts: dict[int, int] = {}
    for best, tied in zip(group.best_k, group.tied):
        if best is None or pd.isna(best):
            continue
        for k in tied:
            counts[int(k)] = counts.get(int(k), 0) + 1
    if not counts:
        return None
    return min(counts, key=lambda k: (-counts[k], k))


def draft_count_summary(choices: pd.DataFrame, trials: pd.DataFrame, *,
                        min_repeats: int = MIN_REPEATS) -> pd.DataFrame:
    """One row per workload and family: the best k and where, the single k, ties named, too few repeats said."""
    rows = []
    for (workload, family, method), group in choices.groupby(["workload", "family", "method"], sort=False):
        axes = point_axes(trials[trials.workload == workload])
        coords = [point_coords(r) for r in group.to_dict("records")]
        known = group.best_k.map(lambda k: k is not None and not pd.isna(k))
        parts = []
        for k in dict.fromkeys(group.best_k[known]):
            mine = group[known & (group.best_k == k)]
            parts.append(f"k={_k_label(k)} at "
                         f"{describe_range([point_coords(r) for r in mine.to_dict('records')], coords, axes)}")
        if (~known).any():
            mine = group[~known]
            parts.append("no choice (not enough repeats) at "
                         f"{describe_range([point_coords(r) for r in mine.to_dict('records')], coords, axes)}")
        notes = []
        tied = group[known & (group.tied.map(len) > 1)]
        if len(tied):
            notes.append("ties (within noise, smaller k taken): " + "; ".join(
                f"{'/'.join(map(str, t))}" for t in dict.fromkeys(tuple(x) for x in tied.tied)))
        n_min = int(group.n_min.min())
        if n_min < min_repeats:
            leaders = ", ".join(f"k={_k_label(k)}" for k in dict.fromkeys(group.leader_k.dropna()))
            notes.append(f"only {n_min} repeat(s) per arm: fewer than {min_repeats}, so no k is chosen there "
                         f"(ahead on the numbers: {leaders}; fix: sweep.repeats={min_repeats})")
        k_values = sorted({k for ks in group.k_values for k in ks})
        if len([k for k in k_values if k > 0]) < 2:
            notes.append(f"only k={', '.join(map(str, k_values))} measured")
        if 0 not in k_values:
            notes.append("no spec-off arm with these settings: k is not compared with off here")
        one = single_k(group)
        rows.append({"workload": workload, "method": method + (f" ({family})" if family else ""),
                     "k tried": ", ".join(_k_label(k) for k in k_values), "best k": "; ".join(parts),
                     "single k": "–" if one is None else _k_label(one), "repeats": n_min,
                     "notes": "; ".join(notes)})
    return pd.DataFrame(rows, columns=["workload", "method", "k tried", "best k", "single k", "repeats", "notes"])
