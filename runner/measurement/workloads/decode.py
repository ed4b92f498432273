"""Cold-prompt decode: N concurrent sessions, each a fresh prompt.

`api: async` streams each request through AsyncLLM (client-side timings, one
client per session); `api: offline` hands all N × requests_per_session prompts
to one `LLM.generate` call (throughput without client scheduling).
Open loop (`arrival: poisson | gamma`): `num_requests` cold prompts leave on a seeded schedule at
`request_rate`, whether or not earlier ones finished (runner.measurement.workloads.open_loop).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.workloads.base import DECODE_SPEED, RequestResult, TrialContext, Workload
from runner.measurement.workloads.open_loop import OpenLoopParams, on_schedule


@dataclass(kw_only=True)
class DecodeParams(OpenLoopParams):
    length_fields = ("input_len",)
    input_len: int = 128
    output_len: int = 64
    requests_per_session: int = 1
    num_requests: int = 32  # open loop only: requests on the schedule (closed: concurrency × requests_per_session)

    def max_sequence_tokens(self) -> int:
        return self.input_len + self.output_len

    def tokens_decoded_in_turn(self) -> int:
        return self.requests_per_session * self.output_len


class Decode(Workload):
    name = "decode"
    params_type = DecodeParams
    description = "cold prompts of input_len tokens, output_len tokens each, N sessions at once"
    deciding = DECODE_SPEED
    apis = ("async", "offline")
    probe_stops = True  # its open-loop driver takes the trial's probe (stop_when_decided)

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: DecodeParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        maker = prompt_maker(p, engine)
        if p.open_loop:
            return await self._open_loop(ctx, p, maker)

        # Every prompt exists before the window opens: tokenizing is not part of any figure.
        keys = [(s, turn) for s in range(ctx.concurrency) for turn in range(p.requests_per_session)]
        prompts = {key: maker.tokens(length=p.input_len, seed=derived_seed(base=ctx.seed, session=key[0],
                                                                           turn=key[1])) for key in keys}
        await ctx.window.begin()
        if ctx.api == "offline":
            results = await engine.generate_batch(prompts=[prompts[k] for k in keys], max_tokens=p.output_len,
                                                  sessions=[s for s, _ in keys])
            for r, (_, turn) in zip(results, keys):
                r.turn = turn
            await ctx.window.end()
            return results

        async def session(s: int) -> list[RequestResult]:
            results = []
            for turn in range(p.requests_per_session):
                results.append(await engine.stream(prompt_token_ids=prompts[(s, turn)], max_tokens=p.output_len,
                                                   session=s, turn=turn))
            return results

        per_session = await asyncio.gather(*(session(s) for s in range(ctx.concurrency)))
        await ctx.window.end()
        return [r for rs in per_session for r in rs]

    async def _open_loop(self, ctx: TrialContext, p: DecodeParams, maker) -> list[RequestResult]:
        prompts = [maker.tokens(length=p.input_len, seed=derived_seed(base=ctx.seed, session=i))
                   for i in range(p.arrivals())]
        offsets = p.schedule(seed=derived_seed(base=ctx.seed, salt="arrivals"))

        async def arrival(i: int, sender) -> list[RequestResult]:
            return [await sender.stream(prompt_token_ids=prompts[i], max_tokens=p.output_len, session=i)]

        await ctx.window.begin()
        results = await on_schedule(engine=ctx.engine, offsets=offsets, max_concurrency=p.max_concurrency,
                                    arrival=arrival, probe=ctx.probe)
        await ctx.window.end()
        return results
