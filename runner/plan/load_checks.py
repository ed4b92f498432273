"""Checks of production-shaped load (open-loop arrivals, traces, prompt sets) that span more than one workload
parameter; each parameter's own value is checked by its workload's params (WorkloadParams.validate). Pure."""
from __future__ import annotations


def _values(raw: dict, key: str) -> list:
    value = raw.get(key)
    return list(value) if isinstance(value, (list, tuple)) else [value]


def check_load_shape(*, workloads: dict) -> list[str]:
    """Open-loop arrivals need streamed requests: the offline API hands the engine one batch, with no clock."""
    errors = []
    for name, raw in (workloads or {}).items():
        raw = dict(raw or {})
        open_loop = [a for a in _values(raw, "arrival") if a not in (None, "closed")]
        if open_loop and raw.get("api", "async") == "offline":
            errors.append(f"workload {name!r}: arrival={open_loop[0]} sends requests on a clock, which "
                          f"api=offline (one LLM.generate batch) cannot (fix: workload.{name}.api=async)")
    return errors
