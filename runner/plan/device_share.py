"""Engines sharing one GPU (`cluster.engines_per_gpu`): what must hold before any engine starts (pure).

Two engines side by side on one GPU each take a lane of their own (Ray: a fraction of the GPU), so both memory
budgets (`gpu_memory_utilization`, a share of the WHOLE GPU in vLLM) must fit the GPU together with room for two
CUDA contexts; a TP group cannot be split, and asleep engines (residency, the pool) would need a third share.
"""
from __future__ import annotations

import math

# Of one GPU, what the budgets of the engines sharing it may take together: the rest holds each process's CUDA
# context and non-torch memory, which vLLM's budget does not count.
SHARED_BUDGET = 0.9


def budget_each(engines_per_gpu: int) -> float:
    """The largest budget each of `engines_per_gpu` engines may have (two decimals, rounded down)."""
    return math.floor(100 * SHARED_BUDGET / max(1, engines_per_gpu)) / 100


def check_device_share(*, engines_per_gpu: int, device: str, budgets: list[float], tensor_parallel: int,
                       keep_engines: bool, adaptive: bool = False) -> list[str]:
    """Problems of cluster.engines_per_gpu > 1, each naming its fix."""
    if engines_per_gpu <= 1:
        return []
    n = engines_per_gpu
    if device != "cuda":
        return [f"cluster.engines_per_gpu={n} shares a GPU; on CPU engines run side by side on their own cores "
                f"(fix: cluster.engines_per_gpu=1 cluster.cpu_engine_slots={n})"]
    errors = []
    over = sorted({b for b in budgets if b * n > SHARED_BUDGET + 1e-9})
    if over:
        errors.append(f"gpu_memory_utilization={'/'.join(f'{b:g}' for b in over)} × {n} engines per GPU = "
                      f"{max(over) * n:g} of the GPU, above {SHARED_BUDGET:g} (two CUDA contexts need the rest) "
                      f"(fix: sweep.grid.gpu_memory_utilization=[{budget_each(n):g}], or gpu_memory_utilization: "
                      f"{budget_each(n):g} in each arm that sets its own)")
    if tensor_parallel > 1:
        errors.append(f"engine.tensor_parallel_size={tensor_parallel} cannot share a GPU with another engine "
                      f"(fix: cluster.engines_per_gpu=1, or engine.tensor_parallel_size=1)")
    if keep_engines:
        errors.append(f"execution.keep_engines=true keeps engines asleep on their GPU; with "
                      f"cluster.engines_per_gpu={n} each engine has only its share (fix: execution.keep_engines=false)")
    if adaptive:
        errors.append(f"an adaptive study carries its engines from stage to stage on whole GPUs; with "
                      f"cluster.engines_per_gpu={n} they would hold only their share (fix: cluster.engines_per_gpu=1)")
    return errors
