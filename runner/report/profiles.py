"""Synthetic acceptance as part of the workload point, never an arm. Pure.

An acceptance profile says how the text behaves, not how the engine is set up: a deployment cannot choose it.
So the report compares arms only at one profile at a time: a trial's profile goes into its workload params
(`acceptance`: "real" or the rates), where it is an axis like a prompt length, and spec off — which drafts
nothing and has no profile — is compared at every profile of its folder. The arms' labels then carry no profile.
"""
from __future__ import annotations

import json

import pandas as pd

PROFILE_PARAM = "acceptance"
_ID_SEPARATOR = "@acceptance="


def _profile_text(value) -> str:
    if not isinstance(value, str) or not value:
        return "real"
    try:
        return "/".join(f"{r:g}" for r in json.loads(value))
    except (TypeError, ValueError):
        return value


def _with_param(params_json, profile: str) -> str:
    params = json.loads(params_json or "{}")
    params[PROFILE_PARAM] = profile
    return json.dumps(params, sort_keys=True)


def profiles_as_points(trials: pd.DataFrame, requests: pd.DataFrame,
                       engines: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Unchanged where every trial ran at the model's own acceptance; otherwise each trial's profile moves into
    its params and each spec-off trial is repeated at every profile of its folder (its requests too)."""
    if "spec_acceptance_profile" not in trials or trials.spec_acceptance_profile.isna().all():
        return trials, requests, engines
    trials = trials.copy()
    profile = [_profile_text(v) for v in trials.spec_acceptance_profile]
    off = trials.spec_method.fillna("off") == "off"
    parts = []
    spec = trials[~off.to_numpy()].assign(
        workload_params_json=[_with_param(p, f) for p, f, o in zip(trials.workload_params_json, profile, off) if not o])
    parts.append(spec)
    for source, group in trials[off.to_numpy()].groupby("source", sort=False):
        present = sorted({f for f, s, o in zip(profile, trials.source, off) if s == source and not o}) or ["real"]
        for f in present:
            parts.append(group.assign(workload_params_json=[_with_param(p, f) for p in group.workload_params_json],
                                      trial_id=[f"{t}{_ID_SEPARATOR}{f}" for t in group.trial_id]))
    trials = pd.concat(parts, ignore_index=True).assign(spec_acceptance_profile=None)
    engines = engines.assign(spec_acceptance_profile=None) if "spec_acceptance_profile" in engines else engines
    return trials, requests_of(trials, requests), engines


def requests_of(trials: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """`requests` keyed like `trials` after profiles_as_points: a spec-off trial's requests once more under each
    of its copies' ids (any requests frame: the report's columns or a section's own)."""
    if not len(requests) or "trial_id" not in requests or not len(trials):
        return requests
    copies = [(s, t) for s, t in zip(trials.source, trials.trial_id) if _ID_SEPARATOR in str(t)]
    if not copies:
        return requests
    key = pd.DataFrame(copies, columns=["source", "copy_id"])
    key["trial_id"] = [c.split(_ID_SEPARATOR)[0] for c in key.copy_id]
    copied = requests.merge(key, on=["source", "trial_id"])
    copied = copied.assign(trial_id=copied.copy_id).drop(columns="copy_id")
    return pd.concat([requests, copied], ignore_index=True)
