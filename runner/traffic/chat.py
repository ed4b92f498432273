"""Conversations rendered as production renders chat requests: the tokenizer's chat template (system prompt and
roles kept, the history as messages: user turns and the model's own earlier answers as assistant messages), or
raw text. Pure apart from the tokenizer handed in (a Hugging Face tokenizer: `apply_chat_template`, `encode`).

A session is rendered once, before the measure window opens, into one token segment per turn: segment t is what
the client sends after the model's answer to turn t−1 (the end of that assistant message, user turn t, the
assistant header). Inside the window a turn's prompt is the previous prompt + the model's answer token ids +
segment t: no templating cost lands in a figure. The answers are spliced where the template puts an assistant
message's content (a placeholder marks the spot), which is where a chat client's re-sent history puts them.
Token-id contents (a file's `prompt_token_ids`, synthetic prompts) are spliced the same way.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from typing import Optional, Protocol, Sequence, Union

Content = Union[str, Sequence[int]]


class ChatTemplate(enum.StrEnum):
    """A workload's `chat_template` key: what to render prompts with."""

    AUTO = "auto"  # the tokenizer's chat template where it has one, else raw text
    RAW = "raw"  # turns tokenized as they are, a conversation's turns and answers concatenated


class Rendering(enum.StrEnum):
    """What was applied to a request's prompt (the `prompt_rendering` column)."""

    CHAT_TEMPLATE = "chat_template"
    RAW = "raw"


def check_chat_template(value) -> list[str]:
    if value not in tuple(ChatTemplate):
        return [f"chat_template={value!r} is unknown; valid: {', '.join(ChatTemplate)} (auto: the tokenizer's "
                f"chat template where it has one)"]
    return []


class Tokenizer(Protocol):
    chat_template: Optional[str]

    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def apply_chat_template(self, conversation, **kwargs): ...


@dataclass(frozen=True, kw_only=True)
class RenderedSession:
    """One conversation ready to send: `segments[t]` follows the model's answer to turn t−1."""

    rendering: Rendering
    segments: tuple[tuple[int, ...], ...]

    def prompt_lengths(self, *, output_len: int) -> list[int]:
        """Each turn's prompt length when every answer is `output_len` tokens (EOS ignored)."""
        lengths, total = [], 0
        for t, segment in enumerate(self.segments):
            total += (output_len if t else 0) + len(segment)
            lengths.append(total)
        return lengths


_MARK = "\u27e6{}\u27e7"  # ⟦n⟧: a placeholder no template rewrites (no whitespace to strip, no markup)
_MARKS = re.compile("\u27e6(\\d+)\u27e7")


class ChatRenderer:
    """Renders sessions with one tokenizer under one `chat_template` setting."""

    def __init__(self, tokenizer: Tokenizer, mode: str = ChatTemplate.AUTO):
        self.tokenizer = tokenizer
        self.mode = ChatTemplate(mode)
        has_template = bool(getattr(tokenizer, "chat_template", None))
        self.rendering = Rendering.CHAT_TEMPLATE if self.mode == ChatTemplate.AUTO and has_template \
            else Rendering.RAW

    @property
    def identity(self) -> tuple:
        """What a rendering depends on besides the conversation: the tokenizer (its files and template), the mode."""
        tokenizer = self.tokenizer
        return (type(tokenizer).__qualname__, str(getattr(tokenizer, "name_or_path", "")),
                str(getattr(tokenizer, "chat_template", None)), getattr(tokenizer, "vocab_size", None),
                self.rendering.value)

    def encode(self, content: Content) -> list[int]:
        return list(content) if not isinstance(content, str) else list(
            self.tokenizer.encode(content, add_special_tokens=False))

    def session(self, turns: Sequence[Content], *, system: Optional[str] = None) -> RenderedSession:
        if not turns:
            raise ValueError("a session needs at least one turn")
        if self.rendering == Rendering.RAW:
            first = (self.encode(system + "\n") if system else []) + self.encode(turns[0])
            segments = [first] + [self.encode(t) for t in turns[1:]]
        else:
            segments = self._templated(turns, system=system)
        return RenderedSession(rendering=self.rendering, segments=tuple(tuple(s) for s in segments))

    def _templated(self, turns: Sequence[Content], *, system: Optional[str]) -> list[list[int]]:
        spliced: list[Sequence[int]] = []  # token-id contents, by placeholder number

        def content(value: Content) -> str:
            if isinstance(value, str):
                return value
            spliced.append(value)
            return _MARK.format(len(spliced) - 1)

        messages = [{"role": "system", "content": system}] if system else []
        answers = []
        for t, turn in enumerate(turns):
            messages.append({"role": "user", "content": content(turn)})
            if t < len(turns) - 1:
                spliced.append(())  # the model's answer: ends the segment, its tokens come in the window
                answers.append(len(spliced) - 1)
                messages.append({"role": "assistant", "content": _MARK.format(answers[-1])})
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        segments: list[list[int]] = [[]]
        position = 0
        for match in _MARKS.finditer(text):
            segments[-1] += self.encode(text[position:match.start()]) if match.start() > position else []
            number = int(match.group(1))
            if number in answers:
                segments.append([])
            else:
                segments[-1] += list(spliced[number])
            position = match.end()
        segments[-1] += self.encode(text[position:])
        if len(segments) != len(turns):
            raise ValueError(f"the chat template placed {len(segments) - 1} of {len(turns) - 1} earlier answers in "
                             f"the history (fix: chat_template=raw)")
        return segments


def load_tokenizer(path: str):
    """A model's Hugging Face tokenizer (its chat template with it), once per process."""
    return _load_tokenizer(str(path))


def _load_tokenizer(path: str):
    if path not in _TOKENIZERS:
        from transformers import AutoTokenizer

        _TOKENIZERS[path] = AutoTokenizer.from_pretrained(path)
    return _TOKENIZERS[path]


_TOKENIZERS: dict[str, object] = {}
