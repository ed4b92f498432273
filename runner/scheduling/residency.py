"""How many of a lane's engines stay loaded at once, from the memory the actor reported (pure)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from runner.scheduling.device import DevicePolicy

ASLEEP_HELD_GIB = 1.8  # what a CUDA engine asleep at level 1 still holds (H200, vLLM 0.26, MiMo-7B-shaped)
CONTEXT_GIB = 0.6      # one more process's CUDA context: the next engine's actor, started ahead
CPU_ENGINE_BASE_GIB = 1.5  # a CPU engine's process, weights of a small model, runtime (beside its KV)
HOST_SHARE_FOR_ASLEEP = 0.8  # of the node's available RAM, for the weights asleep engines keep there
# Start-up failures that resident engines may have caused (they hold device memory): retried with one fewer.
MEMORY_FAILURES = ("not_enough_free_memory_for_budget", "out_of_memory_while_loading", "no_kv_cache_memory")


@dataclass(frozen=True, kw_only=True)
class MemoryReport:
    """What an actor's `prepare` measured on its node (None: unknown)."""

    device_total_gib: Optional[float] = None
    host_available_gib: Optional[float] = None
    context_gib: Optional[float] = None

    @classmethod
    def of(cls, report: Optional[dict]) -> "MemoryReport":
        report = report or {}
        return cls(**{k: report.get(k) for k in ("device_total_gib", "host_available_gib", "context_gib")})


@dataclass(frozen=True, kw_only=True)
class ResidencyPlan:
    max_resident: int
    reason: str


def plan_residency(*, device: str, budgets: list[float], device_total_gib: Optional[float],
                   host_available_gib: Optional[float], asleep_held_gib: float = ASLEEP_HELD_GIB,
                   context_gib: float = CONTEXT_GIB, cpu_engine_gib: float = 2.5) -> ResidencyPlan:
    """How many of one device's engines stay loaded at once (1: load-run-stop).

    CUDA: the awake engine's budget is a share of the WHOLE GPU and vLLM's start-up check counts what other
    processes hold, so the largest budget + every other resident engine asleep + the next actor's context must
    fit the GPU. CPU: every resident engine keeps its KV and weights in RAM.
    """
    n = len(budgets)
    if n <= 1:
        return ResidencyPlan(max_resident=1, reason="one engine on this device")
    if device == "cuda":
        if not device_total_gib:
            return ResidencyPlan(max_resident=1, reason="GPU memory unknown")
        free_for_asleep = device_total_gib * (1.0 - max(budgets)) - context_gib
        asleep = int(max(0.0, free_for_asleep) // asleep_held_gib)
        k = min(n, 1 + asleep)
        return ResidencyPlan(max_resident=k, reason=(
            f"budget {max(budgets)} of {device_total_gib:.1f} GiB leaves {free_for_asleep:.1f} GiB for engines "
            f"asleep ({asleep_held_gib} GiB each): {k} resident"))
    if host_available_gib is None:
        return ResidencyPlan(max_resident=min(n, 2), reason="host memory unknown: 2 resident")
    k = max(1, min(n, int(HOST_SHARE_FOR_ASLEEP * host_available_gib // cpu_engine_gib)))
    return ResidencyPlan(max_resident=k, reason=f"{host_available_gib:.1f} GiB RAM free, {cpu_engine_gib} GiB per "
                                                f"engine: {k} resident")


def lane_residency(*, policy: DevicePolicy, budgets: list[float], any_resident: bool, report: MemoryReport,
                   cpu_kv_gib: float) -> int:
    """A lane's resident engines at most, once its first actor reported its node's memory."""
    if not any_resident:
        return 1
    return plan_residency(device=policy.name, budgets=budgets, device_total_gib=report.device_total_gib,
                          host_available_gib=report.host_available_gib,
                          context_gib=report.context_gib or CONTEXT_GIB,
                          cpu_engine_gib=cpu_kv_gib + CPU_ENGINE_BASE_GIB).max_resident


def host_for_residents(available_gib: Optional[float], *, claimed_gib: float = 0.0) -> float:
    """The host RAM a lane's asleep engines may hold: what the node has free plus what the pooled engines this
    command claimed already hold there (they are its residents now); unknown: no limit."""
    return float("inf") if available_gib is None else available_gib + claimed_gib


def host_allows(*, policy: DevicePolicy, held_gib: float, host_gib: float) -> bool:
    """An asleep engine keeps its weights in host RAM: all of them must fit what the node has free."""
    return not policy.host_limits_asleep or held_gib <= HOST_SHARE_FOR_ASLEEP * host_gib


def parallel_cpu_loads(*, cores: int, cpus_per_engine: float, lanes: int) -> int:
    """CPU engines one lane loads at once. A load's threads spin on every core it is bound to (three side by side
    on 2 cores took 4x one alone: docs/benchmarks.md), so a lane loads side by side only with cores to spare."""
    per_lane = cores / max(1, lanes)
    return max(1, int(per_lane // (2 * max(1.0, cpus_per_engine))))
