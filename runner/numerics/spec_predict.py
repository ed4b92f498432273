"""Acceptance predicted for every draft count from one engine's per-position counters. Pure (numpy only).

For a chain drafter (mtp, eagle, eagle3, draft_model) the first k' drafts of a step do not depend on k, so an
engine drafting k tokens gives the acceptance length of every k' <= k: with vLLM's counters,
AL(k') = 1 + sum_{i<k'} accepted_at_position_i / drafts (`v1/spec_decode/metrics.py`'s definitions; the
per-position rate is unconditional: position i counts only when positions 0..i were all accepted). n-gram and
suffix drafts may propose fewer than k tokens and are not chain-consistent: they get no prediction.
Trials are plain rows (dicts with the trials table's columns); a schedule engine (k varies per step) is no k.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence

from runner.numerics.stats import Interval, mean_interval
from runner.schema import TrialStatus
from runner.spec_arm import row_spec

CHAIN_DRAFTERS = frozenset({"mtp", "eagle", "eagle3", "draft_model"})
# What makes two trials comparable, besides the draft count: engine settings and the workload point.
GROUP_COLUMNS = ("model", "spec_method", "enable_prefix_caching", "gpu_memory_utilization", "max_model_len",
                 "tensor_parallel_size", "engine_args_json", "spec_acceptance_profile", "api", "workload",
                 "workload_params_json", "concurrency")


def acceptance_lengths(*, drafts: float, accepted_per_position: Sequence[float]) -> list[float]:
    """AL(k') for k' = 1 .. len(accepted_per_position), from one engine's counters."""
    if not drafts:
        return []
    return lengths_from_rates([a / drafts for a in accepted_per_position])


def lengths_from_rates(rates: Sequence[float]) -> list[float]:
    """AL(k') = 1 + the sum of the first k' unconditional per-position rates, for k' = 1 .. len(rates)."""
    out, total = [], 1.0
    for rate in rates:
        total += float(rate)
        out.append(total)
    return out


def _plain(value):
    if isinstance(value, float) and value != value:
        return None
    return value.item() if hasattr(value, "item") else value


def group_key(row: Mapping, columns: Sequence[str] = GROUP_COLUMNS) -> tuple:
    return tuple(_plain(row.get(c)) for c in columns)


def static_k_rows(trials: Iterable[Mapping]) -> list[Mapping]:
    """Finished trials of engines that draft a fixed k with counters in their window (no schedule)."""
    rows = []
    for row in trials:
        if row.get("status", TrialStatus.OK) != TrialStatus.OK or _plain(row.get("spec_schedule")):
            continue
        rows.append(row)
    return rows


def trial_lengths(row: Mapping) -> list[float]:
    """AL(1..k) of one chain-drafter trial from its per-position rates ([] when it has none or is no chain)."""
    if row.get("spec_method") not in CHAIN_DRAFTERS or not _plain(row.get("spec_num_drafts")):
        return []
    rates = list(row.get("spec_acceptance_per_position") if row.get("spec_acceptance_per_position") is not None
                 else [])
    return lengths_from_rates(rates)


@dataclass(frozen=True, kw_only=True)
class AcceptancePrediction:
    """AL(k) predicted from the engines drafting `source_k` (> k) at one point, against AL measured at k there."""

    group: tuple  # group_key(...) of GROUP_COLUMNS
    method: str
    source_k: int
    k: int
    predicted: Interval  # mean over repeats, Student t interval
    n_predicted: int
    measured: Optional[Interval] = None
    n_measured: int = 0
    columns: tuple[str, ...] = field(default=GROUP_COLUMNS, repr=False)

    @property
    def coordinates(self) -> dict:
        return dict(zip(self.columns, self.group))

    @property
    def inside(self) -> Optional[bool]:
        """Whether the predicted mean lies inside the measured interval (None: nothing measured to compare)."""
        m = self.measured
        if m is None or m.lo != m.lo or m.hi != m.hi:
            return None
        return m.lo <= self.predicted.point <= m.hi


def predict_acceptance(trials: Iterable[Mapping], *,
                       columns: Sequence[str] = GROUP_COLUMNS) -> list[AcceptancePrediction]:
    """Every k' < k predicted from each chain-drafter engine's trials, per group; measured at k' where the same
    group has engines drafting k'."""
    by_group: dict[tuple, dict[int, list[list[float]]]] = {}
    for row in static_k_rows(trials):
        lengths = trial_lengths(row)
        k = row_spec(row).k
        if len(lengths) != k or not k:
            continue
        by_group.setdefault(group_key(row, columns), {}).setdefault(k, []).append(lengths)
    out = []
    for group, by_k in by_group.items():
        method = dict(zip(columns, group)).get("spec_method")
        for source_k in sorted(by_k):
            for k in range(1, source_k):
                predicted = mean_interval([lengths[k - 1] for lengths in by_k[source_k]])
                measured_values = [lengths[k - 1] for lengths in by_k.get(k, [])]
                out.append(AcceptancePrediction(
                    group=group, method=str(method), source_k=source_k, k=k, predicted=predicted,
                    n_predicted=len(by_k[source_k]), measured=mean_interval(measured_values),
                    n_measured=len(measured_values), columns=tuple(columns)))
    return out


def pooled_rates(trials: Iterable[Mapping], *, method: str) -> list[float]:
    """Per-position unconditional acceptance rates pooled over a run's finished trials of one method (accepted
    at position i over drafts, summed over the trials drafting at least i + 1 tokens), made non-increasing as
    vLLM's synthetic rejection requires ([] when no trial of the method has counters)."""
    accepted: list[float] = []
    drafts: list[float] = []
    for row in static_k_rows(trials):
        n = _plain(row.get("spec_num_drafts"))
        if row.get("spec_method") != method or not n:
            continue
        rates = list(row.get("spec_acceptance_per_position") if row.get("spec_acceptance_per_position") is not None
                     else [])
        for i, rate in enumerate(rates):
            if i == len(accepted):
                accepted.append(0.0)
                drafts.append(0.0)
            accepted[i] += float(rate) * n
            drafts[i] += n
    out: list[float] = []
    for a, d in zip(accepted, drafts):
        rate = a / d if d else 0.0
        out.append(min([rate, *out[-1:]]))
    return out
