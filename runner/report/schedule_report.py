"""The draft count as vLLM deploys it: a per-batch-size schedule from the best k per load, the schedule arms'
outcome against the static k, and acceptance predicted for every k. Pure (vLLM's validator imported lazily).

The best k per load is the decision module's (the draft-count choices: the smallest k tied for first, k = 0 where
speculation loses); the schedule keys it on the engine's measured batch size at that load (requests per engine
step: the median step's, `batch_size_p50`, as runner.numerics.measured_best_k keys it), not on the client's
concurrency.
"""
from __future__ import annotations

import json
from typing import Any

import pandas as pd

from runner.numerics.decision import Candidate, DecisionKind, decide
from runner.numerics.draft_schedule import DraftSchedule, ScheduleError, build_schedule, check_with_vllm
from runner.numerics.spec_predict import _plain, predict_acceptance, static_k_rows
from runner.numerics.step_cost import POINT_COLUMNS, contenders, predict_speeds, spot_checks
from runner.report.arms import POINT_FIELDS
from runner.report.samples import deciding_metric
from runner.schema import TrialStatus
from runner.spec_arm import SpecArm, row_spec
from runner.vllm.serve import serve_flags
from runner.vllm.spec_config import speculative_config

DEFAULT_MAX_NUM_SEQS = 256  # vLLM's default where the sweep does not set max_num_seqs


def _batch_sizes(trials: pd.DataFrame) -> dict[tuple, float]:
    """(workload, params, concurrency) → the median over its static-k trials of the median step's requests (the
    mean step's in trials without it)."""
    ok = trials[(trials.status == TrialStatus.OK) & ~trials.scheduled.astype(bool)]
    out = {}
    for key, group in ok.groupby(list(POINT_FIELDS), sort=False):
        values = pd.Series(dtype=float)
        for column in ("batch_size_p50", "batch_size_mean"):
            if column in group and not len(values):
                values = pd.to_numeric(group[column], errors="coerce").dropna()
        out[key] = float(values.median()) if len(values) else float(key[2])
    return out


def _max_num_seqs(engines: pd.DataFrame, config: dict) -> int:
    configured = (((config or {}).get("engine") or {}).get("args") or {}).get("max_num_seqs")
    if configured:
        return int(configured)
    for text in engines.get("engine_args_json", pd.Series(dtype=object)).dropna():
        try:
            value = json.loads(text).get("max_num_seqs")
        except (TypeError, ValueError, AttributeError):
            continue
        if value:
            return int(value)
    return DEFAULT_MAX_NUM_SEQS


def _vllm_verdict(schedule: DraftSchedule) -> str:
    try:
        check_with_vllm(schedule)
    except ImportError:
        return "not checked (vLLM not installed here)"
    except Exception as exc:  # vLLM's own refusal, as it words it
        return f"refused by vLLM: {exc}"
    return "accepted by vLLM's validator"


def derived_schedules(draft_choices: pd.DataFrame, trials: pd.DataFrame, engines: pd.DataFrame,
                      config: dict) -> list[dict[str, Any]]:
    """Per workload, params (without concurrency), family and method: the best k per measured batch size and the
    schedule built from it (None where k = 0 wins everywhere or no load has a choice)."""
    if not len(draft_choices):
        return []
    batch = _batch_sizes(trials)
    max_num_seqs = _max_num_seqs(engines, config)
    spec_extra = ((config or {}).get("spec") or {})
    out = []
    for (workload, params, family, method), rows in draft_choices.groupby(
            ["workload", "workload_params_json", "family", "method"], sort=False):
        loads = []
        best: dict[int, list[int]] = {}
        for r in rows.sort_values("concurrency").to_dict("records"):
            size = batch.get((workload, params, r["concurrency"]), float(r["concurrency"]))
            chosen = None if r["best_k"] is None or pd.isna(r["best_k"]) else int(r["best_k"])
            loads.append({"concurrency": int(r["concurrency"]), "batch_size": round(size, 2), "best_k": chosen,
                          "tied": list(r["tied"])})
            if chosen is not None:
                best[max(1, int(round(size)))] = [k for k in r["tied"]] if chosen in r["tied"] else [chosen]
        entry: dict[str, Any] = {"workload": workload, "workload_params_json": params, "family": family,
                                 "method": method, "loads": loads, "max_num_seqs": max_num_seqs, "schedule": None}
        if best:
            try:
                schedule = build_schedule(best, max_num_seqs=max_num_seqs)
            except ScheduleError as exc:
                entry["why_none"] = str(exc)
                schedule = None
            if schedule is not None and len(schedule.ranges) == 1:
                entry["why_none"] = (f"k = {schedule.ranges[0][2]} is chosen at every measured load: a static k, no "
                                     f"schedule")
                schedule = None
            if schedule is None:
                entry.setdefault("why_none", "k = 0 (spec off) is chosen at every measured load: no schedule")
            else:
                spec = speculative_config(SpecArm(method=method, k=schedule.max_k),
                                          extra=spec_extra.get(method) or {}, schedule=schedule.ranges)
                entry.update({"schedule": schedule, "speculative_config": spec, "check": _vllm_verdict(schedule),
                              "serve_flag": " ".join(serve_flags({"speculative_config": spec}))})
        else:
            entry["why_none"] = "no load has a choice yet (too few repeats)"
        out.append(entry)
    return out


def _vs(decision, other: str) -> str:
    if decision.kind is DecisionKind.TOO_FEW:
        return "too few repeats"
    ratio = decision.against_leader.get(other) if decision.leader != other else None
    if decision.kind is DecisionKind.TIE:
        interval = decision.margin
        return "ties" + (f" ({interval.ratio_text()})" if interval else "")
    if decision.leader == other:
        interval = decision.margin
        return "loses" + (f" ({other} {interval.ratio_text()} ahead)" if interval else "")
    return "wins" + (f" ({ratio.ratio_text()})" if ratio else "")


def schedule_outcomes(points: pd.DataFrame, draft_choices: pd.DataFrame, *, tie_band: float, min_repeats: int,
                      seed: int) -> pd.DataFrame:
    """Per point where a schedule arm ran: it against the static k chosen there and against spec off, as each ran
    (the comparison a person deploying the schedule faces)."""
    rows = []
    scheduled = points[points.scheduled.astype(bool) & (points.n > 0)]
    for r in scheduled.to_dict("records"):
        metric = deciding_metric(r["workload"])
        here = points[(points.workload == r["workload"]) & (points.workload_params_json == r["workload_params_json"])
                      & (points.concurrency == r["concurrency"]) & (points.family == r["family"])
                      & ~points.scheduled.astype(bool) & (points.n > 0)]
        choice = draft_choices[(draft_choices.workload == r["workload"])
                               & (draft_choices.workload_params_json == r["workload_params_json"])
                               & (draft_choices.concurrency == r["concurrency"]) & (draft_choices.family == r["family"])
                               & (draft_choices.method == r["spec_method"])]
        best_k = None if not len(choice) or pd.isna(choice.iloc[0].best_k) else int(choice.iloc[0].best_k)
        row = {"workload": r["workload"], "workload_params_json": r["workload_params_json"],
               "concurrency": r["concurrency"], "schedule arm": r["arm"], "static k chosen": best_k,
               "vs static k": "–", "vs off": "–"}
        me = Candidate(arm=r["arm"], values=tuple(r["values"]))
        for label, k in (("vs static k", best_k), ("vs off", 0)):
            other = here[here.k == k] if k is not None else here.iloc[0:0]
            if not len(other):
                continue
            o = other.iloc[0]
            d = decide([me, Candidate(arm=o.arm, values=tuple(o["values"]))],
                       higher_is_better=metric.higher_is_better, tie_band=tie_band, min_repeats=min_repeats, seed=seed)
            row[label] = f"{_vs(d, o.arm)} against {o.arm}"
        rows.append(row)
    return pd.DataFrame(rows, columns=["workload", "workload_params_json", "concurrency", "schedule arm",
                                       "static k chosen", "vs static k", "vs off"])


def acceptance_predictions(trials: pd.DataFrame) -> pd.DataFrame:
    """AL(k) predicted from each larger-k chain-drafter engine against AL measured at k (the raw trials: each
    profile its own group)."""
    if not len(trials) or "spec_acceptance_per_position" not in trials:
        return pd.DataFrame()
    rows = []
    for p in predict_acceptance(trials.to_dict("records")):
        c = p.coordinates
        measured = p.measured
        has_measured = measured is not None and measured.lo == measured.lo
        rows.append({"workload": c["workload"], "workload_params_json": c["workload_params_json"],
                     "concurrency": c["concurrency"], "method": p.method,
                     "acceptance": c.get("spec_acceptance_profile") or "real",
                     "k": p.k, "from k": p.source_k,
                     "predicted AL": _with_interval(p.predicted, p.n_predicted),
                     "measured AL": _with_interval(measured, p.n_measured) if has_measured else "–",
                     "inside": {True: "yes", False: "no", None: "–"}[p.inside]})
    return pd.DataFrame(rows)


def _with_interval(x, n: int) -> str:
    """A figure with its interval; a lone sample (no interval) without one."""
    if x.lo != x.lo or x.hi != x.hi:
        return f"{x.point:.3f} (n={n})"
    return f"{x.point:.3f} [{x.lo:.3f}–{x.hi:.3f}] (n={n})"


def schedule_recommendations(schedules: list[dict[str, Any]], params_text) -> dict[str, list[dict[str, Any]]]:
    """recommendation.yaml's `draft_schedule` per workload: the speculative_config to deploy and its evidence."""
    out: dict[str, list[dict[str, Any]]] = {}
    for s in schedules:
        item: dict[str, Any] = {"method": s["method"], "where": params_text(s["workload"], s["workload_params_json"]),
                                "evidence": [{"concurrency": x["concurrency"], "batch_size": x["batch_size"],
                                              "best_k": x["best_k"], "tied": x["tied"]} for x in s["loads"]]}
        if s["schedule"] is not None:
            item.update({"num_speculative_tokens_per_batch_size": s["schedule"].as_list(),
                         "speculative_config": s["speculative_config"], "vllm_serve_flag": s["serve_flag"],
                         "vllm_check": s["check"],
                         "caveat": "measure it as an arm (sweep.arms[i].num_speculative_tokens_per_batch_size) "
                                   "against the static k before deploying it"})
        else:
            item["schedule"] = None
            item["why"] = s.get("why_none")
        out.setdefault(s["workload"], []).append(item)
    return out



def _source_rows(rows: list[dict]) -> list[dict]:
    """The rows the prediction came from (the predict stage's engines): spec off and, per method and profile,
    the largest static k."""
    k_max: dict[tuple, int] = {}
    for r in rows:
        if r.get("spec_method") != "off":
            key = (r.get("spec_method"), _plain(r.get("spec_acceptance_profile")))
            k_max[key] = max(k_max.get(key, 0), row_spec(r).k)
    return [r for r in rows if r.get("spec_method") == "off" or row_spec(r).k
            == k_max[(r.get("spec_method"), _plain(r.get("spec_acceptance_profile")))]]


def _interval_text(interval) -> str:
    if interval.lo == interval.lo and interval.hi == interval.hi:
        return f"{interval.point:.4g} [{interval.lo:.4g}–{interval.hi:.4g}]"
    return f"{interval.point:.4g}"


def predicted_vs_measured(trials: pd.DataFrame, *, column: str = "decode_tok_s_per_session") -> pd.DataFrame:
    """Per load, method and k: the step-cost model's predicted decode speed per session (from spec off and the
    largest k, as the predict stage had them), the measured one where an engine drafted k there, the prediction's
    error, and why each k was measured or skipped (the raw trials: each acceptance profile its own family)."""
    if not len(trials) or "itl_mean_s" not in trials:
        return pd.DataFrame()
    rows = static_k_rows(trials.to_dict("records"))
    predictions = predict_speeds(_source_rows(rows))
    if not predictions:
        return pd.DataFrame()
    measured: dict[tuple, list[float]] = {}
    for r in rows:
        point = tuple(_plain(r.get(c)) for c in POINT_COLUMNS)
        k = row_spec(r).k
        value = _plain(r.get(column))
        if value is not None:
            for method in ({r.get("spec_method")} if k else {p.method for p in predictions}):
                profile = _plain(r.get("spec_acceptance_profile")) if k else None
                measured.setdefault((point, method, profile, k), []).append(float(value))
    checks = {(c.point_key, c.method, c.profile, c.k): c for c in spot_checks(predictions, aggregate=False)}
    groups: dict[tuple, list] = {}
    for p in predictions:
        groups.setdefault((p.point_key, p.method, p.profile), []).append(p)
    out = []
    for (point, method, profile), preds in groups.items():
        near = contenders(preds, aggregate=False)
        best = near[0]
        top = max(p.tok_s_per_session.point for p in preds)
        where = dict(zip(POINT_COLUMNS, point))
        for p in sorted(preds, key=lambda x: x.k):
            values = measured.get((point, method, profile if p.k else None, p.k)) or []
            mean = sum(values) / len(values) if values else None
            key = (point, method, profile, p.k)
            if p.measured:
                why = "spec off (k = 0): the step time every k is predicted from" if p.k == 0 else \
                    "measured first: its counters and step time predict every smaller k"
            elif key in checks:
                why = checks[key].why()
            elif p.k in near:
                why = f"contender: predicted within reach of k = {best}" + ("" if values else " (not measured yet)")
            else:
                behind = 1.0 - p.tok_s_per_session.point / top if top else float("nan")
                hi = p.tok_s_per_session.hi if p.tok_s_per_session.hi == p.tok_s_per_session.hi else \
                    p.tok_s_per_session.point
                why = (f"{'pruned' if values else 'skipped'}: predicted {behind:.1%} behind k = {best} (its "
                       f"interval's top {hi:.4g} < {top:.4g})" + ("; measured anyway (another stage or sweep)"
                                                                  if values else ""))
            error = None if mean is None or p.measured else mean / p.tok_s_per_session.point - 1.0
            out.append({"workload": where.get("workload"), "workload_params_json": where.get("workload_params_json"),
                        "concurrency": where.get("concurrency"), "batch size": round(p.batch_size_p50, 1),
                        "method": method, "acceptance": profile or "real", "k": p.k,
                        "predicted tok/s per session": _interval_text(p.tok_s_per_session),
                        "measured": f"{mean:.4g} (n={len(values)})" if values else "–",
                        "prediction error": "–" if error is None else f"{error:+.1%}", "why": why})
    return pd.DataFrame(out).sort_values(["workload", "workload_params_json", "method", "acceptance", "concurrency",
                                          "k"], kind="stable").reset_index(drop=True)


def spot_check_lines(table: pd.DataFrame) -> list[str]:
    """One line per spot check: the runner-up measured against its prediction."""
    lines = []
    if not len(table):
        return lines
    for r in table[table.why.str.startswith("spot check")].to_dict("records"):
        lines.append(f"Spot check ({r['method']} k = {r['k']} at c={r['concurrency']}): predicted "
                     f"{r['predicted tok/s per session']} tok/s per session, measured {r['measured']}, error "
                     f"{r['prediction error']} — {r['why'].removeprefix('spot check: ')}.")
    return lines


def prediction_blocks(table: pd.DataFrame, point_text=None) -> list[str]:
    """report.md's blocks for the predicted-vs-measured table (none without predictions)."""
    from runner.report.render import md_table

    if table is None or not len(table):
        return []
    shown = table.assign(point=[f"c={c}" for c in table.concurrency])
    shown = shown[["workload", "method", "acceptance", "point", "batch size", "k", "predicted tok/s per session",
                   "measured", "prediction error", "why"]]
    return ["Decode speed per session predicted for every k by the step-cost model (AL(k) from the largest k's "
            "per-position counters over the step time interpolated between spec off and the largest k; mean over "
            "repeats, 95% t interval), beside the speed measured where an engine drafted k, and why each k was "
            "measured or skipped:", md_table(shown), *spot_check_lines(table)]
