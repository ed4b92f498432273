"""Each piece of the seam, the vLLM names it relies on, and the vLLM versions it was checked on.

A piece either reads vLLM (an import of its internals) or changes it (a patch: a replaced method or function of
vLLM or torch). Every piece has a `check()` that looks up its names in the installed vLLM without changing
anything, and says whether the piece is active here and, if not, why (tests/unit/vllm/test_vllm_contract.py runs them
all). A patch also says so in the log when it applies and when it does not (`runner.vllm.notice`).

`checked_on`: the vLLM versions a piece ran on. 0.26.0 is the CUDA build of the GPU studies (docs/benchmarks.md,
docs/results/: their engine logs carry the patches' lines, and the H100 folder holds every `check()`'s verdict
there, vllm-contract-0.26.0.txt); 0.32.0 is the CPU build of this checkout, where the contract test
(tests/unit/vllm/test_vllm_contract.py) runs every `check()`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from enum import Enum
from typing import Callable

GPU_STUDIES = "0.26.0"  # the GPU runs (docs/benchmarks.md, docs/results/)
CPU_BUILD = "0.32.0"  # this checkout's CPU stack (requirements/cpu-lock.txt)


class Kind(str, Enum):
    READ = "read"  # imports vLLM's internals and reads them
    PATCH = "patch"  # replaces a method or function of vLLM or torch, in one process


@dataclass(frozen=True, kw_only=True)
class Check:
    """A piece's verdict on the installed vLLM: active, or inactive and why."""

    active: bool
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class Piece:
    name: str
    module: str  # runner.vllm.<module>, whose `check()` gives the verdict
    kind: Kind
    relies_on: str  # the vLLM names it uses
    checked_on: tuple[str, ...] = (GPU_STUDIES, CPU_BUILD)
    cuda_only: bool = False  # inactive off CUDA by design (its check says so)

    def check(self) -> Check:
        checker: Callable[[], Check] = getattr(importlib.import_module(f"runner.vllm.{self.module}"), "check")
        try:
            return checker()
        except Exception as exc:  # a name the piece relies on is gone: that is the verdict
            return Check(active=False, reason=f"{type(exc).__name__}: {exc}")


PIECES: tuple[Piece, ...] = (
    Piece(name="engine", module="engine", kind=Kind.READ,
          relies_on="vllm.LLM, vllm.SamplingParams, vllm.sampling_params.RequestOutputKind, "
                    "vllm.engine.arg_utils.AsyncEngineArgs, vllm.v1.engine.async_llm.AsyncLLM, "
                    "LLM.llm_engine.{vllm_config,engine_core,logger_manager}"),
    Piece(name="outputs", module="outputs", kind=Kind.READ,
          relies_on="RequestOutput.{num_cached_tokens,metrics}, RequestStateStats' timestamps, "
                    "CompletionOutput.spec_decode_metrics (0.32 only: absent on 0.26, the columns stay null)"),
    Piece(name="device", module="device", kind=Kind.READ,
          relies_on="vllm.platforms.current_platform.{is_cpu,is_cuda,is_cuda_alike,get_device_total_memory}"),
    Piece(name="arg_rules", module="arg_rules", kind=Kind.READ,
          relies_on="AsyncEngineArgs.add_cli_args, FlexibleArgumentParser (vllm.utils.argparse_utils on 0.32, "
                    "vllm.utils on 0.26), vllm.config's pydantic fields, SpeculativeConfig, "
                    "vllm.config.model.iter_architecture_defaults, ModelRegistry.get_supported_archs"),
    Piece(name="metrics", module="metrics", kind=Kind.READ,
          relies_on="vllm.v1.metrics.reader.{get_metrics_snapshot,Counter,Gauge,Vector}, the vllm:* counter names"),
    Piece(name="step_stats", module="step_stats", kind=Kind.READ,
          relies_on="vllm.v1.metrics.stats.SchedulerStats.num_running_reqs, IterationStats.finished_requests "
                    "(what a stat logger's record() receives)"),
    Piece(name="schedule_rules", module="schedule_rules", kind=Kind.READ,
          relies_on="vllm.v1.spec_decode.dynamic.utils.validate_and_normalize_dynamic_sd_schedule"),
    Piece(name="spec_compat", module="spec_compat", kind=Kind.READ, cuda_only=True,
          relies_on="compilation_config.cudagraph_mode (PIECEWISE added for a draft-count schedule on CUDA)"),
    Piece(name="worker_probe", module="worker_probe", kind=Kind.READ,
          relies_on="worker_extension_cls; the worker's model_runner.{model,drafter,model_memory_usage,kv_caches}, "
                    "available_kv_cache_memory_bytes"),
    Piece(name="nvml", module="nvml", kind=Kind.READ, cuda_only=True, checked_on=(GPU_STUDIES, CPU_BUILD),
          relies_on="vllm.third_party.pynvml.{nvmlInit,nvmlShutdown,nvmlDeviceGetHandleByUUID,"
                    "nvmlDeviceGetHandleByIndex,nvmlDeviceGetUUID,nvmlDeviceGetTotalEnergyConsumption,"
                    "nvmlDeviceGetPowerUsage,NVMLError}; the worker's torch.cuda device properties' uuid"),
    Piece(name="fork_server", module="fork_server", kind=Kind.PATCH,
          relies_on="vllm.v1.engine.utils.get_mp_context (replaced in the actor process)"),
    Piece(name="draft_count", module="draft_count", kind=Kind.PATCH, checked_on=(CPU_BUILD,),
          relies_on="vllm.v1.engine.core.EngineCore (a utility method added in the engine-core process), "
                    "Scheduler.{dynamic_sd_lookup,num_spec_tokens,scheduler_config.max_num_seqs}, "
                    "SchedulerOutput.num_spec_tokens_to_schedule, "
                    "vllm.v1.spec_decode.dynamic.utils.build_dynamic_sd_schedule_lookup; inactive on 0.26 (not "
                    "checked there: a load per draft count)"),
    Piece(name="sleep_pinning", module="sleep_pinning", kind=Kind.PATCH, cuda_only=True,
          relies_on="vllm.v1.worker.gpu_worker.Worker.{load_model,compile_or_warm_up_model,sleep}, "
                    "vllm.device_allocator.cumem.CuMemAllocator.pointer_to_data, torch.empty (during the first "
                    "sleep), the allocator module's libcudart.cudaMemcpy and unmap_and_release (timed)"),
    Piece(name="ngram_jit", module="ngram_jit", kind=Kind.PATCH, cuda_only=True,
          relies_on="vllm.v1.spec_decode.ngram_proposer.{NgramProposer.__init__,batch_propose_numba} and the "
                    "proposer's min_n, max_n, max_model_len, k, valid_ngram_draft, valid_ngram_num_drafts"),
    Piece(name="model_info", module="model_info", kind=Kind.PATCH,
          relies_on="vllm.model_executor.models.registry.{ModelRegistry._try_inspect_model_cls,"
                    "_run_in_subprocess} (replaced in a throwaway process)"),
)


def piece(name: str) -> Piece:
    by_name = {p.name: p for p in PIECES}
    try:
        return by_name[name]
    except KeyError:
        raise KeyError(f"no piece {name!r}; valid: {', '.join(by_name)}") from None
