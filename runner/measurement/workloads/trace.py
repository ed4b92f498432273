"""Trace replay: a Mooncake-format JSONL trace's requests sent on the trace's own clock (× `time_scale`), each
with its input and output lengths, and prompts rebuilt from its hash ids so that requests sharing ids share
those prefix blocks (runner.measurement.traces). Open loop by nature: a request leaves on its timestamp whether
or not earlier ones finished; `max_concurrency` caps requests in flight. The figure is TTFT p50.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.traces import TraceError, TraceRequest, read_trace, send_offsets, trace_prompt
from runner.measurement.workloads.base import TTFT_P50, RequestResult, TrialContext, Workload, WorkloadParams
from runner.measurement.workloads.open_loop import WARMUP_ARRIVALS, on_schedule


@dataclass(kw_only=True)
class TraceParams(WorkloadParams):
    trace_file: Optional[str] = None
    time_scale: float = 1.0  # × the trace's timestamps: 0.5 replays it twice as fast
    block_tokens: int = 512  # prompt tokens per hash id (Mooncake's traces: 512)
    max_requests: Optional[int] = None  # the trace's first N requests (null: all)
    max_concurrency: Optional[int] = None  # at most this many requests in flight (null: no cap)
    not_counts = ("time_scale",)

    def requests(self) -> list[TraceRequest]:
        return read_trace(self.trace_file)[:self.max_requests]

    def max_sequence_tokens(self) -> int:
        try:
            return max(r.input_length + r.output_length for r in self.requests())
        except (TraceError, TypeError):
            return 0  # validate() says why

    def validate(self) -> list[str]:
        errors = super().validate()
        scale = self.time_scale
        if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
            errors.append(f"time_scale={scale!r} must be a number > 0 (× the trace's timestamps; 0.5: twice as "
                          f"fast)")
        if not self.trace_file:
            return errors + ["trace_file=null: the trace workload replays a Mooncake-format JSONL file"]
        try:
            self.requests()
        except TraceError as exc:
            errors.append(f"trace_file={exc}")  # the message starts with the file's path
        return errors

    def trial_concurrency(self, grid_level: int) -> int:
        return self.max_concurrency or 0

    def warmup_variant(self) -> "TraceParams":
        # The first few requests at once: a replay of its own would take the trace's whole span unmeasured.
        first = len(self.requests())
        return dataclasses.replace(self, max_requests=min(first, WARMUP_ARRIVALS), time_scale=0.0)

    def arrival_columns(self) -> dict:
        return {"arrival": "trace"}  # its offered rate is its schedule's (runner.measurement.records)


class Trace(Workload):
    name = "trace"
    params_type = TraceParams
    description = "a Mooncake-format JSONL trace replayed on its timestamps, prefix sharing from its hash ids"
    deciding = TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: TraceParams = ctx.params  # type: ignore[assignment]
        requests = p.requests()
        maker = prompt_maker(p, ctx.engine)
        blocks: dict[tuple[str, int], list[int]] = {}

        def block(key: str, length: int) -> list[int]:
            if (key, length) not in blocks:
                blocks[key, length] = maker.tokens(length=length, seed=derived_seed(base=ctx.seed, salt=key))
            return blocks[key, length]

        prompts = [trace_prompt(r, index=i, block_tokens=p.block_tokens, block=block) for i, r in enumerate(requests)]

        async def arrival(i: int, sender) -> list[RequestResult]:
            return [await sender.stream(prompt_token_ids=prompts[i], max_tokens=requests[i].output_length,
                                        session=i)]

        await ctx.window.begin()
        results = await on_schedule(engine=ctx.engine, offsets=send_offsets(requests, time_scale=p.time_scale),
                                    max_concurrency=p.max_concurrency, arrival=arrival)
        await ctx.window.end()
        return results
