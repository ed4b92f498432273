"""The Answer: one row per workload, what to deploy and how sure, read before anything else. Pure.

Shaped like the reference studies' verdict tables. Every choice is the decision module's (the per-point
decisions in the outcomes table and the recommendation built from them); this module only words them. A sweep
that names its question (`sweep.question`: arms a and b) gets that comparison stated per workload, even
where a third arm leads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pandas as pd

from runner.measurement.decision import Candidate, DecisionKind, decide
from runner.plan.question import matches
from runner.report.arms import POINT_FIELDS, point_axes, point_coords
from runner.report.samples import deciding_metric
from runner.report.verdict import crossovers as crossings_of
from runner.report.verdict import describe_range, interval_range, ratio_range

ANSWER_COLUMNS = ["workload", "deploy", "by how much", "flips", "how sure", "caveats"]


@dataclass(frozen=True, kw_only=True)
class Question:
    name: str
    a: dict[str, Any]
    b: dict[str, Any]


def question_of(config: dict) -> Optional[Question]:
    """The persisted config's sweep.question (None when the sweep names none)."""
    raw = ((config or {}).get("sweep") or {}).get("question")
    if not raw:
        return None
    a, b = (_selector_of(raw.get(side)) for side in ("a", "b"))
    return Question(name=raw.get("name") or "a or b?", a=a, b=b)


def answerable_question(config: dict, engines: pd.DataFrame) -> Optional[Question]:
    """The sweep's question where both sides name measured arms (the plan warned otherwise); else None."""
    question = question_of(config)
    if question is None or not (side_arms(engines, question.a) and side_arms(engines, question.b)):
        return None
    return question


def _selector_of(raw) -> dict[str, Any]:
    axes = {k: v for k, v in dict(raw or {}).items() if v is not None}
    if axes.get("spec_method") is False:  # YAML reads a bare off as false
        axes["spec_method"] = "off"
    return axes


def selector_text(selector: dict[str, Any]) -> str:
    return ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in selector.items())


def side_arms(engines: pd.DataFrame, selector: dict[str, Any]) -> list[str]:
    """The arms whose engine settings match every axis a question's side names."""
    return list(dict.fromkeys(e["arm"] for e in engines.to_dict("records") if matches(e, selector)))


def _side_label(arms: list[str]) -> str:
    return arms[0] if len(arms) == 1 else "best of " + "/".join(arms)


def _best(rows: pd.DataFrame, higher_is_better: bool) -> Optional[dict]:
    measured = rows[rows.n > 0]
    if not len(measured):
        return None
    return measured.sort_values("median", ascending=not higher_is_better).iloc[0].to_dict()


def question_outcomes(points: pd.DataFrame, engines: pd.DataFrame, question: Question, *, tie_band: float,
                      min_repeats: int, seed: int) -> pd.DataFrame:
    """Per point: a's best arm against b's best arm by the workload's deciding figure (the decision rule on the
    two alone): which side is better, by how much, with its interval."""
    a_arms, b_arms = side_arms(engines, question.a), side_arms(engines, question.b)
    rows = []
    for key, group in points.groupby(list(POINT_FIELDS), sort=False):
        metric = deciding_metric(key[0])
        a = _best(group[group.arm.isin(a_arms)], metric.higher_is_better)
        b = _best(group[group.arm.isin(b_arms)], metric.higher_is_better)
        row = {"workload": key[0], "workload_params_json": key[1], "concurrency": key[2], "side": None,
               "kind": DecisionKind.NO_RESULT.value, "ratio": float("nan"), "lo": float("nan"), "hi": float("nan")}
        if a is not None and b is not None:
            decision = decide([Candidate(arm="a", values=tuple(a["values"])),
                               Candidate(arm="b", values=tuple(b["values"]))],
                              higher_is_better=metric.higher_is_better, tie_band=tie_band, min_repeats=min_repeats,
                              seed=seed)
            better, worse = (a, b) if decision.leader == "a" else (b, a)
            ratio = better["median"] / worse["median"] if metric.higher_is_better else worse["median"] / better["median"]
            row.update({"side": decision.leader, "kind": decision.kind.value, "ratio": ratio,
                        "a_arm": a["arm"], "b_arm": b["arm"]})
            if decision.margin is not None:
                row["lo"], row["hi"] = decision.margin.lo, decision.margin.hi
        rows.append(row)
    return pd.DataFrame(rows)


def _where(mine: pd.DataFrame, group: pd.DataFrame, trials: pd.DataFrame, workload: str) -> str:
    axes = point_axes(trials[trials.workload == workload])
    return describe_range([point_coords(r) for r in mine.to_dict("records")],
                          [point_coords(r) for r in group.to_dict("records")], axes)


def _question_text(q: pd.DataFrame, labels: dict[str, str], trials: pd.DataFrame, workload: str) -> str:
    parts = []
    for (side, kind), mine in q.groupby(["side", "kind"], sort=False, dropna=False):
        where = _where(mine, q, trials, workload)
        if kind == DecisionKind.WINNER:
            better, worse = labels[side], labels["b" if side == "a" else "a"]
            parts.append(f"{better} {ratio_range(mine.ratio)} [{interval_range(mine.lo, mine.hi)}] over {worse} "
                         f"at {where}")
        elif kind == DecisionKind.TIE:
            parts.append(f"tie ({ratio_range(mine.ratio)}, [{interval_range(mine.lo, mine.hi)}]) at {where}")
        elif kind == DecisionKind.TOO_FEW:
            parts.append(f"{labels.get(side, side)} ahead {ratio_range(mine.ratio)}, too few repeats, at {where}")
        else:
            parts.append(f"not both measured at {where}")
    return "; ".join(parts)


def _third_arm_text(entry: dict, q: pd.DataFrame, mine: pd.DataFrame) -> str:
    """Where the arm to deploy is neither side of the question, what it leads by (the question stays stated)."""
    sides = set(q.a_arm.dropna()) | set(q.b_arm.dropna()) if "a_arm" in q else set()
    choice = entry.get("choice")
    if not choice or choice in sides:
        return ""
    return f" — deployed arm {choice}: {_margin_text(mine[mine.choice == choice]) if (mine.choice == choice).any() else 'tied for first at the most points'}"


def _deploy_text(entry: dict) -> str:
    per_load = entry.get("choice_per_load") or []
    choice = entry.get("choice")
    if len(per_load) == 1:
        arm = per_load[0]["arm"]
        return arm if arm == choice else f"no choice: {arm.removeprefix('no choice ')}"
    loads = "; ".join(f"{p['arm']} at {p['where']}" for p in per_load)
    return loads + (f" — one setting for all: {choice}" if choice else "")


def _margin_text(mine: pd.DataFrame) -> str:
    parts = []
    for kind, rows in mine.groupby("kind", sort=False):
        if kind == DecisionKind.WINNER:
            parts.append(f"{ratio_range(rows.margin)} over " + ", ".join(dict.fromkeys(rows.runner_up.dropna())))
        elif kind == DecisionKind.TIE:
            parts.append(f"tied for first: {', '.join(dict.fromkeys(a for t in rows.tied for a in t))} "
                         f"({ratio_range(rows.margin)} apart)")
        elif kind == DecisionKind.TOO_FEW:
            parts.append("too few repeats to say")
        elif kind == DecisionKind.CAPACITY:
            parts.append("KV capacity wall: no configuration effect")
    return "; ".join(parts) or "–"


def _sure_text(mine: pd.DataFrame, q: Optional[pd.DataFrame]) -> str:
    lo, hi = (q.lo, q.hi) if q is not None and q.lo.notna().any() else (mine.margin_lo, mine.margin_hi)
    interval = interval_range(lo, hi)
    n = int(mine.n_min.min()) if len(mine) else 0
    return (f"95% [{interval}]" if interval != "–" else "no interval") + f", {n} repeat(s)"


def _flips_text(crossovers: pd.DataFrame) -> str:
    if not len(crossovers):
        return "–"
    return "; ".join(f"{r['axis']} {r['between']}" + (f" ({r['with']})" if r["with"] != "–" else "")
                     + f": {r['from']} → {r['to']}" for r in crossovers.to_dict("records"))


def caveat_tags(workload: str, *, config: dict, outcomes: pd.DataFrame, degenerate: pd.DataFrame,
                divergence: pd.DataFrame, failures: pd.DataFrame, min_repeats: int) -> str:
    """Short tags; report.md and recommendation.yaml say each one in full."""
    tags = []
    model = (config or {}).get("model") or {}
    if model.get("load_format") == "dummy":
        tags.append("dummy weights")
    if model.get("builtin") and not model.get("path"):
        tags.append("built-in model")
    if len(degenerate) and (degenerate.workload == workload).any():
        tags.append("degenerate outputs")
    if len(divergence) and (divergence.workload == workload).any():
        tags.append("outputs differ")
    if (outcomes.kind == DecisionKind.CAPACITY).any():
        tags.append("capacity wall")
    if ((outcomes.n_min > 0) & (outcomes.n_min < min_repeats)).any():
        tags.append(f"< {min_repeats} repeats")
    if len(failures):
        tags.append("failed: " + ", ".join(sorted(set(map(str, failures.arm)))))
    return ", ".join(tags) or "–"


def answer_table(*, outcomes: pd.DataFrame, points: pd.DataFrame, engines: pd.DataFrame, trials: pd.DataFrame,
                 crossovers: pd.DataFrame, recommendation: dict, config: dict, degenerate: pd.DataFrame,
                 divergence: pd.DataFrame, failures: pd.DataFrame, tie_band: float, min_repeats: int,
                 seed: int) -> pd.DataFrame:
    question = answerable_question(config, engines)
    q_all = None
    labels: dict[str, str] = {}
    if question is not None:
        labels = {"a": _side_label(side_arms(engines, question.a)) or "a",
                  "b": _side_label(side_arms(engines, question.b)) or "b"}
        q_all = question_outcomes(points, engines, question, tie_band=tie_band, min_repeats=min_repeats, seed=seed)
    rows = []
    for workload, mine in outcomes.groupby("workload", sort=False):
        entry = recommendation["workloads"].get(workload, {})
        q = q_all[q_all.workload == workload] if q_all is not None and len(q_all) else None
        by = _margin_text(mine)
        if q is not None and len(q):
            by = _question_text(q, labels, trials, workload) + _third_arm_text(entry, q, mine)
        flips = _flips_text(crossovers[crossovers.workload == workload]) if len(crossovers) else "–"
        if q is not None and len(q):
            sided = q.assign(choice=[labels.get(s) if k == DecisionKind.WINNER else None
                                     for s, k in zip(q.side, q.kind)])
            asked = _flips_text(crossings_of(sided, trials))
            if asked != "–":
                flips = f"question: {asked}" + ("" if flips == "–" else f"; deploy: {flips}")
        rows.append({"workload": f"{workload} ({deciding_metric(workload).label})", "deploy": _deploy_text(entry),
                     "by how much": by, "flips": flips,
                     "how sure": _sure_text(mine, q),
                     "caveats": caveat_tags(workload, config=config, outcomes=mine, degenerate=degenerate,
                                            divergence=divergence, failures=failures, min_repeats=min_repeats)})
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def draft_count_lines(draft_summary: pd.DataFrame, draft_choices: pd.DataFrame) -> list[str]:
    """The draft-count question in plain words, one line per workload and spec method (ties said as ties)."""
    lines = []
    for r in draft_summary.to_dict("records"):
        if "no spec-off arm" in (r["notes"] or "") and "," not in r["k tried"]:
            continue  # one k and no off arm: no draft-count question to answer
        method, _, family = r["method"].partition(" (")
        mine = draft_choices[(draft_choices.workload == r["workload"]) & (draft_choices.method == method)
                             & (draft_choices.family == family.removesuffix(")"))]
        all_tied = len(mine) and all(len(t) == len(ks) and len(ks) > 1 for t, ks in zip(mine.tied, mine.k_values)
                                     if t is not None)
        label = deciding_metric(r["workload"]).label
        if r["single k"] == "–":
            text = f"no k can be chosen yet ({r['notes'] or 'no point has a choice'})"
        elif all_tied:
            text = (f"no k changes {label} here beyond noise (k={r['k tried']} tied at every point): "
                    f"run k={r['single k']}")
        else:
            text = f"{r['best k']}; one k for all loads: {r['single k']}" + (f" ({r['notes']})" if r["notes"] else "")
        lines.append(f"- **{r['workload']}, {r['method']}**: {text}")
    return lines
