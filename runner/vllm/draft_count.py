"""An engine's per-step draft count set between trials: one engine loaded at a method's largest k runs every smaller
k and any per-batch-size schedule, without a reload.

vLLM picks the draft count per engine step: the scheduler looks it up by the step's request count
(`Scheduler.dynamic_sd_lookup`, a list indexed by batch size, built by `build_dynamic_sd_schedule_lookup` from
`speculative_config.num_speculative_tokens_per_batch_size` and capped at the engine's k) and sends it to the worker
as `SchedulerOutput.num_spec_tokens_to_schedule`; the drafter proposes that many. Here the engine core gets one
utility method (`UTILITY`), reached by `call_utility(_async)` from the actor; it replaces that lookup:

- a static k below the engine's: vLLM's own lookup of the schedule `[[1, max_num_seqs, k]]`: the engine runs as a
  schedule engine of constant k does (no padding of new decode requests to 1 + k: vLLM pads only without a lookup);
- a schedule: vLLM's own lookup of it;
- the engine's k: no lookup (a static engine's own state);
- `own`: the lookup the engine was loaded with (a kept engine parked or claimed).

What stays the largest k's: the KV lookahead slots the scheduler reserves per step, and on CUDA the uniform-decode
graphs sized by 1 + k (docs/fidelity.md; the CUDA default keeps a load per k until a GPU table says otherwise).

Installed in the engine-core process (runner/vllm/fork_server.py: the fork server's child), so the path needs
execution.engine_start=forkserver; elsewhere the plan keeps a load per k. A call on an engine without it fails
with vLLM's own error (no silent run at the engine's k).
"""
from __future__ import annotations

import inspect
from typing import Optional, Sequence, Union

from runner.vllm import notice
from runner.vllm.versions import CPU_BUILD, Check

PIECE = "draft_count"
UTILITY = "runner_set_draft_count"
OWN = "own"  # back to the lookup the engine was loaded with

# What the actor asks for: None (the engine's own k, static), OWN, or a schedule's ranges [[start, end, k], ...].
Draft = Union[None, str, Sequence[Sequence[int]]]


def static_ranges(k: int, *, max_num_seqs: int) -> list[list[int]]:
    """A constant k as vLLM's schedule: one range over every batch size."""
    return [[1, max(1, int(max_num_seqs)), int(k)]]


def _set_draft_count(self, ranges: Draft = None) -> dict:
    """EngineCore's utility method: replaces the scheduler's lookup; returns what the steps will draft (the
    distinct k's of the lookup, or the engine's k) so that the caller can check it took."""
    scheduler = self.scheduler
    if not hasattr(self, "_runner_own_lookup"):
        self._runner_own_lookup = scheduler.dynamic_sd_lookup
    engine_k = int(scheduler.num_spec_tokens)
    if ranges == OWN:
        lookup = self._runner_own_lookup
    elif ranges is None:
        lookup = None
    else:
        from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

        lookup = build_dynamic_sd_schedule_lookup([list(map(int, r)) for r in ranges],
                                                  vllm_max_batch_size=scheduler.scheduler_config.max_num_seqs,
                                                  vllm_num_speculative_tokens=engine_k)
    scheduler.dynamic_sd_lookup = lookup
    ks = sorted(set(lookup[1:])) if lookup is not None else [engine_k]
    return {"engine_k": engine_k, "ks": ks, "lookup": lookup is not None}


def install() -> bool:
    """Adds the utility method to vLLM's EngineCore in this process (the engine core's); says so in the log."""
    try:
        from vllm.v1.engine.core import EngineCore

        _names()
    except (ImportError, AttributeError) as exc:
        notice.not_applied(PIECE, f"{type(exc).__name__}: {exc}; a load per draft count")
        return False
    EngineCore.runner_set_draft_count = _set_draft_count
    notice.applied(PIECE, f"EngineCore.{UTILITY}: the scheduler's per-step draft count set between trials")
    return True


async def set_async(llm, ranges: Draft) -> dict:
    """On an `AsyncLLM` (its engine-core client's utility call)."""
    return await llm.engine_core.call_utility_async(UTILITY, ranges)


def set_offline(llm, ranges: Draft) -> dict:
    """On an `LLM` (its engine's synchronous client)."""
    return llm.llm_engine.engine_core.call_utility(UTILITY, ranges)


def _names() -> None:
    """The vLLM names the piece relies on; raises AttributeError where one is gone."""
    from vllm.v1.core.sched.output import SchedulerOutput
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.engine.core import EngineCore
    from vllm.v1.spec_decode.dynamic.utils import build_dynamic_sd_schedule_lookup

    source = inspect.getsource(Scheduler)
    for name in ("self.dynamic_sd_lookup", "num_spec_tokens_to_schedule", "self.num_spec_tokens"):
        if name not in source:
            raise AttributeError(f"Scheduler no longer uses {name}")
    if "num_spec_tokens_to_schedule" not in {f for f in getattr(SchedulerOutput, "__dataclass_fields__", {})}:
        raise AttributeError("SchedulerOutput has no num_spec_tokens_to_schedule")
    params = list(inspect.signature(build_dynamic_sd_schedule_lookup).parameters)
    if params[1:] != ["vllm_max_batch_size", "vllm_num_speculative_tokens"]:
        raise AttributeError(f"build_dynamic_sd_schedule_lookup takes {params}")
    if not hasattr(EngineCore, "scheduler") and "self.scheduler" not in inspect.getsource(EngineCore.__init__):
        raise AttributeError("EngineCore keeps no scheduler")


def checked(version: str) -> Optional[str]:
    """None where the piece ran on this vLLM; else why it stays off there."""
    if version.split("+")[0] != CPU_BUILD:
        return (f"not checked on vLLM {version}: its scheduler's lookup may differ (checked on {CPU_BUILD}); a "
                f"load per draft count there")
    return None


def check() -> Check:
    from runner.vllm.engine import vllm_version

    _names()
    reason = checked(vllm_version())
    if reason:
        return Check(active=False, reason=reason)
    return Check(active=True)
