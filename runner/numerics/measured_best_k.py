"""The best measured draft count per batch size, from trial rows, and the schedule it gives. Pure.

Per point (workload point and engine settings, without the draft count) and per method and acceptance profile:
spec off and each static k measured there are candidates of the decision module on the workload's deciding
figure (one sample per repeat), so the choice is the smallest k tied for first (k = 0 where speculation loses).
A point's batch size is the median over its trials of the engine's median requests per step (`batch_size_p50`):
what vLLM keys a schedule on, not the client's concurrency.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

from runner.numerics.decision import Candidate, decide
from runner.numerics.draft_schedule import DraftSchedule, build_schedule
from runner.numerics.spec_predict import _plain, static_k_rows
from runner.numerics.step_cost import POINT_COLUMNS, batch_size
from runner.numerics.stats import MIN_REPEATS, TIE_BAND
from runner.spec_arm import row_spec

# A schedule is one per workload point and engine family: the point without its load.
FAMILY_COLUMNS = tuple(c for c in POINT_COLUMNS if c != "concurrency")


@dataclass(frozen=True, kw_only=True)
class LoadChoice:
    concurrency: int
    batch_size: int  # the point's median requests per engine step, rounded (at least 1)
    tied: tuple[int, ...]  # the ks tied for first, simplest first; () when the data cannot say yet
    choice: Optional[int]


@dataclass(frozen=True, kw_only=True)
class FamilyChoices:
    """One family's (workload point without load, method, profile) choices per load."""

    family: dict = field(hash=False)  # FAMILY_COLUMNS' values
    method: str
    profile: Optional[str]  # the acceptance profile's JSON text (None: the model's own)
    loads: tuple[LoadChoice, ...]

    def schedule(self, *, max_num_seqs: int) -> Optional[DraftSchedule]:
        """The merged schedule from batch size 1 up to max_num_seqs (None: k = 0 everywhere or no choice)."""
        best = {c.batch_size: list(c.tied) for c in self.loads if c.choice is not None}
        return build_schedule(best, max_num_seqs=max_num_seqs) if best else None


def _key(row: Mapping, columns) -> tuple:
    return tuple(_plain(row.get(c)) for c in columns)


def measured_choices(trials: Iterable[Mapping], *, metric_column: str, higher_is_better: bool,
                     tie_band: float = TIE_BAND, min_repeats: int = MIN_REPEATS, seed: int = 0) -> list[FamilyChoices]:
    """Per family the decision at every load where a static k of its method ran beside spec off."""
    rows = [r for r in static_k_rows(trials) if _plain(r.get(metric_column)) is not None]
    off: dict[tuple, list[Mapping]] = {}
    spec: dict[tuple, dict[tuple, list[Mapping]]] = {}  # (family, method, profile) → point → rows
    for row in rows:
        method = str(row.get("spec_method") or "off")
        point = _key(row, POINT_COLUMNS)
        if method == "off":
            off.setdefault(point, []).append(row)
        else:
            family = (_key(row, FAMILY_COLUMNS), method, _plain(row.get("spec_acceptance_profile")))
            spec.setdefault(family, {}).setdefault(point, []).append(row)
    out = []
    for (family, method, profile), points in spec.items():
        loads = []
        for point, here in points.items():
            pool = here + off.get(point, [])
            by_k: dict[int, list[float]] = {}
            for row in pool:
                k = row_spec(row).k
                by_k.setdefault(k, []).append(float(row[metric_column]))
            decision = decide([Candidate(arm=f"k={k}", values=tuple(v), k=k) for k, v in sorted(by_k.items())],
                              higher_is_better=higher_is_better, tie_band=tie_band, min_repeats=min_repeats,
                              seed=seed)
            k_of = {f"k={k}": k for k in by_k}
            size = statistics.median(batch_size(r, "batch_size_p50") for r in pool)
            loads.append(LoadChoice(concurrency=int(dict(zip(POINT_COLUMNS, point))["concurrency"]),
                                    batch_size=max(1, round(size)),
                                    tied=tuple(k_of[a] for a in decision.tied) if decision.choice else (),
                                    choice=k_of.get(decision.choice) if decision.choice else None))
        out.append(FamilyChoices(family=dict(zip(FAMILY_COLUMNS, family)), method=method, profile=profile,
                                 loads=tuple(sorted(loads, key=lambda c: c.concurrency))))
    return out
