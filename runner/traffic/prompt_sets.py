"""Prompt sets in the formats people have, read into conversations that keep their category. Pure.

- `sharegpt`: ShareGPT JSON, a list of `{"conversations": [{"from": "human"|"gpt"|..., "value": ...}], ...}`
  (or one such object a line, or one pretty-printed object); the human turns become a session's turns (the model
  answers the rest: gpt, tool and function-call turns), a "system" turn or an entry's `system` key is the
  conversation's system prompt, an entry's optional `category` is kept. Entries without a human turn are skipped,
  as `vllm bench` skips them.
- `openai`: OpenAI chat-style request logs, one `{"messages": [{"role", "content"}, ...]}` a line (or a JSON list
  of them, or one object): user messages are the turns, a "system" (or "developer") message the system prompt,
  the rest the model's; `content` may be a string or a list of `{"type": "text", "text"}` parts.
- `mt_bench` / `spec_bench`: question JSONL, one `{"question_id", "category", "turns": [str, ...]}` a line.
  Spec-Bench is reported by its tasks: its 8 MT-Bench categories are one task, `mt_bench` (as its own evaluation
  folds them), the others (translation, summarization, qa, math_reasoning, rag) are kept.
- `jsonl`: one `{"prompt" | "text": str}` or `{"prompt_token_ids": [int, ...]}` a line, with an optional
  `category`: one turn each.

An empty turn is refused naming its line (or entry); a null or non-text message (an image part, a tool payload
without text) is skipped and counted (PromptFile.skipped_messages). A file that is not the format it is declared
as is refused naming the line and, where its shape says so, the prompt_format it is.
"""
from __future__ import annotations

import dataclasses
import enum
import json
import os
import random
from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Union

from runner.traffic.text_files import read_text_file

Turn = Union[str, tuple[int, ...]]


class PromptFormat(enum.StrEnum):
    SHAREGPT = "sharegpt"
    OPENAI = "openai"  # {"messages": [{"role", "content"}]} a line
    MT_BENCH = "mt_bench"
    SPEC_BENCH = "spec_bench"  # the same question JSONL as MT-Bench, reported by Spec-Bench's tasks
    JSONL = "jsonl"


class PromptSetError(ValueError):
    """A prompt file no run can use; the message names the file and the line or entry."""


@dataclass(frozen=True, kw_only=True)
class Conversation:
    where: str  # "line 3" / "entry 3": where it is in its file
    turns: tuple[Turn, ...]
    category: Optional[str] = None
    system: Optional[str] = None  # the file's system prompt for this conversation, if it has one


@dataclass(frozen=True, kw_only=True)
class PromptFile:
    """A prompt file read whole: its conversations and what was left out of them."""

    conversations: tuple[Conversation, ...]
    skipped_messages: int = 0  # null or non-text messages (not fatal, counted)
    digest: str = ""  # sha256 of the file's bytes: what its renderings are cached by


HUMAN = {"human", "user"}
SYSTEM = {"system", "developer"}
# Spec-Bench's own evaluation folds MT-Bench's 8 categories into one task.
MT_BENCH_CATEGORIES = frozenset({"writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem",
                                 "humanities"})
SPEC_BENCH_MT_TASK = "mt_bench"


def _guess(row) -> str:
    """What a misdeclared entry looks like, as a hint naming the format (or workload) that reads it."""
    if isinstance(row, list) and row and isinstance(row[0], dict):
        return _guess(row[0])
    if isinstance(row, dict):
        if "conversations" in row:
            return " (it looks like ShareGPT: prompt_format=sharegpt)"
        if "messages" in row:
            return " (it looks like OpenAI chat messages: prompt_format=openai)"
        if "turns" in row:
            return " (it looks like MT-Bench / Spec-Bench questions: prompt_format=mt_bench)"
        if {"prompt", "text", "prompt_token_ids"} & set(row):
            return " (it looks like plain prompt JSONL: prompt_format=jsonl)"
        if {"input_length", "output_length"} <= set(row):
            return " (it looks like a Mooncake trace: workload=[trace] workload.trace.trace_file=<this file>)"
    return ""


def _category(row: dict, where: str) -> Optional[str]:
    value = row.get("category")
    if value is None:
        return None
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise PromptSetError(f"{where}: category={value!r} must be a string")
    return str(value)


def _text(content) -> Optional[str]:
    """A message's text: a string, or the text parts of an OpenAI content list (None: no text in it)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"]
        parts = [p for p in parts if isinstance(p, str)]
        return "\n".join(parts) if parts else None
    return None


class _Reader:
    """Reads one file's entries, counting the messages it skips."""

    def __init__(self, fmt: PromptFormat):
        self.fmt = fmt
        self.skipped = 0

    def read(self, row, where: str) -> Optional[Conversation]:
        return {PromptFormat.SHAREGPT: self._chat, PromptFormat.OPENAI: self._chat,
                PromptFormat.MT_BENCH: self._questions, PromptFormat.SPEC_BENCH: self._questions,
                PromptFormat.JSONL: self._plain}[self.fmt](row, where)

    def _chat(self, row, where: str) -> Optional[Conversation]:
        sharegpt = self.fmt == PromptFormat.SHAREGPT
        key, role_key, text_key = ("conversations", "from", "value") if sharegpt else ("messages", "role", "content")
        if not isinstance(row, dict) or not isinstance(row.get(key), list):
            name = "ShareGPT" if sharegpt else "OpenAI chat messages"
            raise PromptSetError(f"{where}: no {key!r} list: not {name}{_guess(row)}")
        turns: list[str] = []
        system = row.get("system") if isinstance(row.get("system"), str) and row["system"].strip() else None
        for number, message in enumerate(row[key]):
            role = message.get(role_key) if isinstance(message, dict) else None
            text = _text(message.get(text_key)) if isinstance(message, dict) else None
            if role is None or text is None:
                self.skipped += 1  # null, non-text or role-less: not the model's input, not fatal
                continue
            if role in HUMAN:
                if not text.strip():
                    raise PromptSetError(f"{where}: message {number} ({role}) is empty; remove it or the "
                                         f"conversation")
                turns.append(text)
            elif role in SYSTEM and text.strip() and not turns:
                system = text
        if not turns:
            return None
        return Conversation(where=where, turns=tuple(turns), category=_category(row, where), system=system)

    def _questions(self, row, where: str) -> Conversation:
        turns = row.get("turns") if isinstance(row, dict) else None
        if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
            raise PromptSetError(f"{where}: no 'turns' list of strings: not MT-Bench / Spec-Bench question JSONL"
                                 f"{_guess(row)}")
        empty = [i for i, t in enumerate(turns) if not t.strip()]
        if empty:
            raise PromptSetError(f"{where}: turn {empty[0]} is empty; remove it or the question")
        category = _category(row, where)
        if self.fmt == PromptFormat.SPEC_BENCH and category in MT_BENCH_CATEGORIES:
            category = SPEC_BENCH_MT_TASK
        return Conversation(where=where, turns=tuple(turns), category=category)

    def _plain(self, row, where: str) -> Conversation:
        if isinstance(row, str):
            if not row.strip():
                raise PromptSetError(f"{where}: the prompt is empty")
            return Conversation(where=where, turns=(row,))
        if not isinstance(row, dict):
            raise PromptSetError(f"{where}: expected an object with 'prompt', 'text' or 'prompt_token_ids'"
                                 f"{_guess(row)}")
        if "prompt_token_ids" in row:
            ids = row["prompt_token_ids"]
            if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool)
                                                               for t in ids):
                raise PromptSetError(f"{where}: prompt_token_ids must be a non-empty list of integers")
            turn: Turn = tuple(ids)
        elif isinstance(row.get("prompt", row.get("text")), str):
            turn = row.get("prompt", row.get("text"))
            if not turn.strip():
                raise PromptSetError(f"{where}: the prompt is empty")
        else:
            raise PromptSetError(f"{where}: no 'prompt', 'text' or 'prompt_token_ids' key: not plain prompt JSONL"
                                 f"{_guess(row)}")
        return Conversation(where=where, turns=(turn,), category=_category(row, where))


def _whole_json(text: str):
    """The text as one JSON value (a list or a pretty-printed object), or None when it is not one."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return None


def _json_lines(text: str, name: str, fmt: PromptFormat):
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{name} line {number}", json.loads(line)
        except json.JSONDecodeError as exc:
            whole = _whole_json(text)
            hint = _guess(whole) if whole is not None else ""
            if whole is None:
                raise PromptSetError(f"{name} line {number}: not JSON ({exc.msg}); a JSONL file holds one JSON "
                                     f"value a line") from None
            raise PromptSetError(f"{name} line {number}: the file is one JSON value over several lines, not one a "
                                 f"line{hint or f' (prompt_format={fmt} reads one JSON value a line)'}") from None


def _entries(text: str, *, fmt: PromptFormat, name: str):
    """(where, row) per entry: a JSON list's entries, one pretty-printed object, or one value a line."""
    chat = fmt in (PromptFormat.SHAREGPT, PromptFormat.OPENAI)
    head = text.lstrip()[:1]
    if chat and head in ("[", "{"):
        whole = _whole_json(text)
        if isinstance(whole, list):
            return [(f"{name} entry {i}", row) for i, row in enumerate(whole)]
        if isinstance(whole, dict) and "\n" in text.strip():  # one pretty-printed conversation
            return [(f"{name} entry 0", whole)]
        if head == "[":
            try:
                json.loads(text)
            except json.JSONDecodeError as exc:
                raise PromptSetError(f"{name} line {exc.lineno}: not JSON ({exc.msg}); {fmt} is a JSON list of "
                                     f"conversations or one conversation a line") from None
    return list(_json_lines(text, name, fmt))


def parse_prompt_file(text: str, *, fmt: str, name: str) -> PromptFile:
    """Every usable conversation of a file's text in its declared format, or a PromptSetError naming the line."""
    fmt = PromptFormat(fmt)
    reader = _Reader(fmt)
    conversations = [c for c in (reader.read(row, where) for where, row in _entries(text, fmt=fmt, name=name))
                     if c is not None]
    if not conversations:
        raise PromptSetError(f"{name}: no conversation with a prompt in it")
    return PromptFile(conversations=tuple(conversations), skipped_messages=reader.skipped)


def parse_prompt_set(text: str, *, fmt: str, name: str) -> list[Conversation]:
    return list(parse_prompt_file(text, fmt=fmt, name=name).conversations)


# The fix for a file that is not UTF-8 text.
NOT_TEXT_FIX = "workload.prompt_set.prompt_file=<a UTF-8 JSON or JSONL file>"


@lru_cache(maxsize=8)
def _read(path: str, fmt: str, mtime: float, size: int) -> PromptFile:
    read = read_text_file(path, error=PromptSetError, fix=NOT_TEXT_FIX)
    return dataclasses.replace(parse_prompt_file(read.text, fmt=fmt, name=path), digest=read.digest)


def read_prompt_file(path: str, fmt: str) -> PromptFile:
    """A prompt file read whole (once per process while the file is unchanged)."""
    full = os.path.expanduser(path)
    if not os.path.isfile(full):
        raise PromptSetError(f"{path}: no such file")
    stat = os.stat(full)
    return _read(full, str(fmt), stat.st_mtime, stat.st_size)


def read_prompt_set(path: str, fmt: str) -> list[Conversation]:
    """A prompt file's conversations, in file order."""
    return list(read_prompt_file(path, fmt).conversations)


def categories(conversations) -> list[str]:
    """The categories present, in first-seen order (conversations without one are "–")."""
    return list(dict.fromkeys(c.category or UNCATEGORISED for c in conversations))


UNCATEGORISED = "–"


def stratified_sample(conversations, n: Optional[int], *, seed: int) -> list[Conversation]:
    """`n` conversations drawn with `seed`, each category keeping its share of the file (largest remainders, ties
    to the larger category, then file order), in a seeded order that interleaves the categories. None, or n at
    least the file's size: the whole file in file order."""
    conversations = list(conversations)
    if n is None or n >= len(conversations):
        return conversations
    groups: dict[str, list[int]] = {}
    for i, c in enumerate(conversations):
        groups.setdefault(c.category or UNCATEGORISED, []).append(i)
    quotas = {k: n * len(v) / len(conversations) for k, v in groups.items()}
    take = {k: int(q) for k, q in quotas.items()}
    order = sorted(groups, key=lambda k: (-(quotas[k] - take[k]), -len(groups[k]), list(groups).index(k)))
    for k in order[:n - sum(take.values())]:
        take[k] += 1
    rng = random.Random(seed)
    chosen = [i for k, members in groups.items() for i in sorted(rng.sample(members, take[k]))]
    rng.shuffle(chosen)
    return [conversations[i] for i in chosen]
