"""Cold-prompt decode: N concurrent sessions, each a fresh random prompt."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, random_token_ids
from runner.measurement.workloads.base import RequestResult, TrialContext, Workload, WorkloadParams


@dataclass(kw_only=True)
class DecodeParams(WorkloadParams):
    input_len: int = 128
    output_len: int = 64
    requests_per_session: int = 1

    def max_sequence_tokens(self) -> int:
        return self.input_len + self.output_len


class Decode(Workload):
    name = "decode"
    params_type = DecodeParams
    description = "cold prompts of input_len random tokens, output_len tokens each, N sessions at once"

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: DecodeParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine

        async def session(s: int) -> list[RequestResult]:
            results = []
            for turn in range(p.requests_per_session):
                prompt = random_token_ids(length=p.input_len, seed=derived_seed(base=ctx.seed, session=s, turn=turn),
                                          low=engine.first_token_id, high=engine.vocab_size)
                results.append(await engine.stream(prompt_token_ids=prompt, max_tokens=p.output_len,
                                                   session=s, turn=turn))
            return results

        per_session = await asyncio.gather(*(session(s) for s in range(ctx.concurrency)))
        return [r for rs in per_session for r in rs]
