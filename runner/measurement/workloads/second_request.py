"""The same prompt sent twice, one after the other: TTFT cold vs repeat (the cache-hit figure).

Each of the N sessions (= concurrency) has its own prompt; all sessions send
their cold request at once, then, once all are done, their repeat. The trial's
latency, throughput and counter columns cover the repeats only (`measured_phases` and the
measure window); the cold requests are in the requests table with phase "cold". A cold request
decodes one token: it is there to fill the cache and to give the cold TTFT (as `shared_prefix`'s
warm prefix), and the repeat hits the same prompt blocks whatever the cold one decoded.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.workloads.base import REPEAT_TTFT_P50, RequestResult, TrialContext, Workload, WorkloadParams

COLD_OUTPUT_TOKENS = 1  # the cold request fills the cache and gives the cold TTFT; no figure reads its decode


@dataclass(kw_only=True)
class SecondRequestParams(WorkloadParams):
    length_fields = ("input_len",)
    input_len: int = 4096
    output_len: int = 32

    def max_sequence_tokens(self) -> int:
        return self.input_len + self.output_len

    def tokens_decoded_in_turn(self) -> int:
        return COLD_OUTPUT_TOKENS + self.output_len

    def measured_phases(self) -> tuple[str, ...]:
        return ("repeat",)


class SecondRequest(Workload):
    name = "second_request"
    params_type = SecondRequestParams
    description = "each session's prompt twice: cold, then repeat (a prefix-cache hit where caching is on)"
    deciding = REPEAT_TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: SecondRequestParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        maker = prompt_maker(p, engine)
        prompts = [maker.tokens(length=p.input_len, seed=derived_seed(base=ctx.seed, session=s))
                   for s in range(ctx.concurrency)]
        results: list[RequestResult] = []
        for turn, phase in enumerate(("cold", "repeat")):
            if phase == "repeat":
                await ctx.window.begin()
            results.extend(await asyncio.gather(*(
                engine.stream(prompt_token_ids=prompt, session=s, turn=turn, phase=phase,
                              max_tokens=p.output_len if phase == "repeat" else COLD_OUTPUT_TOKENS)
                for s, prompt in enumerate(prompts))))
        await ctx.window.end()
        return results
