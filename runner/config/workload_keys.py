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
              "sample_requests": None, "over_max_model_len": "refuse"},
}


def _same(a, b) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)  # 1 is 1.0, never True


def without_declared_defaults(name: str, params: dict) -> dict:
    """`params` of workload `name` without the keys DECLARED_OUTSIDE_IDS lists at their declared values."""
    declared = DECLARED_OUTSIDE_IDS.get(name, {})
    return {k: v for k, v in params.items() if not (k in declared and _same(v, declared[k]))}


@functools.lru_cache(maxsize=None)
def declared_keys(name: str) -> frozenset[str]:
    """The keys conf/workload/<name>.yaml declares (set as `workload.<name>.<key>=v`; others take `+`)."""
    from runner.config.location import conf_root

    try:
        text = conf_root().joinpath("workload", f"{name}.yaml").read_text()
    except (OSError, ValueError):
        return frozenset()
    block = (yaml.safe_load(text) or {}).get(name)
    return frozenset(block) if isinstance(block, dict) else frozenset()


def workload_override(name: str, key: str, value: str) -> str:
    """The override that sets `workload.<name>.<key>` as typed: plain where conf/workload/ declares the key, `++`
    where it may or may not be there already (added by a sweep file, or by the command's own `+`)."""
    plus = "" if key in declared_keys(name) else "++"
    return f"{plus}workload.{name}.{key}={value}"
