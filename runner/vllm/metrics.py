"""The Prometheus metrics vLLM keeps in its process's registry (one engine per process, so they are that
engine's), by vLLM's names; runner.measurement.counters turns them into a trial's columns."""
from __future__ import annotations

from typing import Iterator, Union

from runner.vllm.versions import Check

SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
PREFIX_QUERIES = "vllm:prefix_cache_queries"
PREFIX_HITS = "vllm:prefix_cache_hits"
PREEMPTIONS = "vllm:num_preemptions"
KV_USAGE = "vllm:kv_cache_usage_perc"
# Requests vLLM's stat loggers have counted as finished (every finish reason; a client's abort is not counted).
FINISHED = "vllm:request_success"

COUNTER, VECTOR, GAUGE = "counter", "vector", "gauge"


def read_metrics(metrics=None) -> Iterator[tuple[str, str, Union[float, list[float]]]]:
    """(kind, name, value) per metric and label set: this process's registry, or `metrics` (what
    `LLM.get_metrics()` returns); a vector's value is its list of floats."""
    from vllm.v1.metrics.reader import Counter, Gauge, Vector, get_metrics_snapshot

    for metric in get_metrics_snapshot() if metrics is None else metrics:
        if isinstance(metric, Counter):
            yield COUNTER, metric.name, float(metric.value)
        elif isinstance(metric, Vector):
            yield VECTOR, metric.name, [float(v) for v in metric.values]
        elif isinstance(metric, Gauge):
            yield GAUGE, metric.name, float(metric.value)


def check() -> Check:
    from vllm.v1.metrics.reader import Counter, Gauge, Vector, get_metrics_snapshot  # noqa: F401

    list(read_metrics())  # an empty registry here: no engine in this process
    return Check(active=True)
