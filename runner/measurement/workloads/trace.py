"""Trace replay: a request trace (Mooncake JSONL, Azure LLM inference CSV, BurstGPT CSV;
runner.traffic.traces) sent on the trace's own clock (× `time_scale`), each request with its input and output
lengths, and prompts rebuilt from its hash ids so that requests sharing ids share those prefix blocks. A run
replays the part it selects (a time window, a request range, a seeded sample) as recorded; a request over
max_model_len is refused, skipped or clipped (its first tokens kept) as `over_length` says, counted per trial. Open loop by nature:
a request leaves on its timestamp whether or not earlier ones finished; `max_concurrency` caps requests in flight.
The figure is TTFT p50.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Optional

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.traffic.over_length import OverLength, check_over_length
from runner.traffic.traces import (Selection, TraceError, TraceFile, TraceFormat, TraceRequest, fit, read_trace_file,
                                   send_offsets, trace_prompt)
from runner.measurement.workloads.base import TTFT_P50, RequestResult, TrialContext, Workload, WorkloadParams
from runner.measurement.workloads.open_loop import WARMUP_ARRIVALS, on_schedule
from runner.measurement.shipped import resolved


@dataclass(kw_only=True)
class TraceParams(WorkloadParams):
    trace_file: Optional[str] = None
    trace_format: str = "mooncake"  # mooncake | azure | burstgpt
    time_scale: float = 1.0  # × the trace's timestamps: 0.5 replays it twice as fast
    block_tokens: int = 512  # prompt tokens per hash id (Mooncake's traces: 512)
    # The part replayed, in this order: a window of the trace's clock in seconds from its first request
    # [start_s, end_s), then a request range of that [skip_requests, skip_requests + max_requests), then a
    # sample drawn with `seed` (a fraction or a count); requests keep their timestamps.
    start_s: float = 0.0
    end_s: Optional[float] = None
    skip_requests: int = 0
    max_requests: Optional[int] = None
    sample_fraction: Optional[float] = None
    sample_requests: Optional[int] = None
    # A request whose prompt + output exceed max_model_len: refuse (the run, before start) | skip | clip (its
    # prompt keeps its first max_model_len − output tokens), counted per trial (over_length_skipped / _clipped).
    # (over_max_model_len, its older name, is read as it: runner.config.workload_keys.)
    over_length: str = OverLength.REFUSE
    max_concurrency: Optional[int] = None  # at most this many requests in flight (null: no cap)
    not_counts = ("time_scale", "start_s", "end_s", "sample_fraction")
    zero_allowed = ("seed", "skip_requests")
    # Set on the driver (with_prompts): the trace file as read there (or its place in Ray's object store), shipped
    # to the actors so that no node needs the file.
    _trace: Any = field(default=None, repr=False, compare=False)

    def trace(self) -> TraceFile:
        return resolved(self._trace) if self._trace is not None else read_trace_file(self.trace_file,
                                                                                      self.trace_format)

    def with_prompts(self, tokenizer) -> "TraceParams":
        return dataclasses.replace(self, _trace=read_trace_file(self.trace_file, self.trace_format))

    def payload(self):
        return self._trace

    def with_payload(self, payload) -> "TraceParams":
        return dataclasses.replace(self, _trace=payload)

    def selected(self) -> list[TraceRequest]:
        """The requests this run replays, before the over-length policy."""
        return Selection(start_s=self.start_s, end_s=self.end_s, skip=self.skip_requests, count=self.max_requests,
                         sample_fraction=self.sample_fraction, sample_requests=self.sample_requests,
                         seed=self.seed).apply(self.trace().requests)

    def requests(self, max_model_len: Optional[int] = None) -> list[TraceRequest]:
        if max_model_len is None:
            return self.selected()
        return list(fit(self.selected(), max_model_len=max_model_len, policy=self.over_length).requests)

    def max_sequence_tokens(self) -> int:
        try:
            return max((r.tokens for r in self.selected()), default=0)
        except (TraceError, TypeError, ValueError):
            return 0  # validate() says why

    def sequence_tokens_at(self, max_model_len: int) -> int:
        try:
            fitted = fit(self.selected(), max_model_len=max_model_len, policy=self.over_length)
        except (TraceError, TypeError, ValueError):
            return 0
        if not fitted.requests:
            return max_model_len + 1  # nothing left to replay: refused (over_length_error says why)
        return max(r.tokens for r in fitted.requests)

    def over_length_error(self, max_model_len: int) -> Optional[str]:
        try:
            selected = self.selected()
        except (TraceError, TypeError, ValueError):
            return None
        over = fit(selected, max_model_len=max_model_len, policy="refuse").over
        if not over:
            return None
        first = over[0]
        fitting = next(i for i, r in enumerate(selected) if r.tokens > max_model_len)
        longest = max(r.tokens for r in selected)
        where = f"line {first.line}: {first.input_length} in + {first.output_length} out"
        if self.over_length != OverLength.REFUSE:
            return (f"every one of the {len(selected)} requests replayed is over max_model_len={max_model_len} "
                    f"under over_length={self.over_length} (the first at {where}) (fix: raise "
                    f"sweep.grid.max_model_len to [{longest}] or pick another part of the trace)")
        ranges = f"workload.trace.max_requests={fitting}, " if fitting else ""
        return (f"{len(over)} of the {len(selected)} requests replayed exceed max_model_len={max_model_len} (the "
                f"first at {where} = {first.tokens} tokens; the longest needs {longest}) (fix: "
                f"workload.trace.over_length=skip or =clip to replay the rest, {ranges}"
                f"or sweep.grid.max_model_len=[{longest}])")

    def source_columns(self, *, max_model_len: int) -> dict:
        fitted = fit(self.selected(), max_model_len=max_model_len, policy=self.over_length)
        return {"over_length_skipped": fitted.skipped, "over_length_clipped": fitted.clipped,
                "source_skipped": self.trace().failed}

    def validate(self) -> list[str]:
        errors = super().validate()
        scale = self.time_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
            errors.append(f"time_scale={scale!r} must be a number > 0 (× the trace's timestamps; 0.5: twice as "
                          f"fast)")
        errors += self._selection_errors()
        if self.trace_format not in tuple(TraceFormat):
            return errors + [f"trace_format={self.trace_format!r} is unknown; valid: {', '.join(TraceFormat)}"]
        errors += check_over_length(self.over_length)
        if not self.trace_file:
            return errors + [f"trace_file=null: the trace workload replays a {self.trace_format} trace file"]
        if errors:
            return errors
        try:
            trace = read_trace_file(self.trace_file, self.trace_format).requests
            if not self.selected():
                span = (trace[-1].timestamp_ms - trace[0].timestamp_ms) / 1000.0
                errors.append(f"max_requests={self.max_requests}: the selection leaves no request (the trace has "
                              f"{len(trace)} requests over {span:g} s; start_s={self.start_s}, end_s={self.end_s}, "
                              f"skip_requests={self.skip_requests})")
        except TraceError as exc:
            errors.append(f"trace_file={exc}")  # the message starts with the file's path
        return errors

    def _selection_errors(self) -> list[str]:
        errors = []
        for key in ("start_s", "end_s"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not 0 <= value < math.inf):
                errors.append(f"{key}={value!r} must be a number of seconds ≥ 0 (from the trace's first request)")
        if not errors and self.end_s is not None and self.end_s <= self.start_s:
            errors.append(f"end_s={self.end_s} must be after start_s={self.start_s}")
        f = self.sample_fraction
        if f is not None and (isinstance(f, bool) or not isinstance(f, (int, float)) or not 0 < f <= 1):
            errors.append(f"sample_fraction={f!r} must be in (0, 1]")
        if f is not None and self.sample_requests is not None:
            errors.append(f"sample_fraction={f} and sample_requests={self.sample_requests}: set one (fix: "
                          f"workload.trace.sample_fraction=null)")
        return errors

    def trial_concurrency(self, grid_level: int) -> int:
        return self.max_concurrency or 0

    def warmup_variant(self) -> "TraceParams":
        # The first few requests at once: a replay of its own would take the trace's whole span unmeasured.
        return dataclasses.replace(self, start_s=0.0, end_s=None, skip_requests=0, sample_fraction=None,
                                   sample_requests=None, max_requests=WARMUP_ARRIVALS, over_length=OverLength.SKIP,
                                   time_scale=0.0)

    def arrival_columns(self) -> dict:
        return {"arrival": "trace"}  # its offered rate is its schedule's (runner.measurement.records)


class Trace(Workload):
    name = "trace"
    params_type = TraceParams
    description = ("a Mooncake / Azure / BurstGPT trace replayed on its timestamps (window, range, sample), prefix "
                   "sharing from its hash ids")
    deciding = TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: TraceParams = ctx.params  # type: ignore[assignment]
        requests = p.requests(ctx.engine.max_model_len)
        maker = prompt_maker(p, ctx.engine)
        blocks: dict[tuple[str, int], list[int]] = {}

        def block(key: str, length: int) -> list[int]:
            if (key, length) not in blocks:
                blocks[key, length] = maker.tokens(length=length, seed=derived_seed(base=ctx.seed, salt=key))
            return blocks[key, length]

        # Padding keys by the request's line: a sampled or windowed replay sends each request's own tokens.
        prompts = [trace_prompt(r, index=r.line, block_tokens=p.block_tokens, block=block) for r in requests]

        async def arrival(i: int, sender) -> list[RequestResult]:
            result = await sender.stream(prompt_token_ids=prompts[i], max_tokens=requests[i].output_length,
                                         session=i)
            if requests[i].category is not None:
                result.category = requests[i].category
            return [result]

        await ctx.window.begin()
        results = await on_schedule(engine=ctx.engine, offsets=send_offsets(requests, time_scale=p.time_scale),
                                    max_concurrency=p.max_concurrency, arrival=arrival)
        await ctx.window.end()
        return results
