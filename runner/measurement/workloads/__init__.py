"""The workload registry: name → workload class."""
from __future__ import annotations

from runner.measurement.workloads.base import Workload
from runner.measurement.workloads.decode import Decode
from runner.measurement.workloads.fixed_task import FixedTask
from runner.measurement.workloads.long_context import LongContext
from runner.measurement.workloads.multi_turn import MultiTurn
from runner.measurement.workloads.prompt_set import PromptSet
from runner.measurement.workloads.second_request import SecondRequest
from runner.measurement.workloads.shared_prefix import SharedPrefix
from runner.measurement.workloads.trace import Trace

WORKLOADS: dict[str, type[Workload]] = {
    w.name: w for w in [Decode, SharedPrefix, SecondRequest, MultiTurn, LongContext, FixedTask, Trace,
                                                                             PromptSet]}


def workload_class(name: str) -> type[Workload]:
    try:
        return WORKLOADS[name]
    except KeyError:
        valid = ", ".join(sorted(WORKLOADS))
        raise ValueError(f"unknown workload {name!r}; valid: {valid} (fix: sweep.workloads=[{valid.split(', ')[0]}])") from None
