"""When each request of an open-loop workload leaves: seeded arrival schedules and the client's lag behind them.
Pure.

`closed`: each session sends its next request when its last one finished (no schedule). `poisson`: gaps drawn
from the exponential at `request_rate`; `gamma`: gaps from a gamma distribution of shape `burstiness` and mean
1 / `request_rate` (burstiness 1 is Poisson, below 1 burstier, above 1 more regular), as `vllm bench serve
--burstiness` draws them. The first request leaves at offset 0; `request_rate=inf` sends everything at once.
"""
from __future__ import annotations

import enum
import math
import random
from typing import Optional, Sequence

# A trial whose sends ran this far (p99) behind their schedule measured its client, not the engine: flagged.
CLIENT_BEHIND_P99_S = 0.010


class Arrival(enum.StrEnum):
    """A workload's `arrival` parameter."""

    CLOSED = "closed"
    POISSON = "poisson"
    GAMMA = "gamma"


def parse_rate(value) -> float:
    """A request rate as given: a number, or `inf` (also the strings "inf" / "infinity")."""
    if isinstance(value, bool):
        raise ValueError(f"request_rate={value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"request_rate={value!r} is not a number or inf") from None


def send_offsets(*, count: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> list[float]:
    """Seconds from the first send to each of `count` sends: cumulative gamma(shape=burstiness,
    mean=1/rate) gaps from a generator seeded by `seed` (the same schedule in every process)."""
    if count <= 0:
        return []
    if math.isinf(rate):
        return [0.0] * count
    if not rate > 0 or not burstiness > 0:
        raise ValueError(f"rate={rate} and burstiness={burstiness} must be > 0")
    rng = random.Random(seed)
    scale = 1.0 / (rate * burstiness)  # gamma's mean is shape × scale = 1 / rate
    offsets, at = [0.0], 0.0
    for _ in range(count - 1):
        at += rng.gammavariate(burstiness, scale)
        offsets.append(at)
    return offsets


def gaps(times: Sequence[float]) -> list[float]:
    """Inter-arrival gaps of sorted send times."""
    ordered = sorted(times)
    return [b - a for a, b in zip(ordered, ordered[1:])]


def coefficient_of_variation(values: Sequence[float]) -> Optional[float]:
    """Standard deviation / mean (population), None for fewer than two values or a zero mean."""
    if len(values) < 2:
        return None
    m = sum(values) / len(values)
    if m == 0:
        return None
    return math.sqrt(sum((v - m) ** 2 for v in values) / len(values)) / m


def offered_rate(offsets: Sequence[float]) -> Optional[float]:
    """Requests per second a schedule offers: sends after the first over its span (inf: all at once)."""
    if len(offsets) < 2:
        return None
    span = max(offsets) - min(offsets)
    return (len(offsets) - 1) / span if span > 0 else math.inf


def lag_columns(*, lags: Sequence[Optional[float]], slot_waits: Sequence[Optional[float]]) -> dict:
    """A trial's send-lag columns: how far its requests left behind their schedule (waits for a
    `max_concurrency` slot excluded: the cap is the workload's own, not the client falling behind)."""
    own = [lag - (wait or 0.0) for lag, wait in zip(lags, slot_waits) if lag is not None]
    if not own:
        return {}
    ordered = sorted(own)

    def pct(q: float) -> float:
        pos = (len(ordered) - 1) * q
        lo, hi = math.floor(pos), math.ceil(pos)
        return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)

    p99 = pct(0.99)
    return {"send_lag_p50_s": pct(0.5), "send_lag_p99_s": p99, "send_lag_max_s": ordered[-1],
            "client_behind": bool(p99 > CLIENT_BEHIND_P99_S)}
