"""The workload registry: name → workload class."""
from __future__ import annotations

from runner.measurement.workloads.base import Workload
from runner.measurement.workloads.decode import Decode

WORKLOADS: dict[str, type[Workload]] = {w.name: w for w in [Decode]}


def workload_class(name: str) -> type[Workload]:
    try:
        return WORKLOADS[name]
    except KeyError:
        valid = ", ".join(sorted(WORKLOADS))
        raise ValueError(f"unknown workload {name!r}; valid: {valid} (fix: sweep.workloads=[{valid.split(', ')[0]}])") from None
