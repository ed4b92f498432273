"""What a finished request's `RequestOutput` says beyond its tokens: engine timestamps, cached tokens and, on
vLLM ≥ 0.32, per-request acceptance (0.26 has none: those fields stay null). Read by attribute, never by type:
a field this vLLM lacks reads as absent."""
from __future__ import annotations

from typing import Optional

from runner.vllm.versions import Check


def engine_side(final) -> dict:
    """Engine timestamps, cached tokens and per-request acceptance, where this vLLM gives them."""
    if final is None:
        return {}
    out: dict = {"cached_tokens": getattr(final, "num_cached_tokens", None)}
    m = getattr(final, "metrics", None)
    queued, scheduled, first = (getattr(m, n, None) for n in ("queued_ts", "scheduled_ts", "first_token_ts"))
    if queued and scheduled:
        out["engine_queue_s"] = scheduled - queued
    if queued and first:
        out["engine_ttft_s"] = first - queued
    out.update(request_spec_figures(getattr(final.outputs[0], "spec_decode_metrics", None)))
    return out


def token_times(final) -> tuple[Optional[float], Optional[float]]:
    """(first, last) token time on the engine core's monotonic clock (None where this vLLM keeps none)."""
    metrics = getattr(final, "metrics", None)
    return getattr(metrics, "first_token_ts", None), getattr(metrics, "last_token_ts", None)


def request_spec_figures(spec) -> dict:
    """vLLM 0.32's per-request `RequestSpecDecodeMetrics` (a histogram of accepted drafts per verify step and
    the draft tokens proposed), in vLLM's own definitions: rate = accepted / draft tokens, mean acceptance
    length = 1 + accepted / steps."""
    histogram = list(getattr(spec, "histogram", None) or [])
    if spec is None or not histogram:
        return {}
    steps = sum(histogram)
    accepted = sum(j * count for j, count in enumerate(histogram))
    drafted = int(getattr(spec, "num_draft_tokens", 0) or 0)
    # A chain drafter's accepted drafts are a prefix of its k: j accepted means positions 0..j-1 accepted.
    per_position = [sum(histogram[j] for j in range(i + 1, len(histogram))) for i in range(len(histogram) - 1)]
    return {
        "spec_accepted_per_position": per_position,
        "spec_num_steps": steps,
        "spec_num_draft_tokens": drafted,
        "spec_num_accepted_tokens": accepted,
        "spec_acceptance_rate": accepted / drafted if drafted else None,
        "spec_mean_acceptance_length": 1.0 + accepted / steps if steps else None,
    }


def check() -> Check:
    """The names read above, on vLLM's own classes (a dataclass field or a class attribute)."""
    import dataclasses

    from vllm.outputs import CompletionOutput, RequestOutput
    from vllm.v1.metrics.stats import RequestStateStats

    def names(cls) -> set[str]:
        fields = {f.name for f in dataclasses.fields(cls)} if dataclasses.is_dataclass(cls) else set()
        init = getattr(cls.__init__, "__code__", None)
        return fields | set(init.co_varnames if init else ()) | set(vars(cls))

    missing = [f"RequestOutput.{n}" for n in ("num_cached_tokens", "metrics") if n not in names(RequestOutput)]
    missing += [f"RequestStateStats.{n}" for n in ("queued_ts", "scheduled_ts", "first_token_ts", "last_token_ts")
                if n not in names(RequestStateStats)]
    if missing:
        return Check(active=False, reason="missing: " + ", ".join(missing))
    if "spec_decode_metrics" not in names(CompletionOutput):
        return Check(active=True, reason="no per-request acceptance (CompletionOutput.spec_decode_metrics): "
                                         "those columns stay null")
    return Check(active=True)
