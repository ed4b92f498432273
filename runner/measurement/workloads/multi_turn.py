"""S sessions (= concurrency) × T turns, as a chat client: the whole history is re-sent each turn.

Turn 0 sends `context_len` tokens; each later turn sends the previous prompt,
the previous answer and `turn_tokens` new tokens. With prefix caching, turn ≥ 1
finds the history in the cache (cached tokens > 0); without it, it re-prefills
the whole history. The figure is TTFT per turn (turn 1 is the first follow-up).
Open loop (`arrival: poisson | gamma`): `num_sessions` sessions start on a seeded schedule at
`request_rate` (sessions per second); the turns inside a session stay closed-loop.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from runner.measurement.prompts import derived_seed, prompt_maker
from runner.measurement.workloads.base import TURN2_TTFT_P50, RequestResult, TrialContext, Workload
from runner.measurement.workloads.open_loop import OpenLoopParams, on_schedule


@dataclass(kw_only=True)
class MultiTurnParams(OpenLoopParams):
    length_fields = ("context_len", "turn_tokens")
    context_len: int = 4096
    turns: int = 3
    turn_tokens: int = 1024
    output_len: int = 64
    num_sessions: int = 8  # open loop only: sessions on the schedule (closed: concurrency)
    arrivals_field = "num_sessions"

    def max_sequence_tokens(self) -> int:
        return self.context_len + (self.turns - 1) * (self.output_len + self.turn_tokens) + self.output_len

    def tokens_decoded_in_turn(self) -> int:
        return self.turns * self.output_len


class MultiTurn(Workload):
    name = "multi_turn"
    params_type = MultiTurnParams
    description = "S sessions × T turns from context_len tokens, each turn adds the answer + turn_tokens"
    deciding = TURN2_TTFT_P50

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: MultiTurnParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        maker = prompt_maker(p, engine)

        sessions = p.arrivals() if p.open_loop else ctx.concurrency
        # The user's side of every turn exists before the window opens; only the model's answers are appended.
        turns = [[maker.tokens(length=p.context_len if turn == 0 else p.turn_tokens,
                               seed=derived_seed(base=ctx.seed, session=s, turn=turn)) for turn in range(p.turns)]
                 for s in range(sessions)]

        async def session(s: int, sender=engine) -> list[RequestResult]:
            history: list[int] = []
            results: list[RequestResult] = []
            for turn, user in enumerate(turns[s]):
                history = history + (results[-1].output_token_ids if results else []) + user
                results.append(await sender.stream(prompt_token_ids=history, max_tokens=p.output_len,
                                                   session=s, turn=turn))
            return results

        await ctx.window.begin()
        if p.open_loop:
            results = await on_schedule(engine=engine, offsets=p.schedule(seed=derived_seed(
                base=ctx.seed, salt="arrivals")), max_concurrency=p.max_concurrency, arrival=session)
            await ctx.window.end()
            return results
        per_session = await asyncio.gather(*(session(s) for s in range(sessions)))
        await ctx.window.end()
        return [r for rs in per_session for r in rs]
