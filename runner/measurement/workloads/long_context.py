"""One prompt near max_model_len with a seeded needle: first TTFT, then repeat-prefix TTFT.

The first request sends the long context (a seeded needle at `needle_depth`)
and a question; the repeat sends the same context with a different closing
question, so only the tail differs and prefix caching can reuse the rest.
`context_len: null` fills max_model_len less the output and the question.
All sessions send their first request, then all send their repeat. The trial's
latency and counter columns cover the first requests; repeats are in the requests
table with phase "repeat".
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Optional

from runner.measurement.prompts import derived_seed, insert_at, needle, prompt_maker
from runner.measurement.workloads.base import FIRST_REQUEST_TTFT_P50, RequestResult, TrialContext, Workload, WorkloadParams

QUESTION_TOKENS = 16  # the closing question's length for synthetic prompts (text ones are tokenized)
# Room left for a tokenized question when context_len fills the model length.
TAIL_RESERVE = 64


@dataclass(kw_only=True)
class LongContextParams(WorkloadParams):
    length_fields = ("context_len",)
    context_len: Optional[int] = None
    output_len: int = 32
    needle_depth: float = 0.5

    def max_sequence_tokens(self) -> int:
        return (self.context_len or 0) + TAIL_RESERVE + self.output_len

    def tokens_decoded_in_turn(self) -> int:
        return 2 * self.output_len  # the first request, then its repeat

    def validate(self) -> list[str]:
        errors = super().validate()
        if not 0.0 <= self.needle_depth <= 1.0:
            errors.append(f"needle_depth={self.needle_depth} must be within [0, 1]")
        return errors

    def measured_phases(self) -> tuple[str, ...]:
        return ("first",)


class LongContext(Workload):
    name = "long_context"
    params_type = LongContextParams
    description = "a prompt near max_model_len with a seeded needle; first TTFT then repeat-prefix TTFT"
    deciding = FIRST_REQUEST_TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: LongContextParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        maker = prompt_maker(p, engine)
        length = p.context_len or engine.max_model_len - p.output_len - TAIL_RESERVE

        def prompts(s: int) -> list[list[int]]:
            seed = derived_seed(base=ctx.seed, session=s)
            fact, question = needle(seed=seed)
            context = insert_at(tokens=maker.tokens(length=length, seed=seed),
                                piece=maker.phrase(text=fact, length=8, seed=seed + 1), depth=p.needle_depth)
            tails = [maker.phrase(text=question if turn == 0 else question.replace("what", "which"),
                                  length=QUESTION_TOKENS, seed=seed + 2 + turn) for turn in range(2)]
            return [context + tail[:TAIL_RESERVE] for tail in tails]

        per_session = [prompts(s) for s in range(ctx.concurrency)]
        results: list[RequestResult] = []
        # All first requests, then all repeats: the window (and so the counters) covers the first phase alone.
        for turn, phase in enumerate(("first", "repeat")):
            if turn == 0:
                await ctx.window.begin()
            results.extend(await asyncio.gather(*(
                engine.stream(prompt_token_ids=pair[turn], max_tokens=p.output_len, session=s, turn=turn,
                              phase=phase) for s, pair in enumerate(per_session))))
            if turn == 0:
                await ctx.window.end()
        return results
