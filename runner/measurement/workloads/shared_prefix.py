"""Single turn, S sessions (= concurrency) sharing a prefix of P tokens, each with its own suffix.

The figure is TTFT per session: with prefix caching the sessions after the first
reuse the prefix's KV blocks (only full blocks are cached), without it each
re-prefills P tokens. `warm_prefix` sends the prefix once before the sessions
(phase "warmup"), so that every measured session can hit the cache.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.workloads.base import TTFT_P50, RequestResult, TrialContext, Workload, WorkloadParams


@dataclass(kw_only=True)
class SharedPrefixParams(WorkloadParams):
    length_fields = ("prefix_len", "suffix_len")
    prefix_len: int = 4096
    suffix_len: int = 128
    output_len: int = 32
    warm_prefix: bool = False

    def max_sequence_tokens(self) -> int:
        return self.prefix_len + self.suffix_len + self.output_len


class SharedPrefix(Workload):
    name = "shared_prefix"
    params_type = SharedPrefixParams
    description = "S sessions at once, a shared prefix of prefix_len tokens + a unique suffix each; TTFT per session"
    deciding = TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: SharedPrefixParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        maker = prompt_maker(p, engine)
        prefix = maker.tokens(length=p.prefix_len, seed=derived_seed(base=ctx.seed, salt="prefix"))
        prompts = [prefix + maker.tokens(length=p.suffix_len, seed=derived_seed(base=ctx.seed, session=s,
                                                                                  salt="suffix"))
                   for s in range(ctx.concurrency)]
        results: list[RequestResult] = []
        if p.warm_prefix:
            results.append(await engine.stream(prompt_token_ids=prefix, max_tokens=1, session=-1, phase="warmup"))
        await ctx.window.begin()
        results.extend(await asyncio.gather(*(
            engine.stream(prompt_token_ids=prompt, max_tokens=p.output_len, session=s)
            for s, prompt in enumerate(prompts))))
        await ctx.window.end()
        return results
