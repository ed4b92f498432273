"""What one engine step carried, read from the messages vLLM hands a stat logger: the requests still running after
the step (`SchedulerStats.num_running_reqs`) and those the step finished (`IterationStats.finished_requests`).

A renamed field is not read as 0 (every batch size would then be 0): the step is not counted, the trial's
batch-size columns stay null, and the log says why once per process.
"""
from __future__ import annotations

from typing import Optional

from runner.vllm import notice
from runner.vllm.versions import Check

PIECE = "step_stats"
RUNNING = "num_running_reqs"  # SchedulerStats
FINISHED = "finished_requests"  # IterationStats
_said: set[str] = set()


def step_requests(scheduler_stats, iteration_stats) -> Optional[tuple[int, int]]:
    """(running after the step, finished by it); None where this vLLM's messages lack either field."""
    running = getattr(scheduler_stats, RUNNING, None)
    if not isinstance(running, int):
        _unread(f"SchedulerStats has no integer {RUNNING} ({type(scheduler_stats).__name__})")
        return None
    if iteration_stats is None:  # a step with no output to iterate over
        return running, 0
    finished = getattr(iteration_stats, FINISHED, None)
    if finished is None:
        _unread(f"IterationStats has no {FINISHED} ({type(iteration_stats).__name__})")
        return None
    return running, len(finished)


def _unread(reason: str) -> None:
    if reason not in _said:
        _said.add(reason)
        notice.unread(PIECE, f"{reason}: engine steps are not counted (batch-size columns stay null)")


def check() -> Check:
    import dataclasses

    from vllm.v1.metrics.stats import IterationStats, SchedulerStats

    if RUNNING not in {f.name for f in dataclasses.fields(SchedulerStats)}:
        return Check(active=False, reason=f"SchedulerStats has no {RUNNING}")
    if not hasattr(IterationStats(), FINISHED):
        return Check(active=False, reason=f"IterationStats has no {FINISHED}")
    return Check(active=True)
