"""recommendation.yaml: per workload, the engine settings to deploy, as vLLM engine arguments and `vllm serve`
flags, with the evidence and the caveats that apply. Pure (a dict; build.py writes it).

The choice, its arguments, serve line and caveats are the study's answer (runner.report.answering); this module
only writes them down, with the per-point evidence behind a grid's answer (runner.numerics.decision).
"""
from __future__ import annotations

from typing import Any

import pandas as pd

from runner.numerics.decision import DecisionKind
from runner.report.arms import point_axes, point_coords
from runner.report.study_answer import RULES, Answerer
from runner.report.verdict import SINGLE_K_RULE, describe_range, interval_range, ratio_range

CHOICE_RULE = ("per point, the simplest arm tied for first (spec off before speculation, the smaller k, then the "
               "sweep's arm order); one setting for all points: the arm tied for first at the most points, equal "
               "counts to the simpler arm")


def choices_per_load(outcomes: pd.DataFrame, point_text: list[str], axes: list[str]) -> list[dict[str, Any]]:
    """The per-point choices of one workload, grouped: which arm where (points without a choice say why)."""
    groups: dict[str, list[int]] = {}
    records = outcomes.to_dict("records")
    for i, r in enumerate(records):
        choice = r["choice"] if isinstance(r["choice"], str) else None
        groups.setdefault(choice or f"no choice ({r['kind']})", []).append(i)
    every = [point_coords(r) for r in records]
    return [{"arm": arm, "where": describe_range([every[i] for i in rows], every, axes),
             "points": [point_text[i] for i in rows]} for arm, rows in groups.items()]


def _evidence(outcomes: pd.DataFrame, choice: str, point_text: list[str]) -> dict[str, Any]:
    won = outcomes[(outcomes.kind == DecisionKind.WINNER) & (outcomes.choice == choice)]
    tied = outcomes[[choice in t for t in outcomes.tied]]
    rows = []
    for r, where in zip(outcomes.to_dict("records"), point_text):
        rows.append({"point": where, "outcome": r["outcome"], "choice": r["choice"], "tied_for_first": list(r["tied"]),
                     "leader": r["leader"], "runner_up": r["runner_up"],
                     "ratio": None if pd.isna(r["margin"]) else round(float(r["margin"]), 3),
                     "interval_95": None if pd.isna(r["margin_lo"]) else
                     [round(float(r["margin_lo"]), 3), round(float(r["margin_hi"]), 3)],
                     "repeats": int(r["n_min"])})
    return {"points_won": f"{len(won)}/{len(outcomes)}", "points_tied_for_first": f"{len(tied)}/{len(outcomes)}",
            "ratio_where_won": ratio_range(won.margin) if len(won) else None,
            "interval_where_won": interval_range(won.margin_lo, won.margin_hi) if len(won) else None,
            "over": ", ".join(dict.fromkeys(won.runner_up.dropna())) or None, "points": rows}


def recommendation(*, answers: dict, outcomes: pd.DataFrame, trials: pd.DataFrame, draft_summary: pd.DataFrame,
                   point_text: list[str], metric_heading: dict[str, str], tie_band: float, min_repeats: int,
                   sources: list[str]) -> dict[str, Any]:
    """recommendation.yaml from the study's answers (runner.report.answering): the choice, its engine arguments
    and serve line are the answer's; the evidence is the per-point decisions behind it."""
    text_of = dict(zip(outcomes.index, point_text))
    workloads: dict[str, Any] = {}
    for workload, answer in answers.items():
        mine = outcomes[outcomes.workload == workload] if len(outcomes) else outcomes
        entry: dict[str, Any] = {"answered_by": answer.answerer.value, "choice": answer.choice}
        if answer.why_none:
            entry["why_no_choice"] = answer.why_none
        deploy = answer.deploy
        if deploy is not None and deploy.engine_args is not None:
            entry["engine_args"] = deploy.engine_args
            entry["vllm_serve"] = deploy.serve
            if deploy.measured_with:
                entry["measured_with"] = deploy.measured_with
        if answer.draft_count is not None:
            entry["draft_count_deployed"] = answer.draft_count
        if answer.answerer is Answerer.HIGHEST_RATE:
            entry["by_how_much"] = answer.by_how_much
            entry["how_sure"] = answer.how_sure
        elif len(mine):
            where = [text_of[i] for i in mine.index]
            entry["decided_by"] = metric_heading[workload]
            entry["choice_per_load"] = choices_per_load(mine, where, point_axes(trials[trials.workload == workload]))
            entry["evidence"] = _evidence(mine, answer.choice or "", where)
            if not answer.choice:
                entry["ahead_on_the_numbers"] = list(dict.fromkeys(mine.leader.dropna()))
            drafts = draft_summary[draft_summary.workload == workload] if len(draft_summary) else draft_summary
            if len(drafts):
                entry["draft_count"] = [{"method": r["method"], "k_tried": r["k tried"], "k_per_range": r["best k"],
                                         "single_k": None if r["single k"] == "–" else
                                         int(str(r["single k"]).split()[0]), "notes": r["notes"] or None}
                                        for r in drafts.to_dict("records")]
        entry["caveats"] = [c.text for c in answer.caveats]
        workloads[workload] = entry
    return {"sources": list(sources),
            "rules": {"choice": CHOICE_RULE,
                      "winner": f"the 95% interval of the ratio of medians (leader / runner-up; bootstrap, widened to "
                                f"Welch's t on logs and the pairwise-ratio range where wider) lies "
                                f"wholly above 1 + tie band ({tie_band:g}); at least {min_repeats} repeats per arm",
                      "single_k": SINGLE_K_RULE, "slo": "see report.md (Under a latency target)",
                      **{a.value: RULES[a] for a in dict.fromkeys(x.answerer for x in answers.values())}},
            "workloads": workloads}
