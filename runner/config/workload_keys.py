"""Workload keys conf/workload/ declares so that `workload.<name>.<key>=value` works without `+`, but which the
trial ids of earlier runs never saw: a point is keyed on the params as the sweep gave them (runner.plan.grid), so
at its declared value such a key stays out of the point, and every earlier id holds. Pure."""
from __future__ import annotations

import functools
from typing import Any

import yaml

# The open-loop keys of decode and multi_turn at their closed-loop values (the workloads' own defaults).
# prompt_set declared them from its start (its ids include them); its rendering keys came later.
_CLOSED_LOOP = {"arrival": "closed", "request_rate": None, "burstiness": 1.0, "max_concurrency": None}
DECLARED_OUTSIDE_IDS: dict[str, dict[str, Any]] = {
    "decode": {**_CLOSED_LOOP, "num_requests": 32},
    "multi_turn": {**_CLOSED_LOOP, "num_sessions": 8, "chat_template": "auto"},
    "prompt_set": {"chat_template": "auto", "over_length": "refuse"},
    "trace": {"trace_format": "mooncake", "start_s": 0.0, "end_s": None, "skip_requests": 0, "sample_fraction": None,
              "sample_requests": None, "over_length": "refuse"},
}


# Workload keys renamed since runs were saved, older name → its name now. A config that spells an older name (a
# run folder's config.yaml, a sweep file, `+workload.trace.over_max_model_len=skip`) reads as the new one, and the
# report reads older rows' params the same way; a trial id hashes the older spelling (id_point), so that a run made
# before the rename resumes with its finished trials.
RENAMED: dict[str, dict[str, str]] = {"trace": {"over_max_model_len": "over_length"}}


def with_current_names(name: str, params: dict) -> dict:
    """`params` of workload `name` with every older key name read as its name now: the older one's value wins
    where the new key holds its declared value (conf/workload/'s, which the older spelling was meant to set)."""
    renamed = RENAMED.get(name, {})
    if not renamed or not set(renamed) & set(params):
        return params
    declared = DECLARED_OUTSIDE_IDS.get(name, {})
    out = {k: v for k, v in params.items() if k not in renamed}
    for old, new in renamed.items():
        if old in params and (new not in params or _same(params[new], declared.get(new, params[new]))):
            out[new] = params[old]
    return out


def id_point(name: str, point: dict) -> dict:
    """The point as trial ids hash it: renamed keys in their older spelling (ids made before the rename hold)."""
    older = {new: old for old, new in RENAMED.get(name, {}).items()}
    return {older.get(k, k): v for k, v in point.items()} if older else point


def _same(a, b) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)  # 1 is 1.0, never True


def without_declared_defaults(name: str, params: dict) -> dict:
    """`params` of workload `name` without the keys DECLARED_OUTSIDE_IDS lists at their declared values."""
    declared = DECLARED_OUTSIDE_IDS.get(name, {})
    return {k: v for k, v in params.items() if not (k in declared and _same(v, declared[k]))}


@functools.lru_cache(maxsize=None)
def _declared_values(name: str) -> dict[str, Any]:
    """The keys conf/workload/<name>.yaml declares, with their values there."""
    from runner.config.location import conf_root

    try:
        text = conf_root().joinpath("workload", f"{name}.yaml").read_text()
    except (OSError, ValueError):
        return {}
    block = (yaml.safe_load(text) or {}).get(name)
    return dict(block) if isinstance(block, dict) else {}


def declared_keys(name: str) -> frozenset[str]:
    """The keys conf/workload/<name>.yaml declares (set as `workload.<name>.<key>=v`; others take `+`)."""
    return frozenset(_declared_values(name))


def workload_override(name: str, key: str, value: str) -> str:
    """The override that sets `workload.<name>.<key>` as typed: plain where conf/workload/ declares the key, `++`
    where it may or may not be there already (added by a sweep file, or by the command's own `+`)."""
    plus = "" if key in declared_keys(name) else "++"
    return f"{plus}workload.{name}.{key}={value}"
