"""Open-loop arrivals for any workload: its params (`arrival`, `request_rate`, `burstiness`, `max_concurrency`)
and the driver that starts each request (or session) on its scheduled time, whether or not earlier ones finished.

A request's timeline starts at its scheduled send, so its TTFT and E2E count from there: a client that fell
behind shows as latency and as `send_lag_s`, never as a quietly slower offered load. With `max_concurrency`
a request waits for one of that many slots (`slot_wait_s`, part of its lag, not counted as the client's).
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, ClassVar, Optional, Sequence

from runner.measurement.arrivals import Arrival, parse_rate, send_offsets
from runner.numerics.rate_probe import ProbeVerdict, StopRule, verdict_columns
from runner.measurement.workloads.base import Engine, RequestResult, WorkloadParams

# Arrivals of an open-loop shape's unmeasured warm-up (all at once): enough to batch, short enough to be cheap.
WARMUP_ARRIVALS = 8
# A schedule cut by `max_duration_s` keeps at least this many arrivals: its p99 then lies between its two slowest
# requests (fewer, and it is the slowest alone); the repeats of a point add theirs.
CAPPED_MIN_ARRIVALS = 50


@dataclass(kw_only=True)
class OpenLoopParams(WorkloadParams):
    """The arrival parameters a workload that can run open-loop takes (list values are axes, as elsewhere)."""

    arrival: str = "closed"  # closed | poisson | gamma
    request_rate: Any = None  # req/s (a number or inf); needed unless closed
    burstiness: float = 1.0  # gamma's shape: 1 = Poisson, < 1 burstier
    max_concurrency: Optional[int] = None  # open loop: at most this many requests in flight (null: no cap)
    # Open loop at a finite rate: arrivals for at most this many seconds, i.e. min(N, max(CAPPED_MIN_ARRIVALS,
    # ceil(rate × max_duration_s))) of the N asked for (null: all N; a low rate's N would take minutes).
    max_duration_s: Optional[float] = None
    # Open loop at a finite rate, under a TTFT target (slo.ttft): stop sending once the probe is decided
    # (runner.numerics.rate_probe); its figures then cover the requests sent up to the stop. The rate search
    # sets it on its probes below saturation (at request_rate=inf it stops nothing: every request leaves at once).
    stop_when_decided: bool = False

    @property
    def open_loop(self) -> bool:
        return self.arrival != Arrival.CLOSED

    def rate(self) -> float:
        return parse_rate(self.request_rate)

    def arrivals(self) -> int:
        """How many requests (or sessions) arrive on the clock in open loop."""
        asked = int(getattr(self, self.arrivals_field))
        if self.max_duration_s is None or not self.open_loop or math.isinf(self.rate()):
            return asked
        return min(asked, max(CAPPED_MIN_ARRIVALS, math.ceil(self.rate() * float(self.max_duration_s))))

    def validate(self) -> list[str]:
        errors = super().validate()
        valid = (Arrival.CLOSED, Arrival.POISSON, Arrival.GAMMA)
        if self.arrival not in valid:
            return errors + [f"arrival={self.arrival!r} is unknown; valid: {', '.join(valid)}"]
        if not self.open_loop:
            for name, unset in (("request_rate", None), ("max_concurrency", None), ("burstiness", 1.0),
                                ("max_duration_s", None), ("stop_when_decided", False)):
                if getattr(self, name) != unset:
                    errors.append(f"{name}={getattr(self, name)!r} needs an open-loop arrival "
                                  f"(arrival=poisson or gamma); closed-loop sessions send when their last "
                                  f"request finished")
            return errors
        if self.request_rate is None:
            return errors + [f"request_rate=null: arrival={self.arrival} needs a rate in req/s (a number > 0 or inf)"]
        try:
            rate = self.rate()
        except ValueError as exc:
            return errors + [str(exc)]
        if not rate > 0:
            errors.append(f"request_rate={self.request_rate!r} must be > 0 req/s (or inf: all at once)")
        if not isinstance(self.stop_when_decided, bool):  # at inf it stops nothing: every request leaves at once
            errors.append(f"stop_when_decided={self.stop_when_decided!r} must be true or false")
        cap = self.max_duration_s
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, (int, float)) or not cap > 0):
            errors.append(f"max_duration_s={cap!r} must be a number of seconds > 0 (null: no cap)")
        if isinstance(self.burstiness, bool) or not isinstance(self.burstiness, (int, float)) \
                or not self.burstiness > 0 or math.isinf(self.burstiness):
            errors.append(f"burstiness={self.burstiness!r} must be a number > 0 (1 = Poisson)")
        elif self.arrival == Arrival.POISSON and self.burstiness != 1:
            errors.append(f"burstiness={self.burstiness!r} is gamma's shape; Poisson is burstiness 1 "
                          f"(use arrival=gamma)")
        return errors

    def schedule(self, *, seed: int) -> list[float]:
        """Seconds from the first send to each arrival's."""
        return send_offsets(count=self.arrivals(), rate=self.rate(), burstiness=float(self.burstiness), seed=seed)

    def warmup_variant(self) -> "OpenLoopParams":
        """An open-loop shape warms up with a few arrivals at once (a schedule of its own would take its
        whole length unmeasured)."""
        if not self.open_loop:
            return self
        return dataclasses.replace(self, request_rate=math.inf, **{self.arrivals_field: min(
            self.arrivals(), WARMUP_ARRIVALS)})

    not_counts = ("request_rate", "burstiness", "max_duration_s", "stop_when_decided")
    # The field that says how many arrivals the schedule has (num_requests, num_sessions).
    arrivals_field: ClassVar[str] = "num_requests"

    def trial_concurrency(self, grid_level: int) -> int:
        return (self.max_concurrency or 0) if self.open_loop else grid_level

    def arrival_columns(self) -> dict:
        if not self.open_loop:
            return super().arrival_columns()
        return {"arrival": str(self.arrival), "offered_rate_req_s": self.rate()}


class ProbeMonitor:
    """Watches an open-loop probe's requests and, with `stop`, ends its sends once the stop rule decides it
    (runner.numerics.rate_probe); without, it only judges the probe at its end (saturation)."""

    TICK_S = 0.05  # how often the rule looks (its arithmetic is over at most num_requests values)

    def __init__(self, rule: StopRule, *, stop: bool):
        self.rule = rule
        self.stop = stop
        self.scheduled: dict[int, float] = {}  # request → its scheduled send (perf_counter)
        self.ttft: dict[int, float] = {}  # request → its TTFT, once its first token came
        self.ended: set[int] = set()  # requests that finished (with or without a token)
        self.stopped = asyncio.Event()
        self.at_stop: Optional[ProbeVerdict] = None  # the verdict that stopped the sends

    def sending(self, scheduled_at: float) -> int:
        key = len(self.scheduled)
        self.scheduled[key] = scheduled_at
        return key

    def first_token(self, key: int, at: float) -> None:
        self.ttft.setdefault(key, at - self.scheduled[key])

    def judge(self, now: float) -> ProbeVerdict:
        waiting = [now - at for key, at in self.scheduled.items() if key not in self.ttft and key not in self.ended]
        return self.rule.judge(list(self.ttft.values()), waiting)

    async def watch(self) -> None:
        """Runs beside the schedule until the rule decides (then no further request is sent)."""
        while not self.stopped.is_set():
            await asyncio.sleep(self.TICK_S)
            verdict = self.judge(time.perf_counter())
            if verdict.decided:
                self.at_stop = verdict
                self.stopped.set()

    def columns(self) -> dict:
        """The trial row's probe columns: the verdict over every request it sent (all answered by now); none where
        the workload's driver did not report its requests here."""
        if not self.scheduled:
            return {}
        final = self.judge(time.perf_counter())
        stopped = self.at_stop is not None and len(self.scheduled) < self.rule.planned
        if stopped and final.decision != self.at_stop.decision:  # a request sent before the stop turned it
            final = ProbeVerdict(decision=final.decision, lo_s=final.lo_s, hi_s=final.hi_s, requests=final.requests,
                                 reason=f"{self.at_stop.reason} at the stop; not after the sent requests finished")
        elif stopped:
            final = ProbeVerdict(decision=final.decision, lo_s=final.lo_s, hi_s=final.hi_s, requests=final.requests,
                                 reason=self.at_stop.reason)
        return verdict_columns(final, planned=self.rule.planned, stopped=stopped)


def probe_monitor(params: WorkloadParams, *, slo) -> Optional[ProbeMonitor]:
    """The monitor of an open-loop trial judged against a TTFT target (None: closed loop, or no TTFT target);
    it stops the sends only where the params ask (`stop_when_decided`)."""
    ttft = [t for t in getattr(slo, "targets", ()) if str(t.metric) == "ttft"]
    if not isinstance(params, OpenLoopParams) or not params.open_loop or not ttft:
        return None
    target = min(ttft, key=lambda t: t.ms)
    rule = StopRule(target_s=target.ms / 1000.0, percentile=float(target.percentile), planned=params.arrivals(),
                    min_requests=min(CAPPED_MIN_ARRIVALS, params.arrivals()),
                    can_meet=len(slo.targets) == len(ttft))
    return ProbeMonitor(rule, stop=bool(params.stop_when_decided) and not math.isinf(params.rate()))


class Sender:
    """Sends one arrival's requests: the first on its scheduled time (lag recorded), later ones (a session's
    next turns) when called; each waits for a slot under a `max_concurrency` cap."""

    def __init__(self, *, engine: Engine, scheduled_at: float, slots: Optional[asyncio.Semaphore],
                 probe: Optional[ProbeMonitor] = None):
        self.engine = engine
        self._scheduled_at: Optional[float] = scheduled_at
        self._slots = slots
        self._probe = probe

    async def stream(self, **request) -> RequestResult:
        if self._probe is None:
            return await self._stream(**request)
        key = self._probe.sending(self._scheduled_at if self._scheduled_at is not None else time.perf_counter())
        try:
            return await self._stream(**request, on_first_token=lambda at: self._probe.first_token(key, at))
        finally:
            self._probe.ended.add(key)

    async def _stream(self, **request) -> RequestResult:
        scheduled, self._scheduled_at = self._scheduled_at, None
        if self._slots is None:
            return await self.engine.stream(**request, scheduled_at=scheduled)
        asked = time.perf_counter()
        async with self._slots:
            wait = time.perf_counter() - (scheduled if scheduled is not None else asked)
            result = await self.engine.stream(**request, scheduled_at=scheduled if scheduled is not None else asked)
        result.slot_wait_s = max(0.0, wait)
        return result


async def on_schedule(*, engine: Engine, offsets: Sequence[float], max_concurrency: Optional[int],
                      arrival: Callable[[int, Sender], Awaitable[list[RequestResult]]],
                      probe: Optional[ProbeMonitor] = None) -> list[RequestResult]:
    """Runs `arrival(i, sender)` for each offset, starting it `offsets[i]` seconds after the call; returns every
    result in arrival order. With a stopping `probe`, arrivals after its decision are not sent."""
    slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
    stopped = probe.stopped if probe is not None and probe.stop else asyncio.Event()
    start = time.perf_counter()

    async def one(i: int) -> list[RequestResult]:
        at = start + offsets[i]
        # A loop whose clock is coarser than perf_counter (uvloop: milliseconds) may wake a little early.
        while (delay := at - time.perf_counter()) > 0 and not stopped.is_set():
            try:
                await asyncio.wait_for(stopped.wait(), timeout=delay)
            except asyncio.TimeoutError:
                pass
        if stopped.is_set():
            return []
        return await arrival(i, Sender(engine=engine, scheduled_at=at, slots=slots, probe=probe))

    watcher = asyncio.create_task(probe.watch()) if probe is not None and probe.stop else None
    try:
        per_arrival = await asyncio.gather(*(one(i) for i in range(len(offsets))))
    finally:
        if watcher is not None:
            watcher.cancel()
    return [r for rs in per_arrival for r in rs]
