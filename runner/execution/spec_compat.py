"""Engine arguments a draft-count schedule needs on some vLLM versions, added by the runner and recorded.

vLLM 0.32 switches full CUDA graphs to PIECEWISE itself when a speculative_config carries
`num_speculative_tokens_per_batch_size` (`VllmConfig._maybe_override_dynamic_sd_cudagraph_mode`); 0.26 does not,
and a schedule engine there failed to start with its default graphs (ZeroDivisionError in the drafter's CUDA-graph
set-up) while PIECEWISE or eager ran. So on CUDA with a vLLM that lacks the override, a schedule engine gets
`compilation_config.cudagraph_mode = PIECEWISE` unless its arguments already choose eager or a graph mode.
"""
from __future__ import annotations

import json
from typing import Optional

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


def schedule_graph_args(kwargs: dict, *, vllm_overrides: bool, cuda: bool) -> dict:
    """The engine arguments to add to `kwargs` (none where vLLM handles it, off CUDA, or the user chose)."""
    spec = kwargs.get("speculative_config") or {}
    if not spec.get(SCHEDULE_KEY) or vllm_overrides or not cuda or kwargs.get("enforce_eager"):
        return {}
    compilation = kwargs.get("compilation_config")
    if isinstance(compilation, str):
        try:
            compilation = json.loads(compilation)
        except ValueError:
            return {}  # a level number or other shorthand: the user's choice stands
    if compilation is not None and not isinstance(compilation, dict):
        return {}
    if (compilation or {}).get("cudagraph_mode") is not None:
        return {}
    return {"compilation_config": {**(compilation or {}), "cudagraph_mode": "PIECEWISE"}}


def _vllm_overrides() -> bool:
    from vllm.config import VllmConfig

    return hasattr(VllmConfig, "_maybe_override_dynamic_sd_cudagraph_mode")


def _cuda() -> bool:
    try:
        from vllm.platforms import current_platform

        return bool(current_platform.is_cuda_alike())
    except Exception:
        return False


def with_version_compat(kwargs: dict) -> tuple[dict, Optional[str]]:
    """`kwargs` with what this vLLM needs added, and the added arguments as JSON for the engine row (None: none)."""
    if not (kwargs.get("speculative_config") or {}).get(SCHEDULE_KEY):
        return kwargs, None
    added = schedule_graph_args(kwargs, vllm_overrides=_vllm_overrides(), cuda=_cuda())
    if not added:
        return kwargs, None
    return {**kwargs, **added}, json.dumps(added, sort_keys=True, separators=(",", ":"))
