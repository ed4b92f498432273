"""The driver's settings, built once from the typed RunConfig and what the Ray cluster offers (pure)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Optional

from runner.config.execution import EngineStart, Residency, Warmup
from runner.config.sections import EngineSection, RunConfig
from runner.scheduling.device import DevicePolicy, policy_for
from runner.slo import Slo

# Passed on to every actor when the driver's environment has them (node-wide switches of vLLM, Ray, the runner).
CARRIED_ENV = ("VLLM_USE_FLASHINFER_SAMPLER", "RUNNER_CACHE_DIR", "PYTHONPATH", "VLLM_CPU_OMP_THREADS_BIND",
               "NCCL_NVLS_ENABLE", "VLLM_LOGGING_LEVEL", "OMP_NUM_THREADS")


@dataclass(frozen=True, kw_only=True)
class Capacity:
    device_units: int  # GPUs on cuda (× engines_per_gpu: a unit is that share of one), engine slots on CPU
    max_parallel_engines: int
    engines_per_gpu: int = 1  # cluster.engines_per_gpu on cuda; 1 on CPU


@dataclass(frozen=True, kw_only=True)
class ExecutionSettings:
    device: str  # "cpu" | "cuda"
    max_parallel_engines: int  # engines side by side at most, whatever each occupies
    device_units: int  # GPUs on cuda, engine slots on CPU
    cpus_per_engine: float
    env: dict
    trial_timeout_s: float
    start_timeout_s: float
    max_trial_retries: int
    slo: Slo  # the latency targets goodput counts requests against
    warmup: Warmup
    warmup_output_cap: Optional[int]
    first_trial_twice: bool  # each load's first trial runs twice; the second is kept
    resident: Residency
    deadline_s: Optional[float]  # seconds from the scheduler's start
    order_seed: int
    shutdown_timeout_s: float  # a graceful engine shutdown, then ray.kill
    race: bool
    race_tie_band: float
    converge: bool  # sweep.converge: a settled point stops taking repeats
    cpu_kv_gib: float  # VLLM_CPU_KVCACHE_SPACE, for the CPU residency plan
    engine_start: EngineStart  # how vLLM's engine-core process starts in an actor
    sleep_pin_ahead: bool  # a sleeping engine's first sleep pinned during its init (execution.sleep_pin_ahead)
    keep_engines: bool  # engines outlive the command, in the pool `pool` (runner.pool)
    pool: str
    pool_ttl_s: float  # a pooled engine idle this long ends itself
    engines_per_gpu: int  # engines side by side on one GPU, each in a lane of its own (cluster.engines_per_gpu)

    @property
    def policy(self) -> DevicePolicy:
        return policy_for(self.device)

    @classmethod
    def of(cls, config: RunConfig, *, capacity: Capacity) -> "ExecutionSettings":
        execution, sweep = config.execution, config.sweep
        # Engines sharing a GPU do not stay resident: another engine asleep there would need a share of its own.
        resident = Residency.OFF if capacity.engines_per_gpu > 1 else execution.resident
        return cls(device=config.engine.device, max_parallel_engines=capacity.max_parallel_engines,
                   device_units=capacity.device_units, cpus_per_engine=float(config.cluster.cpus_per_engine),
                   env=execution_env(config.engine), trial_timeout_s=float(execution.trial_timeout_s),
                   start_timeout_s=float(execution.start_timeout_s), max_trial_retries=execution.max_trial_retries,
                   slo=config.slo, warmup=policy_for(config.engine.device).warmup(execution.warmup),
                   warmup_output_cap=execution.warmup_output_cap,
                   first_trial_twice=bool(execution.first_trial_twice), resident=resident,
                   deadline_s=execution.deadline_s, order_seed=execution.order_seed,
                   shutdown_timeout_s=float(execution.shutdown_timeout_s), race=sweep.race,
                   race_tie_band=float(sweep.race_tie_band), converge=bool(sweep.converge),
                   cpu_kv_gib=float(config.engine.cpu_kvcache_space_gib or 1), engine_start=execution.engine_start,
                   sleep_pin_ahead=bool(execution.sleep_pin_ahead), keep_engines=bool(execution.keep_engines),
                   pool=execution.pool,
                   pool_ttl_s=float(execution.pool_ttl_s), engines_per_gpu=capacity.engines_per_gpu)


def execution_env(engine: EngineSection, environ: Optional[dict] = None) -> dict[str, str]:
    """Every actor's environment."""
    environ = os.environ if environ is None else environ
    # NVLink multicast stays off in every process (it can take a shared host's GPUs out of service).
    env = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1",
           "TOKENIZERS_PARALLELISM": "false"}
    if engine.device == "cpu" and engine.cpu_kvcache_space_gib:
        env["VLLM_CPU_KVCACHE_SPACE"] = str(engine.cpu_kvcache_space_gib)
    for name in CARRIED_ENV:
        if name in environ:
            env[name] = environ[name]
    return env
