"""Engine arguments a draft-count schedule needs on some vLLM versions, added by the runner and recorded.

vLLM 0.32 switches full CUDA graphs to PIECEWISE itself when a speculative_config carries
`num_speculative_tokens_per_batch_size`; 0.26 has a method of the same name (`VllmConfig.
_maybe_override_dynamic_sd_cudagraph_mode`) but kept FULL_AND_PIECEWISE on an H200, and the schedule engine failed
to start (ZeroDivisionError in the drafter's CUDA-graph set-up) where PIECEWISE or eager ran. So on CUDA every
schedule engine gets `compilation_config.cudagraph_mode = PIECEWISE` (what 0.32 would choose anyway) unless its
arguments already choose eager or a graph mode. The plan adds it (runner.plan.vllm_args) and the engine row records
it (added_engine_args_json).
"""
from __future__ import annotations

import json

from runner.vllm.device import is_cuda_alike
from runner.vllm.spec_config import SCHEDULE_KEY
from runner.vllm.versions import Check


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


def check() -> Check:
    """vLLM's compilation config takes the mode added here; the addition itself is made on CUDA only."""
    import dataclasses

    from vllm.config import CompilationConfig
    from vllm.config.compilation import CUDAGraphMode

    if "cudagraph_mode" not in {f.name for f in dataclasses.fields(CompilationConfig)}:
        return Check(active=False, reason="CompilationConfig has no cudagraph_mode")
    CUDAGraphMode["PIECEWISE"]
    if not is_cuda_alike():
        return Check(active=False, reason="CUDA only: no CUDA graphs here (vLLM's names are present)")
    return Check(active=True)
