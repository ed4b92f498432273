"""When the driver stops something (pure): the deadline, a retry's limit, the race's eliminations."""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from runner.scheduling.order import Step


class Interrupted(Exception):
    pass


class DeadlineReached(Exception):
    def __init__(self, left: int, reason: str):
        super().__init__(reason)
        self.left, self.reason = left, reason


@dataclass(kw_only=True)
class Deadline:
    """execution.deadline_s: no engine load or trial starts that cannot end before it."""

    deadline_s: Optional[float]
    t0: float = field(default_factory=time.monotonic)

    def left_s(self) -> Optional[float]:
        if self.deadline_s is None:
            return None
        return self.deadline_s - (time.monotonic() - self.t0)

    def check(self, *, what: str, estimate_s: Optional[float], todo: Callable[[], int]) -> None:
        """Raises DeadlineReached when the call about to go out would pass the deadline; `todo`: trials left."""
        left = self.left_s()
        if left is None or estimate_s is None or estimate_s <= left:
            return
        raise DeadlineReached(left=todo(), reason=f"{what} would take ~{estimate_s:.0f} s, {max(left, 0):.0f} s "
                                                  f"left before execution.deadline_s={self.deadline_s:g}")


def trial_estimate(durations: dict, *, engine_id: str, workload: str) -> Optional[float]:
    """A trial's expected duration: the median of this engine's trials of the workload, else of the workload's
    on any engine; None before any such trial ran (the first one always starts)."""
    own = durations.get((engine_id, workload))
    if own:
        return statistics.median(own)
    other = [d for (e, w), values in durations.items() if w == workload for d in values]
    return statistics.median(other) if other else None


def load_estimate(loads: dict[str, float], *, engine_id: str) -> Optional[float]:
    """An engine's expected load: its own measured one, else the median of every load so far."""
    if engine_id in loads:
        return loads[engine_id]
    return statistics.median(loads.values()) if loads else None


def back_before_deadline(*, engine_id: str, steps: Sequence[Step], left_s: Optional[float], loaded: set[str],
                         loads: dict[str, float], durations: dict) -> bool:
    """Keeping an engine (a first sleep costs seconds on a GPU) pays only if its next turn starts before the
    deadline; the steps before that turn are estimated from the sweep so far."""
    if left_s is None:
        return True
    ahead = 0.0
    for step in steps:
        if step.engine_id == engine_id:
            return ahead < left_s
        if step.engine_id not in loaded:
            ahead += load_estimate(loads, engine_id=step.engine_id) or 0.0
        ahead += sum(trial_estimate(durations, engine_id=step.engine_id, workload=t.workload) or 0.0
                     for t in step.trials)
    return False


def may_retry(*, attempts: int, max_retries: int) -> bool:
    """A trial whose actor died runs again while its attempts so far are within execution.max_trial_retries."""
    return attempts <= max_retries
