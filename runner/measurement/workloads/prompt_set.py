"""A prompt set from a file (ShareGPT, MT-Bench / Spec-Bench questions, plain JSONL; runner.measurement.prompt_sets):
each conversation is a session whose turns are sent one after the other, the history (earlier turns and the
model's own answers) re-sent each turn; every request keeps its conversation's category, so the report can give
acceptance and decode speed per category, and re-weighted to a production `mix`.

Closed loop: `concurrency` sessions at a time, each taking the next conversation when its last one is done.
Open loop (`arrival: poisson | gamma`): conversations start on the clock at `request_rate` (sessions per
second), their turns closed-loop inside. Output is `output_len` tokens a turn (EOS ignored), so that every
category decodes the same length.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Optional

from runner.measurement.prompt_sets import (PromptFormat, PromptSetError, UNCATEGORISED, categories,
                                            read_prompt_file, stratified_sample)
from runner.measurement.workloads.base import DECODE_SPEED, RequestResult, TrialContext, Workload
from runner.measurement.workloads.open_loop import WARMUP_ARRIVALS, OpenLoopParams, on_schedule


@dataclass(kw_only=True)
class PromptSetParams(OpenLoopParams):
    prompt_format: str = "jsonl"  # sharegpt | openai | mt_bench | spec_bench | jsonl
    output_len: int = 64
    # A longer prompt (history included) keeps its last max_prompt_tokens tokens (null: max_model_len − output_len).
    max_prompt_tokens: Optional[int] = None
    # N conversations drawn with `seed`, each category keeping its share of the file (null: the whole file).
    num_sessions: Optional[int] = None
    max_turns: Optional[int] = None  # at most this many turns of each conversation (null: all)
    # A production mix, category → weight: the report re-weights the per-category figures to it.
    mix: Optional[dict[str, Any]] = None
    arrivals_field = "num_sessions"

    def conversations(self):
        whole = read_prompt_file(self.prompt_file, self.prompt_format).conversations
        return stratified_sample(whole, self.num_sessions, seed=self.seed)

    def source_columns(self, *, max_model_len: int) -> dict:
        return {"source_skipped": read_prompt_file(self.prompt_file, self.prompt_format).skipped_messages}

    def arrivals(self) -> int:
        return len(self.conversations())

    def max_sequence_tokens(self) -> int:
        return (self.max_prompt_tokens or 1) + self.output_len

    def validate(self) -> list[str]:
        errors = super().validate()
        if self.prompt_format not in tuple(PromptFormat):
            return errors + [f"prompt_format={self.prompt_format!r} is unknown; valid: "
                             f"{', '.join(PromptFormat)}"]
        if not self.prompt_file:
            return errors + [f"prompt_file=null: prompt_set reads a {self.prompt_format} file"]
        try:
            present = categories(read_prompt_file(self.prompt_file, self.prompt_format).conversations)  # whole file
        except PromptSetError as exc:
            return errors + [f"prompt_file={exc}"]  # the message starts with the file's path
        return errors + check_mix(self.mix, present)

    def warmup_variant(self) -> "PromptSetParams":
        # First turns only: every shape of the batch, not the whole set a second time.
        warm = dataclasses.replace(self, max_turns=1)
        if self.open_loop:
            warm = dataclasses.replace(warm, request_rate=math.inf,
                                       num_sessions=min(self.arrivals(), WARMUP_ARRIVALS))
        return warm

    def mix_weights(self) -> Optional[dict[str, float]]:
        return None if not self.mix else {str(k): float(v) for k, v in self.mix.items()}


def check_mix(mix, present: list[str]) -> list[str]:
    """A mix names categories the file has, with weights ≥ 0 that do not all vanish."""
    if mix is None:
        return []
    if not isinstance(mix, dict) or not mix:
        return [f"mix={mix!r} must be a mapping category → weight, e.g. {{{present[0]}: 1}}"]
    text = "{" + ",".join(f"{k}:{v}" for k, v in mix.items()) + "}"
    errors = [f"mix={text} names category {str(name)!r}, which the prompt file lacks; it has: {', '.join(present)}"
              for name in mix if str(name) not in present]
    errors += [f"mix={text}: the weight of {name!r} must be a number ≥ 0" for name, weight in mix.items()
               if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight < math.inf]
    if not errors and not sum(float(w) for w in mix.values()) > 0:
        errors.append(f"mix={text}: every weight is 0")
    return errors


class PromptSet(Workload):
    name = "prompt_set"
    params_type = PromptSetParams
    description = "conversations from a ShareGPT / MT-Bench / Spec-Bench / JSONL file, each request with its category"
    deciding = DECODE_SPEED

    async def run(self, ctx: TrialContext) -> list[RequestResult]:
        p: PromptSetParams = ctx.params  # type: ignore[assignment]
        engine = ctx.engine
        conversations = p.conversations()
        keep = p.max_prompt_tokens or engine.max_model_len - p.output_len
        # Every turn is tokenized before the window opens; only the model's answers are appended in it.
        turns = [[list(t) if isinstance(t, tuple) else engine.encode_text(t) for t in c.turns[:p.max_turns]]
                 for c in conversations]

        async def session(s: int, sender=engine) -> list[RequestResult]:
            history: list[int] = []
            results: list[RequestResult] = []
            for turn, user in enumerate(turns[s]):
                history = history + (results[-1].output_token_ids if results else []) + user
                result = await sender.stream(prompt_token_ids=history[-keep:],
                                             max_tokens=p.output_len, session=s, turn=turn)
                result.category = conversations[s].category or UNCATEGORISED
                results.append(result)
            return results

        await ctx.window.begin()
        if p.open_loop:
            results = await on_schedule(engine=engine, offsets=p.schedule(seed=ctx.seed),
                                        max_concurrency=p.max_concurrency, arrival=session)
        else:
            queue = iter(range(len(conversations)))

            async def client() -> list[RequestResult]:
                mine: list[RequestResult] = []
                for s in queue:  # one shared iterator: each client takes the next conversation
                    mine.extend(await session(s))
                return mine

            per_client = await asyncio.gather(*(client() for _ in range(ctx.concurrency)))
            results = sorted((r for rs in per_client for r in rs), key=lambda r: (r.session, r.turn))
        await ctx.window.end()
        return results
