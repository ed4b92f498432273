"""vLLM's engines as the runner drives them: `AsyncLLM` (streamed requests) and `LLM` (offline batches), their
sampling parameters, the engine's own config figures, and the parts of `LLM` that its public methods do not reach
(its engine core, its stat loggers). runner.execution.engine hosts them inside the actor."""
from __future__ import annotations

import dataclasses
from typing import Optional

from runner.vllm import notice
from runner.vllm.versions import Check


def vllm_version() -> str:
    import vllm

    return getattr(vllm, "__version__", "unknown")


def import_engine_stack() -> None:
    """Imports only (the actor's `prepare`, ahead of the load): vLLM's engine core runs in a child process with its
    own CUDA context, so a context made here would be one more held by every resident actor."""
    import torch  # noqa: F401
    import vllm  # noqa: F401
    from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: F401
    from vllm.v1.engine.async_llm import AsyncLLM  # noqa: F401


def engine_arg_names() -> set[str]:
    from vllm.engine.arg_utils import AsyncEngineArgs

    return {f.name for f in dataclasses.fields(AsyncEngineArgs)}


def per_request_spec_supported() -> bool:
    """vLLM ≥ 0.32 can report acceptance per finished request; 0.26 has no such engine argument."""
    return "per_request_spec_decode_metrics" in engine_arg_names()


def start_async(kwargs: dict, *, stat_loggers: list):
    """An `AsyncLLM` from engine arguments, with the runner's stat loggers."""
    from vllm.engine.arg_utils import AsyncEngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    return AsyncLLM.from_engine_args(AsyncEngineArgs(**kwargs), stat_loggers=stat_loggers)


def start_offline(kwargs: dict, *, stat_logger=None):
    """An `LLM` from engine arguments; `LLM` takes no stat loggers, so `stat_logger` joins its engine's logger
    manager where it has one (else it records nothing)."""
    from vllm import LLM

    llm = LLM(**kwargs)
    if stat_logger is not None:
        add_stat_logger(llm, stat_logger)
    return llm


def add_stat_logger(llm, logger) -> bool:
    """`logger` added to an `LLM`'s stat loggers; False (and the log says why) where this vLLM keeps them elsewhere."""
    manager = getattr(getattr(llm, "llm_engine", None), "logger_manager", None)
    loggers = getattr(manager, "stat_loggers", None)
    if not isinstance(loggers, list):
        notice.unread("engine", "LLM.llm_engine.logger_manager.stat_loggers is not a list: the offline engine's "
                      "steps are not counted (batch-size columns stay null)")
        return False
    loggers.append(logger)
    return True


def sampling_params(*, stream: bool, **params):
    """vLLM's `SamplingParams`; `stream`: each streamed output carries only its new tokens (DELTA)."""
    from vllm import SamplingParams

    if stream:
        from vllm.sampling_params import RequestOutputKind

        params["output_kind"] = RequestOutputKind.DELTA
    return SamplingParams(**params)


def engine_config(engine):
    """The `VllmConfig` of an `AsyncLLM` or an `LLM`."""
    own = getattr(engine, "vllm_config", None)
    return own if own is not None else engine.llm_engine.vllm_config


def sleep_target(engine):
    """What answers `is_sleeping()`: an `AsyncLLM` itself, an `LLM`'s engine."""
    return engine if hasattr(engine, "is_sleeping") else engine.llm_engine


def shutdown_offline(llm) -> None:
    llm.llm_engine.engine_core.shutdown()  # LLM has no shutdown()


def capacity(vllm_config, *, max_model_len: Optional[int]) -> dict:
    """The KV cache's size as the engine set it up: vLLM's own group-aware figures where it has them (with an MTP
    layer the KV cache has more than one group, and blocks × block size over-counts the tokens it can hold)."""
    cache = vllm_config.cache_config
    blocks = cache.num_gpu_blocks or 0
    tokens = getattr(cache, "kv_cache_size_tokens", None) or blocks * cache.block_size
    concurrency = getattr(cache, "kv_cache_max_concurrency", None)
    if concurrency is None and max_model_len:
        concurrency = tokens / max_model_len
    return {"kv_capacity_tokens": tokens, "num_kv_blocks": blocks, "block_size": cache.block_size,
            "max_concurrency_at_max_len": concurrency}


def check() -> Check:
    from vllm import LLM, SamplingParams  # noqa: F401
    from vllm.config import CacheConfig
    from vllm.sampling_params import RequestOutputKind
    from vllm.v1.engine.async_llm import AsyncLLM

    missing = [n for n in ("from_engine_args", "generate", "abort", "reset_prefix_cache", "collective_rpc",
                           "sleep", "wake_up", "is_sleeping", "shutdown") if not hasattr(AsyncLLM, n)]
    missing += [f"LLM.{n}" for n in ("generate", "collective_rpc", "reset_prefix_cache", "sleep", "wake_up")
                if not hasattr(LLM, n)]
    missing += [f"CacheConfig.{n}" for n in ("num_gpu_blocks", "block_size")
                if n not in {f.name for f in dataclasses.fields(CacheConfig)}]
    if not hasattr(RequestOutputKind, "DELTA"):
        missing.append("RequestOutputKind.DELTA")
    if missing:
        return Check(active=False, reason="missing: " + ", ".join(missing))
    if not per_request_spec_supported():
        return Check(active=True, reason=f"vLLM {vllm_version()} has no per_request_spec_decode_metrics")
    return Check(active=True)
