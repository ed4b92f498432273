"""What keeps one trial's figures its own: a quiet Python heap, counters bracketed by the measure window,
and nothing left of the trial before (in-flight requests, cached blocks)."""
from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass
from typing import Callable, Optional

from runner.measurement import counters

# Counters reach the registry from vLLM's output handler a moment after the last token reaches the client; so
# that a phase's counters do not bleed into the next, a window's edge waits until vLLM has counted every request
# the host saw finish, at most this long (an engine that keeps no such counter waits all of it).
COUNTER_SETTLE_S = 0.25
COUNTER_POLL_S = 0.005
RESET_ATTEMPTS = 20
RESET_RETRY_S = 0.1
DRAIN_TIMEOUT_S = 10.0


def quiet_heap() -> None:
    """What `vllm serve` does once its engine is up: collect, then freeze what survived, so that later
    collections skip torch's, vLLM's and Ray's objects (a full pass over them took 0.3–0.6 s here)."""
    gc.collect()
    gc.freeze()


@dataclass(kw_only=True)
class GcPauses:
    """Python GC pauses in this process while `recording` (gc.callbacks, any generation)."""

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    recording: bool = False
    _started: Optional[float] = None

    def install(self) -> "GcPauses":
        gc.callbacks.append(self._on_gc)
        return self

    def start(self) -> None:
        self.count, self.total_s, self.max_s, self.recording = 0, 0.0, 0.0, True

    def stop(self) -> dict:
        self.recording = False
        return {"gc_pauses": self.count, "gc_pause_total_ms": self.total_s * 1000.0,
                "gc_pause_max_ms": self.max_s * 1000.0}

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif phase == "stop" and self._started is not None:
            pause = time.perf_counter() - self._started
            self._started = None
            if self.recording:
                self.count += 1
                self.total_s += pause
                self.max_s = max(self.max_s, pause)


@dataclass(kw_only=True)
class CounterWindow:
    """The measure window of a trial: engine counter snapshots when the measured requests begin and end.

    A workload that never calls begin()/end() is measured whole (`open_whole` / `close_whole`)."""

    # How many requests the engine host has seen finish (EngineHost.finished_requests).
    finished: Callable[[], int]
    # The engine's energy meter (runner.execution.energy), bracketing the same window; None: not metered.
    meter: Optional[object] = None
    before: Optional[counters.CounterSnapshot] = None
    after: Optional[counters.CounterSnapshot] = None

    async def begin(self) -> None:
        self.before = await self._settled()
        if self.meter is not None:  # after the settle: the window's requests start now
            self.meter.begin()

    async def end(self) -> None:
        if self.meter is not None:  # before the settle: the last measured request has ended
            self.meter.end()
        self.after = await self._settled()

    async def _settled(self) -> counters.CounterSnapshot:
        deadline = time.monotonic() + COUNTER_SETTLE_S
        while True:
            snap = counters.snapshot()
            counted = counters.finished_requests(snap)
            if (counted is not None and counted >= self.finished()) or time.monotonic() >= deadline:
                return snap
            await asyncio.sleep(COUNTER_POLL_S)

    async def open_whole(self) -> None:
        self.before = counters.snapshot()
        if self.meter is not None:
            self.meter.begin()

    async def close_whole(self) -> None:
        if self.after is None:
            await self.end()

    def deltas(self) -> dict:
        if self.before is None or self.after is None:
            return {}
        return counters.delta_metrics(self.before, self.after)


class ResetFailed(RuntimeError):
    """The prefix cache could not be emptied: the next trial would start with another trial's blocks."""


async def reset_prefix_cache(host) -> int:
    """Resets the prefix cache, retrying while vLLM says no (requests still hold blocks); returns attempts.
    A vLLM that answers None (older builds) is taken at its word."""
    for attempt in range(1, RESET_ATTEMPTS + 1):
        if await host.reset_prefix_cache() is not False:
            return attempt
        await asyncio.sleep(RESET_RETRY_S)
    raise ResetFailed(f"reset_prefix_cache() refused {RESET_ATTEMPTS} times "
                      f"({len(getattr(host, 'in_flight', ()))} requests in flight)")


async def drain(host) -> None:
    """Aborts what a failed workload left running and waits (bounded) until its requests are gone."""
    await host.abort_in_flight()
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while getattr(host, "in_flight", None) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
