"""A prompt set from a file (ShareGPT, MT-Bench / Spec-Bench questions, plain JSONL; runner.traffic.prompt_sets):
each conversation is a session whose turns are sent one after the other, the history (earlier turns and the
model's own answers) re-sent each turn; every request keeps its conversation's category, so the report can give
acceptance and decode speed per category, and re-weighted to a production `mix`.

Closed loop: `concurrency` sessions at a time, each taking the next conversation when its last one is done.
Open loop (`arrival: poisson | gamma`): conversations start on the clock at `request_rate` (sessions per
second), their turns closed-loop inside. Output is `output_len` tokens a turn (EOS ignored), so that every
category decodes the same length. Prompts are rendered as chat requests (runner.traffic.chat; `chat_template:
raw` for plain text); a prompt over its limit is refused before start unless `over_length` says skip (that turn
and its conversation's later ones are not sent) or clip (the prompt keeps its last tokens), counted per trial.
The file is read and rendered on the driver, once per command; its sessions reach each node once (Ray's object
store, runner.scheduling.shipping), so no node but the driver needs the file.
"""
from __future__ import annotations

import asyncio
import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from runner.traffic.chat import ChatRenderer, ChatTemplate, RenderedSession, check_chat_template
from runner.traffic.prompt_sets import (Conversation, PromptFormat, PromptSetError, UNCATEGORISED, categories,
                                            read_prompt_file, stratified_sample)
from runner.measurement.workloads.base import DECODE_SPEED, RequestResult, TrialContext, Workload
from runner.measurement.workloads.open_loop import WARMUP_ARRIVALS, OpenLoopParams, on_schedule
from runner.measurement.shipped import resolved
from runner.traffic.over_length import OverLength, check_over_length


@dataclass(frozen=True, kw_only=True)
class PreparedSession:
    """One conversation as the engine gets it: rendered with the model's tokenizer, with its place and category."""

    where: str
    category: Optional[str]
    rendered: RenderedSession


@dataclass(frozen=True, kw_only=True)
class PreparedPrompts:
    """A prompt set prepared on the driver (the sample rendered once per command, runner.traffic.chat) and shipped
    to the actors once per node: no node but the driver needs the file, no actor renders it again."""

    sessions: tuple[PreparedSession, ...]
    skipped_messages: int  # the file's null or non-text messages
    # The longest prompt by (output_len, max_turns, num_sessions): the plan asks for it once per trial.
    _longest: dict = field(default_factory=dict, compare=False, repr=False)

    def longest_prompt(self, *, output_len: int, max_turns: Optional[int], num_sessions: Optional[int]) -> int:
        key = (output_len, max_turns, num_sessions)
        if key not in self._longest:  # a session's prompts only grow: its last turn sent is its longest
            self._longest[key] = max((s.rendered.prompt_lengths(output_len=output_len)[:max_turns][-1]
                                      for s in self.sessions[:num_sessions]), default=0)
        return self._longest[key]


# Prepared prompt sets by content, sample and renderer (the last few: a sweep's points share one or two files).
_PREPARED: dict[tuple, PreparedPrompts] = {}
_PREPARED_KEEP = 4


@dataclass(kw_only=True)
class PromptSetParams(OpenLoopParams):
    prompt_format: str = "jsonl"  # sharegpt | openai | mt_bench | spec_bench | jsonl
    output_len: int = 64
    # auto: each conversation rendered with the tokenizer's chat template (system prompt, user turns, the model's
    # answers as assistant messages), as a chat request is; raw: turns and answers concatenated as plain tokens.
    chat_template: str = ChatTemplate.AUTO
    # The longest prompt (history included, after the template) a request may send (null: max_model_len −
    # output_len). One over it is refused before start (over_length: refuse), not sent with its conversation's
    # later turns (skip), or keeps its last max_prompt_tokens tokens (clip); counted per trial.
    max_prompt_tokens: Optional[int] = None
    over_length: str = OverLength.REFUSE
    # N conversations drawn with `seed`, each category keeping its share of the file (null: the whole file).
    num_sessions: Optional[int] = None
    max_turns: Optional[int] = None  # at most this many turns of each conversation (null: all)
    # A production mix, category → weight: the report re-weights the per-category figures to it.
    mix: Optional[dict[str, Any]] = None
    # Set on the driver (with_prompts): PreparedPrompts, or its runner.measurement.shipped.ObjectStoreRef.
    _prompts: Any = field(default=None, repr=False, compare=False)
    arrivals_field = "num_sessions"

    def conversations(self) -> list[Conversation]:
        """The sample of the file's conversations this point sends (read on the driver)."""
        whole = read_prompt_file(self.prompt_file, self.prompt_format).conversations
        return stratified_sample(whole, self.num_sessions, seed=self.seed)

    def prepare(self, renderer: ChatRenderer) -> PreparedPrompts:
        """The sample rendered: once per process for the same file content (its digest, whatever its path), sample
        and renderer, so that a command's checks, plans and stages render a file once."""
        read = read_prompt_file(self.prompt_file, self.prompt_format)
        key = (read.digest, str(self.prompt_format), self.num_sessions, self.seed, self.max_turns, renderer.identity)
        if key not in _PREPARED:
            while len(_PREPARED) >= _PREPARED_KEEP:
                _PREPARED.pop(next(iter(_PREPARED)))
            _PREPARED[key] = PreparedPrompts(skipped_messages=read.skipped_messages, sessions=tuple(
                PreparedSession(where=c.where, category=c.category,
                                rendered=renderer.session(c.turns[:self.max_turns], system=c.system))
                for c in self.conversations()))
        return _PREPARED[key]

    def prepared(self, renderer: Optional[Callable[[], ChatRenderer]] = None) -> list[PreparedSession]:
        """The sessions to send: the driver's (its first max_turns turns, the first num_sessions: a warm-up's
        head), or, where none were shipped, rendered here with `renderer()`."""
        if self._prompts is None:
            if renderer is None:
                raise ValueError("prompt_set: no prompts prepared (with_prompts) and no renderer")
            return list(self.prepare(renderer()).sessions)
        sessions = resolved(self._prompts).sessions[:self.num_sessions]
        if self.max_turns is None:
            return list(sessions)
        return [s if len(s.rendered.segments) <= self.max_turns else dataclasses.replace(
            s, rendered=dataclasses.replace(s.rendered, segments=s.rendered.segments[:self.max_turns]))
                for s in sessions]

    def _turn_lengths(self) -> list[list[int]]:
        return [s.rendered.prompt_lengths(output_len=self.output_len) for s in self.prepared()]

    def source_columns(self, *, max_model_len: int) -> dict:
        if self._prompts is None:
            return {"source_skipped": read_prompt_file(self.prompt_file, self.prompt_format).skipped_messages}
        limit = self.prompt_limit(max_model_len)
        over = sum(length > limit for turns in self._turn_lengths() for length in turns)
        return {"source_skipped": resolved(self._prompts).skipped_messages,
                "over_length_skipped": over if self.over_length == OverLength.SKIP else 0,
                "over_length_clipped": over if self.over_length == OverLength.CLIP else 0}

    def arrivals(self) -> int:
        if self._prompts is not None:
            return len(resolved(self._prompts).sessions[:self.num_sessions])
        return len(self.conversations())

    def max_sequence_tokens(self) -> int:
        if self._prompts is not None:
            longest = resolved(self._prompts).longest_prompt(output_len=self.output_len, max_turns=self.max_turns,
                                                             num_sessions=self.num_sessions)
            return min(longest, self.max_prompt_tokens or longest) + self.output_len
        return (self.max_prompt_tokens or 1) + self.output_len

    def with_prompts(self, tokenizer) -> "PromptSetParams":
        return dataclasses.replace(self, _prompts=self.prepare(ChatRenderer(tokenizer, self.chat_template)))

    def payload(self):
        return self._prompts

    def with_payload(self, payload) -> "PromptSetParams":
        return dataclasses.replace(self, _prompts=payload)

    def prompt_problems(self, *, tokenizer, max_model_lens: list[int]) -> list[str]:
        """Prompts over the limit when over_length=refuse: each with its length, file and line, and the fix."""
        if self.over_length == OverLength.CLIP:
            return []
        renderer = ChatRenderer(tokenizer, self.chat_template)
        lengths = [(s.where, s.rendered.prompt_lengths(output_len=self.output_len))
                   for s in self.prepare(renderer).sessions]  # rendered once for every limit and for the plan
        if self.over_length == OverLength.SKIP:
            return [f"every conversation's first prompt is over {self.prompt_limit(n)} tokens on max_model_len {n}: "
                    f"over_length=skip leaves nothing to send (fix: sweep.grid.max_model_len=[{fits}] or "
                    f"over_length=clip)" for n in max_model_lens
                    if (fits := self._fits(lengths, n)) is not None]
        return [problem for n in max_model_lens
                for problem in self._over(lengths, max_model_len=n, rendering=renderer.rendering.value)]

    def _fits(self, lengths: list[tuple[str, list[int]]], max_model_len: int) -> Optional[int]:
        """Where no first turn fits: a max_model_len (a power of two) that holds the shortest; else None."""
        shortest = min(turns[0] for _, turns in lengths)
        if shortest <= self.prompt_limit(max_model_len):
            return None
        return 1 << (shortest + self.output_len - 1).bit_length()

    def _over(self, lengths: list[tuple[str, list[int]]], *, max_model_len: int, rendering: str) -> list[str]:
        limit = self.prompt_limit(max_model_len)
        over: list[tuple[str, int]] = []  # (where, tokens): each conversation's first prompt over the limit
        for where, turns in lengths:
            for turn, length in enumerate(turns):
                if length > limit:
                    over.append((f"{where} turn {turn + 1}", length))
                    break
        if not over:
            return []
        shown = "; ".join(f"{where}: {n} tokens" for where, n in over[:3])
        shown += f"; and {len(over) - 3} more" if len(over) > 3 else ""
        where = ("max_prompt_tokens" if self.max_prompt_tokens else
                 f"max_model_len {max_model_len} − output_len {self.output_len}")
        fits = 1 << (max(n for _, n in over) + self.output_len - 1).bit_length()  # a power of two that holds it
        return [f"{len(over)} conversation(s) send a prompt ({rendering}, history included) over "
                f"{limit} tokens ({where}): {shown} (fix: sweep.grid.max_model_len=[{fits}], fewer "
                f"max_turns, over_length=skip to leave those turns out, or over_length=clip to keep each prompt's last "
                f"{limit} tokens; both counted)"]

    def prompt_limit(self, max_model_len: int) -> int:
        return self.max_prompt_tokens or max_model_len - self.output_len

    def validate(self) -> list[str]:
        errors = super().validate() + check_chat_template(self.chat_template) + check_over_length(self.over_length)
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
        # Rendered before the window opens (on the driver, where it shipped them); only the model's answers are
        # appended in it.
        sessions = p.prepared(lambda: engine.chat_renderer(p.chat_template))
        limit = p.prompt_limit(engine.max_model_len)

        async def session(s: int, sender=engine) -> list[RequestResult]:
            history: list[int] = []
            results: list[RequestResult] = []
            for turn, segment in enumerate(sessions[s].rendered.segments):
                history = history + (results[-1].output_token_ids if results else []) + list(segment)
                clipped = max(len(history) - limit, 0)
                if clipped and p.over_length == OverLength.SKIP:
                    break  # this turn and the later ones (a longer history still) are not sent, counted
                if clipped and p.over_length != OverLength.CLIP:
                    raise ValueError(f"{sessions[s].where} turn {turn + 1}: the prompt is {len(history)} tokens, "
                                     f"over {limit} (fix: over_length=skip or =clip, or a larger max_model_len)")
                result = await sender.stream(prompt_token_ids=history[clipped:],
                                             max_tokens=p.output_len, session=s, turn=turn)
                result.category = sessions[s].category or UNCATEGORISED
                result.prompt_rendering = sessions[s].rendered.rendering.value
                result.prompt_clipped_tokens = clipped
                results.append(result)
            return results

        await ctx.window.begin()
        if p.open_loop:
            results = await on_schedule(engine=engine, offsets=p.schedule(seed=ctx.seed),
                                        max_concurrency=p.max_concurrency, arrival=session)
        else:
            queue = iter(range(len(sessions)))

            async def client() -> list[RequestResult]:
                mine: list[RequestResult] = []
                for s in queue:  # one shared iterator: each client takes the next conversation
                    mine.extend(await session(s))
                return mine

            per_client = await asyncio.gather(*(client() for _ in range(ctx.concurrency)))
            results = sorted((r for rs in per_client for r in rs), key=lambda r: (r.session, r.turn))
        await ctx.window.end()
        return results
