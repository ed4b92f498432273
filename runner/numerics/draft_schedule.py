"""A draft-count schedule as vLLM deploys it: `speculative_config.num_speculative_tokens_per_batch_size`. Pure.

vLLM (0.26 and 0.32) picks k per engine step from the number of requests scheduled in that step, by a list of
inclusive `[start, end, k]` ranges: sorted, non-overlapping, the first starting at 1, k >= 0
(`v1/spec_decode/dynamic/utils.py: validate_and_normalize_dynamic_sd_schedule`); a batch size in a gap takes
the k before it, one past the last range the last k; `num_speculative_tokens` is the largest k. A k of 0 there
turns speculation off for those batch sizes.

`build_schedule` turns the best k per batch size (a plain mapping; ties go to the smaller k) into merged ranges
from 1 up to max_num_seqs; `check_with_vllm` runs vLLM's own validator on them (imported lazily).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Collection, Mapping, Optional, Union


class ScheduleError(ValueError):
    """A schedule vLLM would refuse, or one that cannot be built; the message says which rule."""


@dataclass(frozen=True)
class DraftSchedule:
    """Inclusive batch-size ranges, each with its draft count: ((start, end, k), ...), sorted."""

    ranges: tuple[tuple[int, int, int], ...]

    def __post_init__(self):
        problem = schedule_problem(self.ranges)
        if problem:
            raise ScheduleError(problem)

    @classmethod
    def parse(cls, value: Any) -> "DraftSchedule":
        """From `[[start, end, k], ...]` (a list, or its JSON text)."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise ScheduleError(f"schedule {value!r} is not a list of [start, end, k] (JSON)") from None
        if not isinstance(value, (list, tuple)) or not value:
            raise ScheduleError(f"schedule {value!r} must be a non-empty list of [start, end, k] ranges")
        ranges = []
        for entry in value:
            if not isinstance(entry, (list, tuple)) or len(entry) != 3 or not all(
                    isinstance(v, int) and not isinstance(v, bool) for v in entry):
                raise ScheduleError(f"schedule entry {entry!r} must be three integers [start, end, k]")
            ranges.append(tuple(int(v) for v in entry))
        return cls(tuple(sorted(ranges)))

    @property
    def max_k(self) -> int:
        """vLLM's `num_speculative_tokens` for this schedule."""
        return max(k for _, _, k in self.ranges)

    def k_at(self, batch_size: int) -> int:
        """The k vLLM drafts at this batch size (a gap or the tail takes the k before it)."""
        k = self.ranges[0][2]
        for start, _, range_k in self.ranges:
            if start > batch_size:
                break
            k = range_k
        return k

    def as_list(self) -> list[list[int]]:
        return [list(r) for r in self.ranges]

    def json(self) -> str:
        """Canonical text, as the `spec_schedule` column holds it: [[1,1,3],[2,8,1]]."""
        return json.dumps(self.as_list(), separators=(",", ":"))

    @property
    def label(self) -> str:
        """"1:3,2-8:1" (batch sizes: k)."""
        return ",".join(f"{s}:{k}" if s == e else f"{s}-{e}:{k}" for s, e, k in self.ranges)


def schedule_problem(ranges) -> Optional[str]:
    """vLLM's rules for a schedule, as text (None when it holds); the runner also needs one k > 0."""
    if not ranges:
        return "a schedule needs at least one [start, end, k] range"
    previous_end = 0
    for start, end, k in sorted(ranges):
        if start <= 0 or end <= 0:
            return f"batch-size range [{start}, {end}] must be positive"
        if start > end:
            return f"batch-size range [{start}, {end}, {k}] must start at or below its end"
        if k < 0:
            return f"draft count {k} in [{start}, {end}, {k}] must be >= 0"
        if start <= previous_end:
            return f"batch-size ranges must not overlap (range starting at {start})"
        previous_end = end
    if min(start for start, _, _ in ranges) != 1:
        return "the first batch-size range must start at 1 (every batch size needs a draft count)"
    if max(k for _, _, k in ranges) == 0:
        return "every range has k = 0: that is spec off (use spec_method off instead of a schedule)"
    return None


BestK = Union[int, Collection[int]]


def chosen_k(best: BestK) -> int:
    """One batch size's k: the k given, or the smallest of the ks tied for first (ties go to the simpler arm)."""
    if isinstance(best, int):
        return best
    ks = [int(k) for k in best]
    if not ks:
        raise ScheduleError("a batch size has no candidate k")
    return min(ks)


def build_schedule(best: Mapping[int, BestK], *, max_num_seqs: int) -> Optional[DraftSchedule]:
    """Merged ranges from batch size 1 up to max_num_seqs from `batch size → best k` (or the ks tied for first;
    k = 0 where speculation loses). A measured batch size's k holds from it up to the next measured one; the
    smallest extends down to 1. Batch sizes above max_num_seqs never run and are left out. None when k = 0 at
    every batch size: no schedule, spec off."""
    if max_num_seqs < 1:
        raise ScheduleError(f"max_num_seqs={max_num_seqs} must be >= 1")
    points = sorted((int(b), chosen_k(k)) for b, k in best.items() if 1 <= int(b) <= max_num_seqs)
    if not points:
        raise ScheduleError(f"no batch size between 1 and max_num_seqs={max_num_seqs} to build a schedule from")
    ranges: list[list[int]] = []
    for i, (batch, k) in enumerate(points):
        start = 1 if i == 0 else batch
        end = points[i + 1][0] - 1 if i + 1 < len(points) else max_num_seqs
        if ranges and ranges[-1][2] == k:
            ranges[-1][1] = end
        else:
            ranges.append([start, end, k])
    if all(k == 0 for _, _, k in ranges):
        return None
    return DraftSchedule(tuple(tuple(r) for r in ranges))


def check_with_vllm(schedule: DraftSchedule) -> list[tuple[int, int, int]]:
    """vLLM's own validator on the schedule (raises its ValueError); returns vLLM's normalised ranges."""
    from runner.vllm.schedule_rules import validate_schedule

    return validate_schedule(schedule.as_list())
