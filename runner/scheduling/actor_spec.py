"""What one engine actor is given (pure): its environment and its cores (its engine's arguments for a start:
runner.plan.vllm_args.VllmArgs.for_start)."""
from __future__ import annotations

import os
from typing import Optional

from runner.execution.failures import FAULTS_ENV
from runner.vllm.ngram_jit import NGRAM_JIT_ENV
from runner.vllm.sleep_pinning import PIN_AHEAD_ENV
from runner.plan.grid import EngineConfig

# Engine arguments that fix the KV size per engine; they win over the process-wide VLLM_CPU_KVCACHE_SPACE.
PER_ENGINE_KV_ARGS = ("kv_cache_memory_bytes",)
# An engine's first sleep pins host memory for its weights, later sleeps reuse it: torch pins by faulting the
# pages in on several threads, then registering them, instead of one cudaHostAlloc (docs/benchmarks.md).
SLEEP_PINNED_ALLOC = "pinned_use_cuda_host_register:True,pinned_num_register_threads:8"


def cpu_binding(*, slot: int, cores_per_engine: float, total_cores: int) -> str:
    """vLLM's VLLM_CPU_OMP_THREADS_BIND for one CPU engine slot: its own run of cores, e.g. "2-3"."""
    width = max(1, int(cores_per_engine))
    first = (slot * width) % max(1, total_cores)
    last = min(first + width, total_cores) - 1
    return str(first) if first == last else f"{first}-{last}"


def actor_env(*, base: dict, engine: EngineConfig, environ: Optional[dict] = None, sleeps: bool = False,
              pin_ahead: bool = False) -> dict:
    """The actor's environment (`sleeps`: its engine may sleep between turns; `pin_ahead`: its first sleep's host
    buffers are pinned during its init, runner/vllm/sleep_pinning.py). None removes a variable the node may
    have set."""
    environ = os.environ if environ is None else environ
    env = dict(base)
    if sleeps and "PYTORCH_CUDA_ALLOC_CONF" not in environ:
        env.setdefault("PYTORCH_CUDA_ALLOC_CONF", SLEEP_PINNED_ALLOC)
    if sleeps and pin_ahead:
        env[PIN_AHEAD_ENV] = "1"
    if engine.settings.spec_method == "ngram":  # its proposer's kernel compiles during the init (ngram_jit.py)
        env[NGRAM_JIT_ENV] = "1"
    if engine.settings.tensor_parallel_size > 1:
        env.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    if engine.vllm_args is not None and any(name in engine.vllm_args.as_dict() for name in PER_ENGINE_KV_ARGS):
        env["VLLM_CPU_KVCACHE_SPACE"] = None  # vLLM's CPU platform would override the engine's own size
    if FAULTS_ENV in environ:  # test hook, travels to remote nodes too
        env[FAULTS_ENV] = environ[FAULTS_ENV]
    return env
