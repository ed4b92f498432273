"""vLLM's cumulative engine counters, and the per-trial deltas taken from them.

`delta_metrics` is pure; `snapshot` reads the process's Prometheus registry
(one engine per process, so the registry is that engine's alone).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from runner.measurement import engine_steps
from runner.vllm.metrics import (FINISHED, KV_USAGE, PREEMPTIONS, PREFIX_HITS, PREFIX_QUERIES,  # noqa: F401
                                 SPEC_ACCEPTED, SPEC_DRAFT_TOKENS, SPEC_DRAFTS, SPEC_PER_POS)


@dataclass(kw_only=True)
class CounterSnapshot:
    scalars: dict[str, float] = field(default_factory=dict)
    vectors: dict[str, list[float]] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    # Engine steps by batch size (runner.measurement.engine_steps), read with the counters.
    steps: dict[int, int] = field(default_factory=dict)


def snapshot() -> CounterSnapshot:
    from runner.vllm.metrics import COUNTER, GAUGE, VECTOR, read_metrics

    snap = CounterSnapshot(steps=engine_steps.STEPS.snapshot())
    for kind, name, value in read_metrics():
        if kind == COUNTER:
            snap.scalars[name] = snap.scalars.get(name, 0.0) + value
        elif kind == VECTOR:
            old = snap.vectors.get(name, [])
            snap.vectors[name] = [a + b for a, b in zip(old, value)] if old else value
        elif kind == GAUGE:
            snap.gauges[name] = value
    return snap


def finished_requests(snap: CounterSnapshot) -> Optional[float]:
    """Requests vLLM has counted as finished (None: this engine keeps no such counter)."""
    return snap.scalars.get(FINISHED)


def gauge(name: str) -> Optional[float]:
    """One gauge's current value (the largest over its labels), without collecting every metric.

    Sampled during trials, so it must stay cheap: it reads only that metric's collector where
    prometheus_client exposes it, and falls back to a full snapshot elsewhere.
    """
    from prometheus_client import REGISTRY

    collector = getattr(REGISTRY, "_names_to_collectors", {}).get(name)
    if collector is None:
        return snapshot().gauges.get(name)
    values = [s.value for metric in collector.collect() for s in metric.samples if s.name == name]
    return max(values) if values else None


def _delta(before: CounterSnapshot, after: CounterSnapshot, name: str) -> Optional[float]:
    if name not in after.scalars:
        return None
    return after.scalars[name] - before.scalars.get(name, 0.0)


def spec_decode_figures(*, drafts: Optional[float], draft_tokens: Optional[float], accepted: Optional[float],
                        per_position: list[float]) -> dict:
    """vLLM's definitions: rate = accepted/draft tokens; mean length = 1 + accepted/drafts."""
    has = bool(drafts)
    return {
        "spec_num_drafts": int(drafts) if drafts is not None else None,
        "spec_num_draft_tokens": int(draft_tokens) if draft_tokens is not None else None,
        "spec_num_accepted_tokens": int(accepted) if accepted is not None else None,
        "spec_acceptance_rate": (accepted / draft_tokens) if has and draft_tokens else None,
        "spec_mean_acceptance_length": (1.0 + accepted / drafts) if has else None,
        "spec_acceptance_per_position": [a / drafts for a in per_position] if has else [],
    }


def delta_metrics(before: CounterSnapshot, after: CounterSnapshot) -> dict:
    """A trial's counter columns: the difference between two snapshots."""
    old_pos = before.vectors.get(SPEC_PER_POS, [])
    new_pos = after.vectors.get(SPEC_PER_POS, [])
    per_pos = [n - (old_pos[i] if i < len(old_pos) else 0.0) for i, n in enumerate(new_pos)]
    queries = _delta(before, after, PREFIX_QUERIES)
    hits = _delta(before, after, PREFIX_HITS)
    preempt = _delta(before, after, PREEMPTIONS)
    return {
        **spec_decode_figures(drafts=_delta(before, after, SPEC_DRAFTS),
                              draft_tokens=_delta(before, after, SPEC_DRAFT_TOKENS),
                              accepted=_delta(before, after, SPEC_ACCEPTED), per_position=per_pos),
        "prefix_cache_queries": int(queries) if queries is not None else None,
        "prefix_cache_hits": int(hits) if hits is not None else None,
        "prefix_cache_hit_rate": (hits / queries) if queries else None,
        "num_preemptions": int(preempt) if preempt is not None else None,
        **engine_steps.batch_columns(before.steps, after.steps),
    }
