"""The order of engine starts on a GPU that several engines share (cluster.engines_per_gpu > 1). Pure.

vLLM sizes an engine's KV cache from a memory profile it takes at start: the free memory before and after a
forward pass. Another engine starting (or shutting down) on the same GPU meanwhile moves that free memory, and the
start fails ("Error in memory profiling ... other processes sharing the same container release GPU memory while
vLLM is profiling") or takes a budget the device does not have. So the engines that share a GPU start one after
another, then run side by side; a start that fails for memory is retried once, behind its neighbour's start, and
the first failure is kept on the engine's row. A neighbour's release is the same disturbance the other way: an engine
that goes while another starts on its GPU frees memory mid-profile, so its release waits until that start has
ended, and a start waits for releases in flight (the scheduler frees the device before it loads).

Sharing is no speed-up: on an H200 the 16-trial draft-count grid took 270 s with two engines per GPU against 156 s
with one, and a start beside a resident engine took 85 s against 17-22 s (docs/benchmarks.md).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Hashable, Optional

# Start failures that another engine on the same GPU can cause (runner/execution/failures.py's kinds).
MEMORY_START_FAILURES = ("memory_changed_while_profiling", "not_enough_free_memory_for_budget",
                         "out_of_memory_while_loading", "no_kv_cache_memory")
START_RETRIES = 1  # a memory failure on a shared GPU is retried this many times, then the engine is failed


def device_of(*, lane: int, engines_per_gpu: int, reported: Optional[Hashable] = None) -> Hashable:
    """The GPU a lane's engines run on: the one its first actor reported (node and visible device), else the one
    Ray's packing gives it (n lanes of 1/n GPU fill one GPU before the next)."""
    if reported is not None:
        return reported
    return lane // max(1, engines_per_gpu)


def retries_start(kind: Optional[str], *, failed_starts: int, engines_per_gpu: int) -> bool:
    """Whether a failed start goes again: a memory failure on a shared GPU, `failed_starts` (this one included)
    within the retries."""
    return engines_per_gpu > 1 and kind in MEMORY_START_FAILURES and failed_starts <= START_RETRIES


def first_failure(kind: Optional[str], reason: Optional[str]) -> str:
    """The first failed start of an engine whose start was retried, as its row keeps it."""
    return f"{kind}: {reason or ''}".strip()[:600]


@dataclass(kw_only=True)
class StartGate:
    """At most one engine start in flight per GPU; lanes that asked meanwhile start in the order they asked.
    With one engine per GPU every start is admitted at once (no waiting)."""

    engines_per_gpu: int = 1
    starting: dict = field(default_factory=dict)  # device -> the lane whose start is in flight there
    waiting: dict = field(default_factory=dict)  # device -> deque of lanes, first asked first
    devices: dict = field(default_factory=dict)  # lane -> its device
    held: dict = field(default_factory=dict)  # device -> releases held back while a neighbour's start runs there

    def place(self, lane: int, *, reported: Optional[Hashable] = None) -> None:
        self.devices[lane] = device_of(lane=lane, engines_per_gpu=self.engines_per_gpu, reported=reported)

    def device(self, lane: int) -> Hashable:
        if lane not in self.devices:
            self.place(lane)
        return self.devices[lane]

    def admit(self, lane: int) -> bool:
        """True: the lane starts its engine now. False: it waits (queued) until the start in flight on its GPU ends."""
        if self.engines_per_gpu <= 1:
            return True
        device = self.device(lane)
        holder = self.starting.get(device)
        if holder is None or holder == lane:
            self.starting[device] = lane
            return True
        queue = self.waiting.setdefault(device, collections.deque())
        if lane not in queue:
            queue.append(lane)
        return False

    def is_waiting(self, lane: int) -> bool:
        return any(lane in queue for queue in self.waiting.values())

    def release(self, lane: int) -> Optional[int]:
        """The lane's start ended (in, failed, timed out, actor lost): returns the lane that starts next on its GPU
        (now holding it), or None."""
        if self.engines_per_gpu <= 1:
            return None
        device = self.device(lane)
        if self.starting.get(device) != lane:
            return None
        del self.starting[device]
        queue = self.waiting.get(device)
        if not queue:
            return None
        nxt = queue.popleft()
        self.starting[device] = nxt
        return nxt

    def hold_release(self, lane: int, release) -> bool:
        """True: `release` (an engine of this lane going) waits, for a neighbour's start is in flight on its GPU
        (`releases_due` gives it back once that start ends); False: it goes now."""
        if self.engines_per_gpu <= 1:
            return False
        device = self.device(lane)
        holder = self.starting.get(device)
        if holder is None or holder == lane:
            return False
        self.held.setdefault(device, []).append(release)
        return True

    def releases_due(self, lane: int) -> list:
        """The releases held on this lane's GPU, to go now that its start has ended (before the next start)."""
        if self.engines_per_gpu <= 1:
            return []
        return self.held.pop(self.device(lane), [])

    def withdraw(self, lane: int) -> None:
        """The lane no longer starts (the command stops)."""
        for queue in self.waiting.values():
            if lane in queue:
                queue.remove(lane)


def start_order_line(*, engines_per_gpu: int) -> Optional[str]:
    """The dry run's line on how engine starts are ordered; None where each GPU has one engine."""
    if engines_per_gpu <= 1:
        return None
    n = engines_per_gpu
    return (f"engine starts: one at a time on each GPU (the {n} lanes sharing a GPU take turns; vLLM's start-up "
            f"memory profile needs a quiet device), then their engines run side by side; a start that fails for "
            f"memory ({', '.join(MEMORY_START_FAILURES)}) is retried once after its neighbour's start, and the "
            f"first failure is kept on the engine row (start_retried_after); an engine going waits for a "
            f"neighbour's start, and a start for engines going. Sharing is no speed-up: on an H200 the 16-trial "
            f"draft-count grid took 270 s with 2 engines per GPU against 156 s with 1, and a start beside a resident "
            f"engine 85 s against 17-22 s")
