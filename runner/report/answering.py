"""Picks one answerer per workload from the saved study and returns its answers. Pure.

A rate search's workloads with a highest-rate verdict are answered by it (runner.report.rate_answer); every other
workload by its per-point decisions; a workload where one arm alone was measured deploys nothing.
"""
from __future__ import annotations

import pandas as pd

from runner.report.answer_caveats import workload_caveats
from runner.report.arm_engine import arm_rows
from runner.report.study_answer import (Answerer, Caveat, Study, StudyKind, WorkloadAnswer, per_point_answer,
                                        rate_search_answer)
from runner.schema import EngineStatus


def rate_answered(study: Study, rate_verdicts: list) -> list[str]:
    """The workloads the study answers by their highest rate within the SLO (a rate search's, with a verdict)."""
    if study.kind is not StudyKind.RATE_SEARCH:
        return []
    return list(dict.fromkeys(v.workload for v in rate_verdicts))


def study_answers(*, study: Study, outcomes: pd.DataFrame, rate_verdicts: list, rate_rows: dict[str, dict],
                  engines: pd.DataFrame, trials: pd.DataFrame, config: dict, degenerate: pd.DataFrame,
                  divergence: pd.DataFrame, failures: pd.DataFrame, stops: pd.DataFrame,
                  min_repeats: int) -> dict[str, WorkloadAnswer]:
    ok = engines[engines.status == EngineStatus.OK] if len(engines) else engines
    arms = arm_rows(ok, trials)  # an arm set live on a larger engine has trials but no engine row of its own
    simplicity = {a: (int(k) > 0, int(k), int(o)) for a, k, o in zip(arms.arm, arms.k, arms.arm_order)}
    dummy = bool(len(engines) and "model" in engines and engines.model.astype(str).str.contains("dummy").any())
    by_rate = set(rate_answered(study, rate_verdicts))
    workloads = list(dict.fromkeys([*outcomes.workload, *by_rate])) if len(outcomes) else list(by_rate)
    answers: dict[str, WorkloadAnswer] = {}
    for workload in workloads:
        mine = outcomes[outcomes.workload == workload] if len(outcomes) else outcomes
        per_point = workload not in by_rate

        def caveats(deploy):
            return workload_caveats(workload, per_point=per_point, outcomes=mine, config=config, deploy=deploy,
                                    engines_dummy=dummy, degenerate=degenerate, divergence=divergence,
                                    failures=failures, stops=stops, trials=trials, min_repeats=min_repeats)

        if per_point:
            answer = per_point_answer(workload, mine, engines=engines, trials=trials, config=config,
                                      simplicity=simplicity, caveats=())
        else:
            answer = rate_search_answer(workload, [v for v in rate_verdicts if v.workload == workload],
                                        rate_rows.get(workload, {}), engines=engines, trials=trials, config=config,
                                        caveats=())
        found = caveats(answer.deploy)
        if answer.deploy is None and answer.answerer is not Answerer.LONE_ARM:
            found += (Caveat(tag="", text=f"no recommendation: {answer.why_none}"),)
        answers[workload] = _with(answer, caveats=found)
    return answers


def _with(answer: WorkloadAnswer, **changes) -> WorkloadAnswer:
    from dataclasses import replace

    return replace(answer, **changes)


def worded(answers: dict[str, WorkloadAnswer], table: pd.DataFrame) -> dict[str, WorkloadAnswer]:
    """The answers with the Answer table's words for them (its rows are the answers', in order)."""
    out = {}
    for (workload, answer), row in zip(answers.items(), table.to_dict("records")):
        out[workload] = _with(answer, deploy_text=row["deploy"], by_how_much=row["by how much"], flips=row["flips"],
                              how_sure=row["how sure"])
    return out


def answered_verdict(table: pd.DataFrame, answers: dict[str, WorkloadAnswer]) -> pd.DataFrame:
    """The Verdict table with a row per workload the study answers by its highest rate (not per offered rate)."""
    rows = [{"workload": w, "choice": a.choice or "–", "outcome": a.answerer.value + (f": {a.why_none}"
                                                                                    if a.why_none else ""),
             "by how much": a.by_how_much, "95% interval": a.interval, "over": "the offered rates searched",
             "points": "–", "notes": a.how_sure}
            for w, a in answers.items() if a.answerer is Answerer.HIGHEST_RATE
            or (a.answerer is Answerer.LONE_ARM and w not in set(table.workload))]
    return pd.concat([table, pd.DataFrame(rows, columns=table.columns)], ignore_index=True) if rows else table
