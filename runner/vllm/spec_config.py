"""vLLM's `speculative_config` engine argument: the one builder, for the engines the plan starts, the report's
recommendation and the acceptance tool. Pure (imports no vLLM)."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from runner.spec_arm import SPEC_METHODS, SpecArm

# The key of a draft-count schedule (runner.numerics.draft_schedule): k per batch-size range.
SCHEDULE_KEY = "num_speculative_tokens_per_batch_size"


def speculative_config(arm: SpecArm, *, extra: Optional[Mapping] = None,
                       schedule: Optional[Sequence[Sequence[int]]] = None,
                       acceptance: Optional[Mapping] = None) -> Optional[dict]:
    """None when the arm is off; else the method's defaults, then `extra` (spec.<method>), then the method and
    its k, then the draft-count schedule (`[[start, end, k], ...]`) and the acceptance keys of a synthetic
    profile, where given."""
    if arm.off:
        return None
    method = SPEC_METHODS.get(arm.method)
    config = dict(method.defaults if method else {})
    config.update(extra or {})
    config.update({"method": arm.method, "num_speculative_tokens": arm.k})
    if schedule:
        config[SCHEDULE_KEY] = [list(r) for r in schedule]
    config.update(acceptance or {})
    return config


def with_draft(config: Optional[Mapping], *, k: int, schedule: Optional[Sequence[Sequence[int]]] = None) -> dict:
    """An engine's `speculative_config` set to another arm's draft count: k (a schedule's largest k) and the
    schedule, or none; the rest (method, acceptance keys: a profile's first k rates) as the engine had it."""
    out = dict(config or {})
    out["num_speculative_tokens"] = int(k)
    if schedule:
        out[SCHEDULE_KEY] = [list(r) for r in schedule]
    else:
        out.pop(SCHEDULE_KEY, None)
    rates = out.get("synthetic_acceptance_rates")
    if isinstance(rates, list) and len(rates) > k:
        out["synthetic_acceptance_rates"] = rates[:k]
    return out
