"""The report's one view of the persisted results, built once: every section reads these frames, none the raw
files. Pure.

`trials`, `requests` and `engines` are per workload point: a synthetic acceptance profile resolved into the point
(runner.report.profiles: a spec-off trial is repeated at each profile, its requests with it, under one id), arms
labelled (runner.report.arms), and each trial's goodput under the report's SLO. `ran` keeps the trials as they
ran (each persisted row once) for the sections that count runs or time, with the requests and phases they need.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from runner.report.arms import add_arms
from runner.report.load import Results
from runner.report.profiles import profiles_as_points, requests_of
from runner.slo import Metric, Slo, config_slo

# The per-request column each metric's target bounds as a limit for goodput.
REQUEST_LIMIT_COLUMNS = {Metric.TTFT: "ttft_s", Metric.TPOT: "tpot_s", Metric.E2EL: "e2e_s"}
GOODPUT = "goodput_req_s"


@dataclass(kw_only=True)
class Frames:
    trials: pd.DataFrame
    requests: pd.DataFrame
    engines: pd.DataFrame
    ran: pd.DataFrame  # the trials as persisted: each ran once (spec off not repeated per profile)
    ran_requests: pd.DataFrame
    phases: pd.DataFrame = field(default_factory=pd.DataFrame)
    first_runs: pd.DataFrame = field(default_factory=pd.DataFrame)
    first_run_requests: pd.DataFrame = field(default_factory=pd.DataFrame)
    category_requests: pd.DataFrame = field(default_factory=pd.DataFrame)  # prompt-set requests with a category


def analysis_frames(results: Results, slo: Slo) -> Frames:
    trials, requests, engines = profiles_as_points(results.trials, results.requests, results.engines)
    engines, trials = add_arms(engines, trials)
    run_slos = {source: config_slo(config) for source, config in zip(results.sources, results.configs)}
    trials = trials.assign(**{GOODPUT: trial_goodput(trials, requests, slo, run_slos)}) if len(trials) else trials
    return Frames(trials=trials, requests=requests, engines=engines, ran=results.trials,
                  ran_requests=results.requests, phases=results.phases, first_runs=results.first_runs,
                  first_run_requests=results.first_run_requests,
                  category_requests=requests_of(trials, _category_requests(results)))


def _category_requests(results: Results) -> pd.DataFrame:
    from runner.report.categories import read_category_requests

    return read_category_requests(results.run_dirs, results.sources)


def request_goodput(trials: pd.DataFrame, requests: pd.DataFrame, slo: Slo) -> pd.Series:
    """Per trial (indexed like `trials`): measured requests within every per-request limit / duration_s."""
    limits = {REQUEST_LIMIT_COLUMNS[metric]: s for metric, s in slo.request_limits_s().items()}
    if not limits or not len(requests):
        return pd.Series(np.nan, index=trials.index)
    chosen = requests[requests.error.isna() & (requests.phase == "measured")].copy()
    ok = np.ones(len(chosen), dtype=bool)
    for column, limit in limits.items():
        ok &= (pd.to_numeric(chosen[column], errors="coerce") <= limit).to_numpy()
    chosen["meets"] = ok
    met = chosen.groupby(["source", "trial_id"]).meets.sum()
    keys = list(zip(trials.source, trials.trial_id))
    counts = pd.Series([met.get(k, 0) for k in keys], index=trials.index, dtype=float)
    return counts / pd.to_numeric(trials.duration_s, errors="coerce")


def trial_goodput(trials: pd.DataFrame, requests: pd.DataFrame, slo: Slo, run_slos: dict[str, Slo]) -> pd.Series:
    """Each trial's goodput under the report's SLO: the trial's own column where its run measured it against that
    same SLO (from every request's full timeline), else counted from its persisted requests (NaN without them)."""
    own = pd.to_numeric(trials[GOODPUT], errors="coerce") if GOODPUT in trials else pd.Series(np.nan,
                                                                                              index=trials.index)
    if not slo:
        return pd.Series(np.nan, index=trials.index)
    same = np.array([run_slos.get(s) == slo for s in trials.source], dtype=bool) & own.notna().to_numpy()
    counted = request_goodput(trials, requests, slo) if (~same).any() else pd.Series(np.nan, index=trials.index)
    with_requests = set(zip(requests.source, requests.trial_id)) if len(requests) else set()
    has = np.array([k in with_requests for k in zip(trials.source, trials.trial_id)], dtype=bool)
    out = own.where(same, counted.where(has))
    return out.astype(float)


def is_saturation(rate) -> bool:
    """An offered rate of inf: every request sent at once, by design (the probe of the engine's ceiling)."""
    try:
        return math.isinf(float(rate))
    except (TypeError, ValueError):
        return False

