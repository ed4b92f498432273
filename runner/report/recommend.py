"""recommendation.yaml: per workload, the engine settings to deploy, as vLLM engine arguments and `vllm serve`
flags, with the evidence and the caveats that apply. Pure (a dict; build.py writes it).

Every choice is the decision module's (runner.numerics.decision): per point the simplest arm tied for
first; per workload the choice per load range and, when one setting must serve every point, the arm tied for
first at the most points (equal counts: the simpler arm). Without any point that has a choice there is none,
and the file says why.
"""
from __future__ import annotations

from typing import Any, Optional

import pandas as pd

from runner.numerics.decision import DecisionKind, one_for_all
from runner.plan.vllm_args import deployment, read_args
from runner.report.arms import point_axes, point_coords
from runner.report.verdict import (CAPACITY_OUTCOME, SINGLE_K_RULE, TIE_OUTCOME, describe_range, interval_range,
                                   ratio_range)
from runner.schema import EngineStatus
from runner.vllm.serve import serve_command

CHOICE_RULE = ("per point, the simplest arm tied for first (spec off before speculation, the smaller k, then the "
               "sweep's arm order); one setting for all points: the arm tied for first at the most points, equal "
               "counts to the simpler arm")


def engine_arguments(engine: dict, *, config: dict) -> Optional[dict[str, Any]]:
    """The vLLM engine arguments of one arm (what `LLM(...)` / `AsyncEngineArgs(...)` take), read back from what
    its engine ran (engines.vllm_args_json), as a deployment takes them (runner.plan.vllm_args.deployment): the
    model as the config names it. None: the row has none (an engine of a run that predates the column)."""
    ran = read_args(engine.get("vllm_args_json"))
    if ran is None:
        return None
    model_cfg = config.get("model") or {}
    return deployment(ran, model=model_cfg.get("path") or str(engine["model"]))


def simplicity_of(engines: pd.DataFrame) -> dict[str, tuple]:
    """Each arm's rank for "the simplest arm" (spec off, then smaller k, then the sweep's arm order)."""
    return {a: (int(k) > 0, int(k), int(o)) for a, k, o in zip(engines.arm, engines.k, engines.arm_order)}


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


def _caveats(*, workload: str, choice: Optional[str], outcomes: pd.DataFrame, config: dict, engine: Optional[dict],
             degenerate: pd.DataFrame, divergence: pd.DataFrame, failures: pd.DataFrame, stops: pd.DataFrame,
             min_repeats: int) -> list[str]:
    caveats = []
    model_cfg = config.get("model") or {}
    ran = read_args((engine or {}).get("vllm_args_json")) or {}
    if model_cfg.get("builtin") and not model_cfg.get("path"):
        caveats.append(f"model is the runner's built-in {model_cfg['builtin']!r} ({model_cfg.get('name')}): put your "
                       f"model's path in engine_args.model / the serve command")
    if model_cfg.get("load_format") == "dummy" or ran.get("load_format") == "dummy" \
            or "dummy" in str((engine or {}).get("model", "")):
        caveats.append("dummy weights (load_format: dummy): speeds and acceptance are not those of the real model; "
                       "re-run with real weights before deploying")
    bad = degenerate[degenerate.workload == workload]
    if len(bad):
        caveats.append("degenerate outputs (median distinct-token share < 0.25) for " + ", ".join(bad.arm)
                       + ": acceptance there does not represent real text")
    walled = outcomes[outcomes.kind == CAPACITY_OUTCOME]
    if len(walled):
        caveats.append(f"capacity wall at {len(walled)} point(s): no configuration effect can be read there")
    few = outcomes[(outcomes.n_min > 0) & (outcomes.n_min < min_repeats)]
    if len(few):
        caveats.append(f"too few repeats at {len(few)} point(s) (fewer than {min_repeats}; fix: "
                       f"sweep.repeats={min_repeats})")
    ties = outcomes[outcomes.kind == TIE_OUTCOME]
    if len(ties):
        caveats.append(f"tie within noise at {len(ties)} point(s) (the simplest tied arm taken): " + "; ".join(
            dict.fromkeys(", ".join(t) for t in ties.tied)))
    if len(divergence):
        mine = divergence[divergence.workload == workload]
        if len(mine):
            caveats.append("outputs differ from the reference arm for " + ", ".join(sorted(set(mine.arm)))
                           + ": not a like-for-like comparison")
    if len(failures):
        caveats.append("failed configurations: " + ", ".join(sorted(set(map(str, failures.arm)))))
    if len(stops):
        mine = stops[stops.workload == workload]
        if len(mine):
            caveats.append("stopped early by the race: " + ", ".join(mine.arm))
    if choice is None:
        caveats.append("no recommendation: no point has a choice (too few repeats, a capacity wall or no result)")
    elif engine is not None and read_args(engine.get("vllm_args_json")) is None:
        caveats.append("no engine arguments: this run's engines table does not record what its engines ran "
                       "(engines.vllm_args_json, written since the runner records it); re-run the arm to get them")
    return caveats


DATA_FILE_COLUMNS = {"over_length_skipped": "requests over their length limit skipped",
                     "over_length_clipped": "requests over their length limit clipped (prompt cut to fit)",
                     "source_skipped": "entries of its data file skipped (null or non-text messages, recorded "
                                       "failures)"}


def data_file_caveats(trials: pd.DataFrame) -> list[str]:
    """What of a workload's data file its trials did not send as recorded, per trial at each max_model_len."""
    caveats = []
    for column, what in DATA_FILE_COLUMNS.items():
        if column not in trials or not (trials[column].fillna(0) > 0).any():
            continue
        per_len = trials.groupby("max_model_len")[column].max()
        caveats.append(f"{what}: " + ", ".join(f"{int(n)} per trial at max_model_len={m}"
                                               for m, n in per_len.items() if n > 0))
    return caveats


def recommendation(*, outcomes: pd.DataFrame, engines: pd.DataFrame, trials: pd.DataFrame, draft_summary: pd.DataFrame,
                   point_text: list[str], metric_heading: dict[str, str], config: dict, degenerate: pd.DataFrame,
                   divergence: pd.DataFrame, failures: pd.DataFrame, stops: pd.DataFrame, tie_band: float,
                   min_repeats: int, sources: list[str]) -> dict[str, Any]:
    ok_engines = engines[engines.status == EngineStatus.OK] if len(engines) else engines
    simplicity = simplicity_of(ok_engines) if len(ok_engines) else {}
    text_of = dict(zip(outcomes.index, point_text))
    workloads: dict[str, Any] = {}
    for workload, mine in outcomes.groupby("workload", sort=False):
        where = [text_of[i] for i in mine.index]
        choice = one_for_all(list(mine.decision), simplicity)
        engine_rows = ok_engines[ok_engines.arm == choice] if choice else ok_engines.iloc[0:0]
        engine = engine_rows.iloc[0].to_dict() if len(engine_rows) else None
        entry: dict[str, Any] = {"decided_by": metric_heading[workload], "choice": choice,
                                 "choice_per_load": choices_per_load(
                                     mine, where, point_axes(trials[trials.workload == workload]))}
        args = engine_arguments(engine, config=config) if engine is not None else None
        if args is not None:
            entry["engine_args"] = args
            entry["vllm_serve"] = serve_command(args)
        entry["evidence"] = _evidence(mine, choice or "", where)
        if not choice:
            entry["ahead_on_the_numbers"] = list(dict.fromkeys(mine.leader.dropna()))
        drafts = draft_summary[draft_summary.workload == workload]
        if len(drafts):
            entry["draft_count"] = [{"method": r["method"], "k_tried": r["k tried"], "k_per_range": r["best k"],
                                     "single_k": None if r["single k"] == "–" else int(str(r["single k"]).split()[0]),
                                     "notes": r["notes"] or None}
                                    for r in drafts.to_dict("records")]
        entry["caveats"] = _caveats(workload=workload, choice=choice, outcomes=mine, config=config, engine=engine,
                                    degenerate=degenerate, divergence=divergence, failures=failures, stops=stops,
                                    min_repeats=min_repeats) + data_file_caveats(trials[trials.workload == workload])
        workloads[workload] = entry
    return {"sources": list(sources),
            "rules": {"choice": CHOICE_RULE,
                      "winner": f"the 95% interval of the ratio of medians (leader / runner-up; bootstrap, widened to "
                                f"Welch's t on logs and the pairwise-ratio range where wider) lies "
                                f"wholly above 1 + tie band ({tie_band:g}); at least {min_repeats} repeats per arm",
                      "single_k": SINGLE_K_RULE, "slo": "see report.md (Under a latency target)"},
            "workloads": workloads}
