"""The Answer: one row per workload, what to deploy and how sure, read before anything else. Pure.

Shaped like the reference studies' verdict tables. Every choice is the decision module's (the per-point
decisions in the outcomes table and the recommendation built from them); this module only words them. A sweep
that names its question (`sweep.question`: arms a and b) gets that comparison stated per workload, even
where a third arm leads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

import pandas as pd

from runner.numerics.decision import Candidate, DecisionKind, decide
from runner.plan.question import matches
from runner.report.arms import POINT_FIELDS
from runner.report.brief import by_line, counts_text, fit, lines_text, where_text
from runner.report.samples import deciding_metric
from runner.report.verdict import crossovers as crossings_of
from runner.report.verdict import interval_range, ratio_range
from runner.report.answer_caveats import tags_text
from runner.report.study_answer import Answerer

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


def _question_text(q: pd.DataFrame, labels: dict[str, str], trials: pd.DataFrame) -> tuple[str, str]:
    """The question's answer per (side, kind), in full and in brief (counts instead of where)."""
    full, brief = [], []
    for (side, kind), mine in q.groupby(["side", "kind"], sort=False, dropna=False):
        where = where_text(q, [i in mine.index for i in q.index], trials)
        at = f" at {where}" if where else ""
        share = f" at {len(mine)}/{len(q)} points" if len(mine) < len(q) else ""
        if kind == DecisionKind.WINNER:
            better, worse = labels[side], labels["b" if side == "a" else "a"]
            head = f"{better} {ratio_range(mine.ratio)} [{interval_range(mine.lo, mine.hi)}] over {worse}"
        elif kind == DecisionKind.TIE:
            head = f"tie ({ratio_range(mine.ratio)}, [{interval_range(mine.lo, mine.hi)}])"
        elif kind == DecisionKind.TOO_FEW:
            head = f"{labels.get(side, side)} ahead {ratio_range(mine.ratio)}, too few repeats"
        else:
            head = "not both measured"
        full.append(head + at)
        brief.append(head + share)
    return "; ".join(full), "; ".join(brief)


def _third_arm_text(entry: dict, q: pd.DataFrame, mine: pd.DataFrame) -> tuple[str, str]:
    """Where the arm to deploy is neither side of the question, what it leads by (the question stays stated): in
    full and in brief."""
    sides = set(q.a_arm.dropna()) | set(q.b_arm.dropna()) if "a_arm" in q else set()
    choice = entry.get("choice")
    if not choice or choice in sides:
        return "", ""
    chosen = mine[mine.choice == choice]
    texts = _margin_text(chosen) if len(chosen) else ("tied for first at the most points",) * 2
    return tuple(f" — deployed arm {choice}: {t}" for t in texts)


SHORT_KIND = {DecisionKind.TOO_FEW: "too few repeats", DecisionKind.CAPACITY: "KV wall",
              DecisionKind.NO_RESULT: "no result", DecisionKind.TIE: "tie", DecisionKind.WINNER: "no choice"}


def point_label(row: dict) -> str:
    """What a point chose, in a word: its arm, or why it has none."""
    choice = row.get("choice")
    return choice if isinstance(choice, str) else SHORT_KIND.get(row["kind"], str(row["kind"]))


def _deploy_text(mine: pd.DataFrame, entry: dict, trials: pd.DataFrame) -> str:
    labels = [point_label(r) for r in mine.to_dict("records")]
    choice = entry.get("choice")
    if len(set(labels)) == 1:
        return labels[0] if labels[0] == choice else f"no choice: {labels[0]}"
    tail = f"; one for all: {choice}" if choice else "; no one setting for all"
    return fit(lines_text(by_line(mine, labels, trials)) + tail, "by load: " + counts_text(labels) + tail)


def _margin_text(mine: pd.DataFrame) -> tuple[str, str]:
    """How far the choice leads, per kind of outcome: in full (arms named) and in brief (points counted)."""
    full, brief = [], []
    share = {kind: (f" at {len(rows)}/{len(mine)} points" if len(rows) < len(mine) else "")
             for kind, rows in mine.groupby("kind", sort=False)}
    for kind, rows in mine.groupby("kind", sort=False):
        if kind == DecisionKind.WINNER:
            full.append(f"{ratio_range(rows.margin)} over " + ", ".join(dict.fromkeys(rows.runner_up.dropna())))
            brief.append(f"{ratio_range(rows.margin)} over the next arm{share[kind]}")
        elif kind == DecisionKind.TIE:
            full.append(f"tied for first: {', '.join(dict.fromkeys(a for t in rows.tied for a in t))} "
                        f"({ratio_range(rows.margin)} apart)")
            brief.append(f"tie within noise{share[kind]} ({ratio_range(rows.margin)} apart)")
        elif kind == DecisionKind.TOO_FEW:
            full.append("too few repeats to say")
            brief.append(f"too few repeats{share[kind]}")
        elif kind == DecisionKind.CAPACITY:
            full.append("KV capacity wall: no configuration effect")
            brief.append(f"KV capacity wall{share[kind]}")
    vs_off = mine.vs_off.dropna()
    if len(vs_off):
        full.append(f"vs spec off {ratio_range(vs_off)}")
        brief.append(f"vs spec off {ratio_range(vs_off)}")
    return "; ".join(full) or "–", "; ".join(brief) or "–"


def _sure_text(mine: pd.DataFrame, q: Optional[pd.DataFrame]) -> str:
    lo, hi = (q.lo, q.hi) if q is not None and q.lo.notna().any() else (mine.margin_lo, mine.margin_hi)
    interval = interval_range(lo, hi)
    n = int(mine.n_min.min()) if len(mine) else 0
    return (f"95% [{interval}]" if interval != "–" else "no interval") + f", {n} repeat(s)"


def _natural(text: str) -> list:
    """Sorts "c=16" after "c=4": numbers as numbers."""
    return [float(p) if p.replace(".", "", 1).isdigit() else p for p in re.split(r"(\d+(?:\.\d+)?)", text)]


def _flips_text(crossovers: pd.DataFrame) -> list[str]:
    """Where the choice flips, from most to least detailed: every flip, the axes with where, the axes alone."""
    if not len(crossovers):
        return ["–"]
    records = crossovers.to_dict("records")
    every = "; ".join(f"{r['axis']} {r['between']}" + (f" ({r['with']})" if r["with"] != "–" else "")
                      + f": {r['from']} → {r['to']}" for r in records)
    by_axis: dict[str, list[str]] = {}
    for r in records:
        by_axis.setdefault(r["axis"], [])
        if r["with"] != "–" and r["with"] not in by_axis[r["axis"]]:
            by_axis[r["axis"]].append(r["with"])
    where = "; ".join(f"along {axis}" + (f" at {', '.join(sorted(w, key=_natural))}" if w else "")
                      for axis, w in by_axis.items())
    return [every, where, "along " + ", ".join(by_axis)]


def answer_table(*, answers: dict, outcomes: pd.DataFrame, points: pd.DataFrame, engines: pd.DataFrame,
                 trials: pd.DataFrame, crossovers: pd.DataFrame, config: dict, tie_band: float, min_repeats: int,
                 seed: int) -> pd.DataFrame:
    """One row per workload, worded from its answer (runner.report.answering): a rate search's workload by its
    highest rate within the SLO, any other by its per-point decisions, a lone arm as a measurement."""
    question = answerable_question(config, engines)
    q_all = None
    labels: dict[str, str] = {}
    if question is not None:
        labels = {"a": _side_label(side_arms(engines, question.a)) or "a",
                  "b": _side_label(side_arms(engines, question.b)) or "b"}
        q_all = question_outcomes(points, engines, question, tie_band=tie_band, min_repeats=min_repeats, seed=seed)
    rows = []
    for workload, answer in answers.items():
        caveats = fit(*tags_text(answer.caveats))
        if answer.answerer is Answerer.HIGHEST_RATE or answer.answerer is Answerer.LONE_ARM and not (
                outcomes.workload == workload).any():
            rows.append({"workload": f"{workload} ({answer.answerer.value})", "deploy": answer.deploy_text,
                         "by how much": answer.by_how_much, "flips": answer.flips, "how sure": answer.how_sure,
                         "caveats": caveats})
            continue
        mine = outcomes[outcomes.workload == workload]
        mine_trials = trials[trials.workload == workload]
        entry = {"choice": answer.choice}
        q = q_all[q_all.workload == workload] if q_all is not None and len(q_all) else None
        by = _margin_text(mine)
        if q is not None and len(q):
            full, brief = _question_text(q, labels, mine_trials)
            _, brief_ab = _question_text(q, {"a": "a", "b": "b"}, mine_trials)  # the sides as the intro names them
            third, third_brief = _third_arm_text(entry, q, mine)
            by = (full + third, brief + third, brief + third_brief, brief_ab + third_brief, brief_ab)
        flips = _flips_text(crossovers[crossovers.workload == workload]) if len(crossovers) else ["–"]
        if q is not None and len(q):
            asked = [text for names in (labels, {"a": "a", "b": "b"})
                     for text in _flips_text(crossings_of(q.assign(choice=[
                         names.get(s) if k == DecisionKind.WINNER else None for s, k in zip(q.side, q.kind)]),
                         trials))]
            if asked[0] != "–":
                flips = [f"question: {a}" + ("" if d == "–" else f"; deploy: {d}")
                         for a, d in zip(asked, flips + flips[-1:] * (len(asked) - len(flips)))]
        deploy = answer.deploy_text if answer.answerer in (Answerer.LONE_ARM, Answerer.NO_RESULT) else \
            _deploy_text(mine, entry, mine_trials)
        rows.append({"workload": f"{workload} ({deciding_metric(workload).label})", "deploy": deploy,
                     "by how much": fit(*by), "flips": fit(*flips),
                     "how sure": _sure_text(mine, q), "caveats": caveats})
    return pd.DataFrame(rows, columns=ANSWER_COLUMNS)


def _k_text(best_k) -> str:
    return "no choice" if best_k is None or pd.isna(best_k) else ("off" if int(best_k) == 0 else f"k={int(best_k)}")


def draft_count_lines(draft_summary: pd.DataFrame, draft_choices: pd.DataFrame, trials: pd.DataFrame) -> list[str]:
    """The draft-count question in plain words, one line per workload and spec method (ties said as ties), each
    within the Answer's cell limit."""
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
            ks = [_k_text(k) for k in mine.best_k]
            where = lines_text(by_line(mine, ks, trials[trials.workload == r["workload"]]))
            one = f"; one k for all loads: {r['single k']}"
            text = fit(where + one + (f" ({r['notes']})" if r["notes"] else ""), where + one,
                       "by load: " + counts_text(ks) + one)
        lines.append(f"- **{r['workload']}, {r['method']}**: {fit(text)}")
    return lines
