"""Engine arguments a draft-count schedule needs on some vLLM versions, added by the runner and recorded.

vLLM 0.32 switches full CUDA graphs to PIECEWISE itself when a speculative_config carries
`num_speculative_tokens_per_batch_size`; 0.26 has a method of the same name (`VllmConfig.
_maybe_override_dynamic_sd_cudagraph_mode`) but kept FULL_AND_PIECEWISE on an H200, and the schedule engine failed
to start (ZeroDivisionError in the drafter's CUDA-graph set-up) where PIECEWISE or eager ran. So on CUDA every
schedule engine gets `compilation_config.cudagraph_mode = PIECEWISE` (what 0.32 would choose anyway) unless its
arguments already choose eager or a graph mode.
"""
from __future__ import annotations

import json
from typing import Optional

SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


def schedule_graph_args(kwargs: dict, *, cuda: bool) -> dict:
    """The engine arguments to add to `kwargs` (none off CUDA, or where the user chose)."""
    spec = kwargs.get("speculative_config") or {}
    if not spec.get(SCHEDULE_KEY) or not cuda or kwargs.get("enforce_eager"):
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
    added = schedule_graph_args(kwargs, cuda=_cuda())
    if not added:
        return kwargs, None
    return {**kwargs, **added}, json.dumps(added, sort_keys=True, separators=(",", ":"))
