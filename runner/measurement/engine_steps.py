"""The engine's real batch size: how many requests each engine step carried, tallied over the process's life.

vLLM picks a dynamic draft count per step from the requests scheduled in that step (`len(num_scheduled_tokens)`
in `v1/core/sched/scheduler.py`), not from the client's concurrency; this tally is that number per step. A stat
logger (runner.execution.step_logger) adds one step per `SchedulerStats`; a trial's columns are the difference
between two snapshots, as for vLLM's counters. Pure: no vLLM import.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional


@dataclass(kw_only=True)
class StepTally:
    """Engine steps by batch size (requests in the step), cumulative."""

    steps: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, batch_size: int) -> None:
        if batch_size < 1:  # a stats message of an idle engine is no step
            return
        with self._lock:
            self.steps[batch_size] = self.steps.get(batch_size, 0) + 1

    def snapshot(self) -> dict[int, int]:
        with self._lock:
            return dict(self.steps)


# One engine per process (as vLLM's Prometheus registry): the process's tally is that engine's.
STEPS = StepTally()


def step_batch_size(*, num_running: int, num_finished: int) -> int:
    """Requests in the step a `SchedulerStats` reports: those still running after it plus those it finished
    (vLLM counts running requests after removing the finished ones)."""
    return int(num_running) + int(num_finished)


def batch_columns(before: dict[int, int], after: dict[int, int]) -> dict:
    """A trial's batch-size columns from two snapshots: engine steps in the window and requests per step."""
    delta = {b: n - before.get(b, 0) for b, n in after.items() if n - before.get(b, 0) > 0}
    steps = sum(delta.values())
    if not steps:
        return {"engine_steps": 0 if after or before else None, "batch_size_mean": None, "batch_size_p50": None,
                "batch_size_max": None}
    return {"engine_steps": steps, "batch_size_mean": sum(b * n for b, n in delta.items()) / steps,
            "batch_size_p50": weighted_median(delta), "batch_size_max": max(delta)}


def weighted_median(counts: dict[int, int]) -> Optional[float]:
    """The median of values given as value → count (the mean of the two middle values for an even total)."""
    total = sum(counts.values())
    if not total:
        return None
    ordered = sorted(counts.items())

    def at(rank: int) -> int:  # the value at 0-based rank
        seen = 0
        for value, n in ordered:
            seen += n
            if rank < seen:
                return value
        return ordered[-1][0]

    return (at((total - 1) // 2) + at(total // 2)) / 2
