"""S sessions (= concurrency) × T turns, as a chat client: the whole history is re-sent each turn.

Turn 0 sends `context_len` tokens; each later turn sends the previous prompt,
the previous answer and `turn_tokens` new tokens. With prefix caching, turn ≥ 1
finds the history in the cache (cached tokens > 0); without it, it re-prefills
the whole history. The figure is TTFT per turn (turn 1 is the first follow-up).
Open loop (`arrival: poisson | gamma`): `num_sessions` sessions start on a seeded schedule at
`request_rate` (sessions per second); the turns inside a session stay closed-loop.
Each session is a chat (runner.traffic.chat): with the tokenizer's chat template (`chat_template: auto`) the
turns are user messages and the answers assistant messages, the template's tokens added around them; `raw` sends
the tokens alone.
"""
from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field
from typing import Optional

from runner.traffic.chat import ChatRenderer, ChatTemplate, check_chat_template
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
    chat_template: str = ChatTemplate.AUTO  # auto: the tokenizer's chat template where it has one; raw: none
    # Set on the driver (with_prompts): the tokens the chat template adds to a whole session.
    _template_tokens: Optional[int] = field(default=None, repr=False, compare=False)
    arrivals_field = "num_sessions"

    def max_sequence_tokens(self) -> int:
        return (self.context_len + (self.turns - 1) * (self.output_len + self.turn_tokens) + self.output_len
                + (self._template_tokens or 0))

    def with_prompts(self, tokenizer) -> "MultiTurnParams":
        # Token contents are spliced, not tokenized: the template's share is the same for any content.
        session = ChatRenderer(tokenizer, self.chat_template).session([(0,)] * self.turns)
        return dataclasses.replace(self, _template_tokens=sum(map(len, session.segments)) - self.turns)

    def prompt_problems(self, *, tokenizer, max_model_lens: list[int]) -> list[str]:
        need = self.with_prompts(tokenizer).max_sequence_tokens()
        return [f"a session's last turn needs {need} tokens with the chat template's, over max_model_len "
                f"{n} (fix: a smaller context_len or turn_tokens, chat_template=raw, or a larger "
                f"sweep.grid.max_model_len)" for n in max_model_lens if need > n]

    def validate(self) -> list[str]:
        return super().validate() + check_chat_template(self.chat_template)

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

        renderer = engine.chat_renderer(p.chat_template)
        rendered = [renderer.session(t) for t in turns]

        async def session(s: int, sender=engine) -> list[RequestResult]:
            history: list[int] = []
            results: list[RequestResult] = []
            for turn, segment in enumerate(rendered[s].segments):
                history = history + (results[-1].output_token_ids if results else []) + list(segment)
                result = await sender.stream(prompt_token_ids=history, max_tokens=p.output_len, session=s, turn=turn)
                result.prompt_rendering = rendered[s].rendering.value
                results.append(result)
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
