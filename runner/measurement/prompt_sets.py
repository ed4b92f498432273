"""Prompt sets in the formats people have, read into conversations that keep their category. Pure.

- `sharegpt`: ShareGPT JSON, a list of `{"conversations": [{"from": "human"|"gpt"|..., "value": ...}], ...}`
  (or one such object a line); the human turns become a session's turns (the model answers the rest), an entry's
  optional `category` is kept. Entries without a human turn are skipped, as `vllm bench` skips them.
- `mt_bench` / `spec_bench`: question JSONL, one `{"question_id", "category", "turns": [str, ...]}` a line.
- `jsonl`: one `{"prompt" | "text": str}` or `{"prompt_token_ids": [int, ...]}` a line, with an optional
  `category`: one turn each.

A file that is not the format it is declared as is refused naming the line (or, for a JSON list, the entry).
"""
from __future__ import annotations

import enum
import json
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Optional, Union

Turn = Union[str, tuple[int, ...]]


class PromptFormat(enum.StrEnum):
    SHAREGPT = "sharegpt"
    MT_BENCH = "mt_bench"
    SPEC_BENCH = "spec_bench"  # the same question JSONL as MT-Bench
    JSONL = "jsonl"


class PromptSetError(ValueError):
    """A prompt file no run can use; the message names the file and the line or entry."""


@dataclass(frozen=True, kw_only=True)
class Conversation:
    where: str  # "line 3" / "entry 3": where it is in its file
    turns: tuple[Turn, ...]
    category: Optional[str] = None
    system: Optional[str] = None  # the conversation's system prompt, where the file has one


HUMAN = {"human", "user"}


def _guess(row) -> str:
    """What a misdeclared line looks like, as a hint."""
    if isinstance(row, dict):
        if "conversations" in row:
            return " (it looks like ShareGPT: prompt_format=sharegpt)"
        if "turns" in row:
            return " (it looks like MT-Bench / Spec-Bench questions: prompt_format=mt_bench)"
        if {"prompt", "text", "prompt_token_ids"} & set(row):
            return " (it looks like plain prompt JSONL: prompt_format=jsonl)"
    return ""


def _category(row: dict, where: str) -> Optional[str]:
    value = row.get("category")
    if value is None:
        return None
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise PromptSetError(f"{where}: category={value!r} must be a string")
    return str(value)


def _sharegpt(row, where: str) -> Optional[Conversation]:
    if not isinstance(row, dict) or not isinstance(row.get("conversations"), list):
        raise PromptSetError(f"{where}: no 'conversations' list: not ShareGPT{_guess(row)}")
    turns = []
    for message in row["conversations"]:
        if not isinstance(message, dict) or "from" not in message or not isinstance(message.get("value"), str):
            raise PromptSetError(f"{where}: a message must be {{\"from\": ..., \"value\": \"...\"}}, got "
                                 f"{str(message)[:80]}")
        if message["from"] in HUMAN and message["value"].strip():
            turns.append(message["value"])
    return Conversation(where=where, turns=tuple(turns), category=_category(row, where)) if turns else None


def _questions(row, where: str) -> Conversation:
    turns = row.get("turns") if isinstance(row, dict) else None
    if not isinstance(turns, list) or not turns or not all(isinstance(t, str) for t in turns):
        raise PromptSetError(f"{where}: no 'turns' list of strings: not MT-Bench / Spec-Bench question JSONL"
                             f"{_guess(row)}")
    return Conversation(where=where, turns=tuple(turns), category=_category(row, where))


def _plain(row, where: str) -> Conversation:
    if isinstance(row, str):
        return Conversation(where=where, turns=(row,))
    if not isinstance(row, dict):
        raise PromptSetError(f"{where}: expected an object with 'prompt', 'text' or 'prompt_token_ids'")
    if "prompt_token_ids" in row:
        ids = row["prompt_token_ids"]
        if not isinstance(ids, list) or not ids or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise PromptSetError(f"{where}: prompt_token_ids must be a non-empty list of integers")
        turn: Turn = tuple(ids)
    elif isinstance(row.get("prompt", row.get("text")), str):
        turn = row.get("prompt", row.get("text"))
    else:
        raise PromptSetError(f"{where}: no 'prompt', 'text' or 'prompt_token_ids' key: not plain prompt JSONL"
                             f"{_guess(row)}")
    return Conversation(where=where, turns=(turn,), category=_category(row, where))


def _json_lines(text: str, name: str):
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            yield f"{name} line {number}", json.loads(line)
        except json.JSONDecodeError as exc:
            raise PromptSetError(f"{name} line {number}: not JSON ({exc.msg}); a JSONL file holds one JSON value "
                                 f"a line") from None


def parse_prompt_set(text: str, *, fmt: str, name: str) -> list[Conversation]:
    """Every usable conversation of a file's text in its declared format, or a PromptSetError naming the line."""
    fmt = PromptFormat(fmt)
    if fmt == PromptFormat.SHAREGPT and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PromptSetError(f"{name} line {exc.lineno}: not JSON ({exc.msg}); ShareGPT is a JSON list "
                                 f"of conversations") from None
        entries = [(f"{name} entry {i}", row) for i, row in enumerate(rows)]
    else:
        entries = list(_json_lines(text, name))
    read = {PromptFormat.SHAREGPT: _sharegpt, PromptFormat.MT_BENCH: _questions, PromptFormat.SPEC_BENCH: _questions,
            PromptFormat.JSONL: _plain}[fmt]
    conversations = [c for c in (read(row, where) for where, row in entries) if c is not None]
    if not conversations:
        raise PromptSetError(f"{name}: no conversation with a prompt in it")
    return conversations


@lru_cache(maxsize=8)
def _read(path: str, fmt: str, mtime: float) -> tuple[Conversation, ...]:
    return tuple(parse_prompt_set(Path(path).read_text(encoding="utf-8"), fmt=fmt, name=path))


def read_prompt_set(path: str, fmt: str) -> list[Conversation]:
    """A prompt file's conversations (read once per process while the file is unchanged)."""
    full = os.path.expanduser(path)
    if not os.path.isfile(full):
        raise PromptSetError(f"{path}: no such file")
    return list(_read(full, str(fmt), os.path.getmtime(full)))


def categories(conversations: list[Conversation]) -> list[str]:
    """The categories present, in first-seen order (conversations without one are "–")."""
    return list(dict.fromkeys(c.category or UNCATEGORISED for c in conversations))


UNCATEGORISED = "–"
