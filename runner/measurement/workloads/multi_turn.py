"""S sessions (= concurrency) × T turns, as a chat client: the whole history is re-sent each turn.

Turn 0 sends `context_len` tokens; each later turn sends the previous prompt,
the previous answer and `turn_tokens` new tokens. With prefix caching, turn ≥ 1
finds the history in the cache (cached tokens > 0); without it, it re-prefills
the whole history. The figure is TTFT per turn (turn 1 is the first follow-up).
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.workloads.base import TURN2_TTFT_P50, RequestResult, TrialContext, Workload, WorkloadParams


@dataclass(kw_only=True)
class MultiTurnParams(WorkloadParams):
    context_len: int = 4096
    turns: int = 3
    turn_tokens: int = 1024
    output_len: int = 64

    def max_sequence_tokens(self) -> int:
        return self.context_len + (self.turns - 1) * (self.output_len + self.turn_tokens) + self.output_len


class MultiTurn(Workload):
    name = "multi_turn"
    params_type = MultiTurnParams
    description = "S sessions × T turns from context_len tokens, each turn adds the answer + turn_tokens"
    deciding = TURN2_TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: MultiTurnParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        maker = prompt_maker(p, engine)

        # The user's side of every turn exists before the window opens; only the model's answers are appended.
        turns = [[maker.tokens(length=p.context_len if turn == 0 else p.turn_tokens,
                               seed=derived_seed(base=ctx.seed, session=s, turn=turn)) for turn in range(p.turns)]
                 for s in range(ctx.concurrency)]

        async def session(s: int) -> list[RequestResult]:
            history: list[int] = []
            results: list[RequestResult] = []
            for turn, user in enumerate(turns[s]):
                history = history + (results[-1].output_token_ids if results else []) + user
                results.append(await engine.stream(prompt_token_ids=history, max_tokens=p.output_len,
                                                   session=s, turn=turn))
            return results

        await ctx.window.begin()
        per_session = await asyncio.gather(*(session(s) for s in range(ctx.concurrency)))
        await ctx.window.end()
        return [r for rs in per_session for r in rs]
