"""A step-cost model and the decode speed it predicts for any draft count. Pure (numpy only).

A trial's step time is its mean gap between streamed chunks (`itl_mean_s`): each engine step hands every running
session one chunk, so a session sees one gap per step. Step time grows with k (the drafter's passes and the
longer verification) and with the batch; at one workload point (its batch size) and repeat, the model takes the
step times measured at the engines' draft counts (spec off as k = 0) and interpolates linearly between them; it
never extrapolates beyond the smallest and largest k measured there.

Predicted decode speed at k = AL(k) / step time (one session) and batch size × AL(k) / step time (the engine),
AL from runner.numerics.spec_predict (a chain drafter's larger-k engine gives every smaller k). Each repeat
gives one prediction (its own trials only); the interval is over repeats. Step cost also shifts somewhat with
acceptance at large batches, so a predicted k is a contender to measure, never a figure to deploy unmeasured.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional

from runner.numerics.spec_predict import CHAIN_DRAFTERS, GROUP_COLUMNS, _plain, static_k_rows, trial_lengths
from runner.numerics.stats import Interval, mean_interval
from runner.spec_arm import row_spec

# A workload point where engines of every draft count (and spec off) are compared.
POINT_COLUMNS = tuple(c for c in GROUP_COLUMNS if c not in ("spec_method", "spec_acceptance_profile"))


def step_time_s(row: Mapping) -> Optional[float]:
    """Time per engine step seen by one session: the trial's mean gap between streamed chunks."""
    value = _plain(row.get("itl_mean_s"))
    return float(value) if value else None


def batch_size(row: Mapping, column: str = "batch_size_mean") -> float:
    """Requests per engine step (measured: mean or p50), or the client's concurrency where the trial has no step
    tally."""
    value = _plain(row.get(column))
    return float(value) if value else float(row.get("concurrency") or 1)


def interpolate(points: Mapping[int, float], k: int) -> Optional[float]:
    """The value at k, linear between the nearest measured draft counts around it (None outside them)."""
    if k in points:
        return points[k]
    below = [x for x in points if x < k]
    above = [x for x in points if x > k]
    if not below or not above:
        return None
    lo, hi = max(below), min(above)
    return points[lo] + (points[hi] - points[lo]) * (k - lo) / (hi - lo)


@dataclass(frozen=True, kw_only=True)
class SpeedPrediction:
    """Decode speed predicted at one point for one method and draft count (k = 0: spec off)."""

    coordinates: dict = field(hash=False)  # POINT_COLUMNS' values
    method: str
    profile: Optional[str]  # the synthetic acceptance profile of the method's engines (None: real)
    k: int
    measured: bool  # an engine drafting k ran here (its own step time, not an interpolation)
    batch_size: float  # mean requests per step (the aggregate's multiplier)
    batch_size_p50: float  # the median step's requests: the batch size a schedule keys this point on
    acceptance_length: Interval
    step_s: Interval
    tok_s_per_session: Interval
    tok_s_aggregate: Interval
    n: int  # repeats behind it

    @property
    def point_key(self) -> tuple:
        return tuple(self.coordinates.get(c) for c in POINT_COLUMNS)


@dataclass(kw_only=True)
class _Repeat:
    steps: dict[int, float] = field(default_factory=dict)  # k → step time
    measured: dict[int, float] = field(default_factory=dict)  # engine k → its own AL
    lengths: dict[int, list[float]] = field(default_factory=dict)  # chain drafter's engine k → AL(1..k)
    batches: list[float] = field(default_factory=list)
    medians: list[float] = field(default_factory=list)


def predict_speeds(trials: Iterable[Mapping]) -> list[SpeedPrediction]:
    """For every point, method (and acceptance profile) and k from 0 to its largest measured k: the predicted
    speeds. k between measured draft counts is predicted for chain drafters only (others have no AL there)."""
    rows = [r for r in static_k_rows(trials) if step_time_s(r)]
    off: dict[tuple, dict[int, tuple[float, float]]] = {}  # point → repeat → (step time, batch)
    arms: dict[tuple, dict[int, _Repeat]] = {}  # (point, method, profile) → repeat → measurements
    for row in rows:
        point = tuple(_plain(row.get(c)) for c in POINT_COLUMNS)
        repeat = int(row.get("repeat") or 0)
        method = str(row.get("spec_method") or "off")
        if method == "off":
            off.setdefault(point, {})[repeat] = (step_time_s(row), batch_size(row), batch_size(row, "batch_size_p50"))
            continue
        k = row_spec(row).k
        rep = arms.setdefault((point, method, _plain(row.get("spec_acceptance_profile"))), {}).setdefault(
            repeat, _Repeat())
        rep.steps[k] = step_time_s(row)
        rep.batches.append(batch_size(row))
        rep.medians.append(batch_size(row, "batch_size_p50"))
        own = _plain(row.get("spec_mean_acceptance_length"))
        if own:
            rep.measured[k] = float(own)
        lengths = trial_lengths(row)
        if len(lengths) == k:
            rep.lengths[k] = lengths
    out = []
    for (point, method, profile), repeats in arms.items():
        for repeat, (step, batch, median) in off.get(point, {}).items():
            rep = repeats.setdefault(repeat, _Repeat())
            rep.steps.setdefault(0, step)
            rep.batches.append(batch)
            rep.medians.append(median)
        k_max = max(k for rep in repeats.values() for k in rep.steps)
        measured_ks = {k for rep in repeats.values() for k in rep.steps}
        for k in range(0, k_max + 1):
            if k not in measured_ks and method not in CHAIN_DRAFTERS:
                continue
            per = [_predict_repeat(rep, k) for rep in repeats.values()]
            per = [p for p in per if p is not None]
            if not per:
                continue
            length, step, batch = (list(v) for v in zip(*per))
            medians = [m for rep in repeats.values() for m in rep.medians]
            out.append(SpeedPrediction(
                coordinates=dict(zip(POINT_COLUMNS, point)), method=method, profile=profile, k=k,
                measured=k in measured_ks, batch_size=sum(batch) / len(batch),
                batch_size_p50=sorted(medians)[len(medians) // 2],
                acceptance_length=mean_interval(length), step_s=mean_interval(step),
                tok_s_per_session=mean_interval([a / s for a, s in zip(length, step)]),
                tok_s_aggregate=mean_interval([b * a / s for a, s, b in zip(length, step, batch)]), n=len(per)))
    return out


def _predict_repeat(rep: _Repeat, k: int) -> Optional[tuple[float, float, float]]:
    """(AL, step time, batch size) at k from one repeat's trials."""
    step = interpolate(rep.steps, k)
    if step is None or not rep.batches:
        return None
    if k == 0:
        length = 1.0
    elif k in rep.measured:
        length = rep.measured[k]
    else:
        sources = [lengths for source_k, lengths in rep.lengths.items() if source_k >= k]
        if not sources:
            return None
        # The smallest larger engine of a chain drafter.
        length = min(((len(s), s) for s in sources), key=lambda pair: pair[0])[1][k - 1]
    return length, step, sum(rep.batches) / len(rep.batches)


def contenders(predictions: Iterable[SpeedPrediction], *, aggregate: bool = True) -> list[int]:
    """The draft counts whose predicted speed interval reaches the best prediction's point (one point, one method):
    the ks to measure there, the best first, then by k."""
    predictions = list(predictions)
    if not predictions:
        return []

    def figure(p: SpeedPrediction) -> Interval:
        return p.tok_s_aggregate if aggregate else p.tok_s_per_session

    best = max(predictions, key=lambda p: figure(p).point)
    top = figure(best).point
    near = [p for p in predictions if p is best or _reaches(figure(p), top)]
    return [best.k] + sorted(p.k for p in near if p is not best)


def _reaches(interval: Interval, value: float) -> bool:
    hi = interval.hi if interval.hi == interval.hi else interval.point  # one repeat: the point only
    return hi >= value


def predicted_best_k(predictions: Iterable[SpeedPrediction], *, method: str, profile: Optional[str] = None,
                     aggregate: bool = True) -> dict[int, list[int]]:
    """Batch size (each point's median requests per step, rounded) → the draft counts tied for first there by
    prediction (the contenders), for runner.numerics.draft_schedule.build_schedule (ties go to the smaller k;
    k = 0 where spec off was measured and speculation is predicted to lose). Points of one batch size pool their
    contenders."""
    by_point: dict[tuple, list[SpeedPrediction]] = {}
    for p in predictions:
        if p.method == method and p.profile == profile:
            by_point.setdefault(p.point_key, []).append(p)
    best: dict[int, list[int]] = {}
    for points in by_point.values():
        batch = max(1, round(points[0].batch_size_p50))
        best.setdefault(batch, [])
        best[batch] += [k for k in contenders(points, aggregate=aggregate) if k not in best[batch]]
    return best


@dataclass(frozen=True, kw_only=True)
class SpotCheck:
    """One measurement of a k the prediction pruned: the runner-up where its predicted margin is smallest."""

    point_key: tuple
    method: str
    profile: Optional[str]
    k: int  # the runner-up: the unmeasured k predicted fastest after the best
    best_k: int
    margin: float  # predicted best / runner-up − 1 at that point

    def why(self) -> str:
        return (f"spot check: the runner-up where its predicted margin is smallest ({self.margin:.1%} behind "
                f"k = {self.best_k})")


def _figure(p: SpeedPrediction, aggregate: bool) -> Interval:
    return p.tok_s_aggregate if aggregate else p.tok_s_per_session


def pruned_to_one(predictions: Iterable[SpeedPrediction], *, aggregate: bool = True) -> bool:
    """Whether the prediction leaves nothing to measure at this point (every unmeasured k pruned)."""
    predictions = list(predictions)
    ran = {p.k for p in predictions if p.measured}
    return not [k for k in contenders(predictions, aggregate=aggregate) if k not in ran and k > 0]


def spot_checks(predictions: Iterable[SpeedPrediction], *, aggregate: bool = True) -> list[SpotCheck]:
    """Per method (and profile) whose prediction pruned every unmeasured k at every point: its runner-up at the
    point where the runner-up's predicted margin behind the best is smallest, so that a prediction never stands
    as the only evidence for the answer (its error, measured against it, is reported)."""
    families: dict[tuple, dict[tuple, list[SpeedPrediction]]] = {}
    for p in predictions:
        families.setdefault((p.method, p.profile), {}).setdefault(p.point_key, []).append(p)
    out = []
    for (method, profile), points in sorted(families.items(), key=lambda kv: str(kv[0])):
        if not all(pruned_to_one(preds, aggregate=aggregate) for preds in points.values()):
            continue  # contenders are measured: the prediction is checked by them
        candidates = []
        for point, preds in points.items():
            unmeasured = [p for p in preds if not p.measured and p.k > 0]
            if not unmeasured:
                continue
            best = max(preds, key=lambda p: _figure(p, aggregate).point)
            runner_up = max(unmeasured, key=lambda p: _figure(p, aggregate).point)
            margin = _figure(best, aggregate).point / _figure(runner_up, aggregate).point - 1.0
            candidates.append(SpotCheck(point_key=point, method=method, profile=profile, k=runner_up.k,
                                        best_k=best.k, margin=margin))
        if candidates:
            out.append(min(candidates, key=lambda c: (c.margin, str(c.point_key))))
    return out
