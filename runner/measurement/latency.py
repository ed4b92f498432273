"""Latency and throughput math on client-side timelines. Pure."""
from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Optional, Sequence

from runner.slo import Metric, Slo


@dataclass(kw_only=True)
class Timeline:
    """One request as the client saw it: when it was sent and when each chunk arrived."""

    sent_at: float
    chunk_times: list[float] = field(default_factory=list)
    chunk_sizes: list[int] = field(default_factory=list)

    def add_chunk(self, *, at: float, tokens: int) -> None:
        if tokens > 0:
            self.chunk_times.append(at)
            self.chunk_sizes.append(tokens)

    @property
    def output_tokens(self) -> int:
        return sum(self.chunk_sizes)


def ttft(t: Timeline) -> Optional[float]:
    return t.chunk_times[0] - t.sent_at if t.chunk_times else None


def e2e(t: Timeline) -> Optional[float]:
    return t.chunk_times[-1] - t.sent_at if t.chunk_times else None


def tpot(t: Timeline) -> Optional[float]:
    """(last − first) / (n − 1): the mean time per output token after the first."""
    n = t.output_tokens
    if n < 2:
        return None
    # Tokens delivered with the first chunk arrived at TTFT: the decode span starts there.
    return (t.chunk_times[-1] - t.chunk_times[0]) / (n - 1)


def chunk_gaps(t: Timeline) -> list[float]:
    """One gap per streamed chunk after the first: vLLM's ITL (`vllm bench serve`,
    benchmarks/lib/endpoint_request_func.py appends `timestamp - most_recent_timestamp` per chunk)."""
    return [t.chunk_times[i] - t.chunk_times[i - 1] for i in range(1, len(t.chunk_times))]


def per_token_latencies(t: Timeline) -> list[float]:
    """Per token: a chunk of k tokens after Δt counts as k tokens of Δt/k each (not vLLM's ITL)."""
    out: list[float] = []
    for gap, k in zip(chunk_gaps(t), t.chunk_sizes[1:]):
        out.extend([gap / k] * k)
    return out


def decode_rate(t: Timeline) -> Optional[float]:
    """Tokens per second after the first token (one session's decode speed)."""
    value = tpot(t)
    return 1.0 / value if value else None


def percentile(values: Sequence[float], q: float) -> Optional[float]:
    """Linear-interpolated percentile (numpy's default), None for no values."""
    data = sorted(v for v in values if v is not None and not math.isnan(v))
    if not data:
        return None
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def mean(values: Sequence[Optional[float]]) -> Optional[float]:
    data = [v for v in values if v is not None]
    return sum(data) / len(data) if data else None


def summarize(values: Sequence[Optional[float]], *, prefix: str) -> dict[str, Optional[float]]:
    """`{prefix}_mean_s, _p50_s, _p90_s, _p99_s`."""
    data = [v for v in values if v is not None]
    return {
        f"{prefix}_mean_s": mean(data),
        f"{prefix}_p50_s": percentile(data, 50),
        f"{prefix}_p90_s": percentile(data, 90),
        f"{prefix}_p99_s": percentile(data, 99),
    }


_FIGURES = {Metric.TTFT: ttft, Metric.TPOT: tpot, Metric.E2EL: e2e}


def within(slo: Slo, t: Timeline) -> bool:
    """Each of the request's figures is within its tightest target (a request without one does not meet it)."""
    return all((value := _FIGURES[metric](t)) is not None and value <= limit
               for metric, limit in slo.request_limits_s().items())


def measured_span(timelines: Sequence[Timeline]) -> Optional[float]:
    """From the first request sent to the last token received: the window a throughput figure divides by."""
    finished = [t for t in timelines if t.chunk_times]
    if not finished:
        return None
    return max(t.chunk_times[-1] for t in finished) - min(t.sent_at for t in timelines)


def goodput(timelines: Sequence[Timeline], *, slo: Slo, duration_s: Optional[float]
            ) -> tuple[Optional[float], Optional[float]]:
    """(requests/s meeting every SLO, share meeting it); (None, None) without SLOs."""
    if not slo or not timelines or not duration_s or duration_s <= 0:
        return None, None
    met = sum(1 for t in timelines if within(slo, t))
    return met / duration_s, met / len(timelines)


def distinct_token_share(outputs: Sequence[Sequence[int]]) -> Optional[float]:
    """Mean over requests of distinct token ids / output tokens: near 0 for outputs that loop on a few tokens."""
    shares = [len(set(ids)) / len(ids) for ids in outputs if ids]
    return mean(shares)


def trial_latency_summary(timelines: Sequence[Timeline], *, slo: Slo = Slo()) -> dict:
    """The latency and throughput columns of a trial row, over the measured requests' own span."""
    duration = measured_span(timelines)
    tpots = [tpot(t) for t in timelines]
    median_tpot = percentile([v for v in tpots if v is not None], 50)
    chunks = [c for t in timelines for c in t.chunk_sizes[1:]]
    total_out = sum(t.output_tokens for t in timelines)
    good, attainment = goodput(timelines, slo=slo, duration_s=duration)
    return {
        **summarize([ttft(t) for t in timelines], prefix="ttft"),
        **summarize(tpots, prefix="tpot"),
        **summarize([g for t in timelines for g in chunk_gaps(t)], prefix="itl"),
        **summarize([x for t in timelines for x in per_token_latencies(t)], prefix="itl_token"),
        **summarize([e2e(t) for t in timelines], prefix="e2e"),
        "duration_s": duration,
        # vLLM's benchmarks report median TPOT; a mean of 1/TPOT favours the arms with the widest spread.
        "decode_tok_s_per_session": 1.0 / median_tpot if median_tpot else None,
        "decode_tok_s_per_session_mean": mean([decode_rate(t) for t in timelines]),
        "decode_tok_s_aggregate": total_out / duration if duration else None,
        "chunk_tokens_mean": mean(chunks),
        "chunk_tokens_p50": percentile(chunks, 50),
        "output_tokens_total": total_out,
        "request_throughput_req_s": sum(1 for t in timelines if t.chunk_times) / duration if duration else None,
        "goodput_req_s": good,
        "slo_attainment": attainment,
    }


def hash_tokens(token_ids: Sequence[int]) -> str:
    return hashlib.sha256(",".join(map(str, token_ids)).encode()).hexdigest()[:16]


def combine_hashes(hashes: Sequence[Optional[str]]) -> str:
    return hashlib.sha256("|".join(h or "-" for h in hashes).encode()).hexdigest()[:16]
