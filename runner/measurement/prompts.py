"""Seeded, reproducible prompts as token ids.

Three sources, chosen per workload with `prompt_source`:
- `synthetic`: token ids drawn uniformly by a seeded generator (no tokenizer).
- `corpus`: windows of the Python standard library's sources, tokenized with the
  model's own tokenizer (real text, so n-gram and MTP drafts see real structure).
- `jsonl`: windows of a user file's prompts (`prompt_file`), one JSON object a line
  with `prompt` or `text` (a string) or `prompt_token_ids` (a list of ints).

Text sources are read as one token stream; a prompt of length L is the L tokens at
a seeded offset (wrapping around), so lengths are exact and prompts reproducible.
"""
from __future__ import annotations

import functools
import json
import random
import sysconfig
import zlib
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Protocol

PROMPT_SOURCES = ("synthetic", "corpus", "jsonl")
# Enough text that windows at different seeds rarely overlap; read lazily.
MIN_STREAM_TOKENS = 200_000


def random_token_ids(*, length: int, seed: int, low: int, high: int) -> list[int]:
    """`length` token ids drawn uniformly from [low, high) by a seeded generator."""
    rng = random.Random(seed)
    return [rng.randrange(low, high) for _ in range(length)]


def derived_seed(*, base: int, session: int = 0, turn: int = 0, salt: str = "") -> int:
    """A seed per (base, session, turn, salt), the same in every process."""
    return zlib.crc32(f"{base}/{session}/{turn}/{salt}".encode())


def check_prompt_source(*, source: str, prompt_file: Optional[str]) -> list[str]:
    """Messages for a source no run can use (checked before any engine starts)."""
    if source not in PROMPT_SOURCES:
        return [f"prompt_source={source!r} is unknown; valid: {', '.join(PROMPT_SOURCES)}"]
    if source == "jsonl":
        if not prompt_file:
            return ["prompt_source=jsonl needs prompt_file=<a .jsonl file>"]
        path = Path(prompt_file).expanduser()
        if not path.is_file():
            return [f"prompt_file={prompt_file!r} does not exist"]
        stat = path.stat()
        problem = prompt_file_problem(str(path), stat.st_mtime_ns, stat.st_size)
        if problem:
            return [f"prompt_file={prompt_file!r}: {problem}"]
    return []


@functools.lru_cache(maxsize=16)
def prompt_file_problem(path: str, mtime_ns: int = 0, size: int = 0) -> Optional[str]:
    """The first line of a JSONL prompt file that no run could read, with its number; None where every line reads.
    Read whole, once per version of the file (mtime and size key the cache)."""
    prompts = 0
    try:
        with open(path, "rb") as f:
            for number, raw in enumerate(f, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    return f"line {number} is not UTF-8 text (byte {exc.start + 1})"
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError as exc:
                    return f"line {number} is not JSON ({getattr(exc, 'msg', exc)}, column {getattr(exc, 'colno', '?')})"
                try:
                    _prompt_of(row)
                except (ValueError, TypeError) as exc:
                    return f"line {number}: {exc}"
                prompts += 1
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    return None if prompts else "holds no prompts (one JSON object a line)"


def _prompt_of(row) -> str | list[int]:
    """One line's prompt: a string, or token ids where the line gives them."""
    if isinstance(row, str):
        return row
    if isinstance(row, dict) and "prompt_token_ids" in row:
        ids = row["prompt_token_ids"]
        if not isinstance(ids, list) or not all(isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise ValueError("'prompt_token_ids' must be a list of integers")
        return list(ids)
    if isinstance(row, dict) and ("prompt" in row or "text" in row):
        return str(row.get("prompt", row.get("text")))
    raise ValueError("expected a string or an object with a 'prompt', 'text' or 'prompt_token_ids' key")


def corpus_texts() -> Iterator[str]:
    """The standard library's top-level sources in a fixed order: local, identical on every machine
    with the same Python version."""
    root = Path(sysconfig.get_paths()["stdlib"])
    for path in sorted(root.glob("*.py")):
        try:
            yield path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue


def jsonl_rows(path: str) -> Iterator[str | list[int]]:
    """Each line's prompt: a string, or token ids where the file gives them."""
    with open(Path(path).expanduser(), encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                prompt = _prompt_of(json.loads(line))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: {exc}") from exc
            yield prompt


class TokenStream:
    """Texts turned into one token stream, encoded only as far as windows need."""

    def __init__(self, *, items: Iterable[str | list[int]], encode: Callable[[str], list[int]],
                 separator: Optional[list[int]] = None):
        self._items = iter(items)
        self._encode = encode
        self._separator = list(separator or [])
        self._tokens: list[int] = []
        self._exhausted = False

    def _fill(self, need: int) -> None:
        while not self._exhausted and len(self._tokens) < need:
            item = next(self._items, None)
            if item is None:
                self._exhausted = True
                break
            ids = list(item) if isinstance(item, list) else self._encode(item)
            if ids:
                self._tokens.extend(ids + self._separator)

    def window(self, *, length: int, seed: int) -> list[int]:
        """`length` tokens from a seeded offset, wrapping around the stream's end."""
        self._fill(max(MIN_STREAM_TOKENS, 2 * length))
        if not self._tokens:
            raise ValueError("the prompt source holds no tokens")
        n = len(self._tokens)
        start = random.Random(seed).randrange(n)
        out: list[int] = []
        while len(out) < length:
            take = min(length - len(out), n - start)
            out.extend(self._tokens[start:start + take])
            start = 0
        return out


class Tokenizing(Protocol):
    vocab_size: int
    first_token_id: int

    def encode_text(self, text: str) -> list[int]: ...


# One stream per (source, file, tokenizer) per process: tokenizing the corpus once is enough.
_STREAMS: dict[tuple, TokenStream] = {}


class PromptMaker:
    """Prompts and short text pieces (needles, questions) from one source."""

    def __init__(self, *, source: str, engine: Tokenizing, prompt_file: Optional[str] = None):
        errors = check_prompt_source(source=source, prompt_file=prompt_file)
        if errors:
            raise ValueError(errors[0])
        self.source = source
        self.engine = engine
        self.prompt_file = prompt_file

    def _stream(self) -> TokenStream:
        # Keyed by the tokenizer, not by the engine object a workload holds (a fresh wrapper each trial): the
        # corpus is tokenized once per process, not once per trial.
        tokenizer = getattr(self.engine, "tokenizer_source", None) or id(getattr(self.engine.encode_text, "__self__",
                                                                                  self.engine))
        key = (self.source, self.prompt_file, tokenizer)
        if key not in _STREAMS:
            items = corpus_texts() if self.source == "corpus" else jsonl_rows(self.prompt_file)
            _STREAMS[key] = TokenStream(items=items, encode=self.engine.encode_text)
        return _STREAMS[key]

    def tokens(self, *, length: int, seed: int) -> list[int]:
        if self.source == "synthetic":
            return random_token_ids(length=length, seed=seed, low=self.engine.first_token_id,
                                    high=self.engine.vocab_size)
        return self._stream().window(length=length, seed=seed)

    def phrase(self, *, text: str, length: int, seed: int) -> list[int]:
        """A short piece: `text` tokenized for text sources, seeded random tokens for synthetic ones."""
        if self.source == "synthetic":
            return random_token_ids(length=length, seed=seed, low=self.engine.first_token_id,
                                    high=self.engine.vocab_size)
        return self.engine.encode_text(text)


def prompt_maker(params, engine: Tokenizing) -> PromptMaker:
    """The maker for a workload's params (`prompt_source`, `prompt_file`)."""
    return PromptMaker(source=params.prompt_source, engine=engine, prompt_file=params.prompt_file)


def needle(*, seed: int) -> tuple[str, str]:
    """A seeded fact and the question that retrieves it."""
    rng = random.Random(seed)
    code = rng.randrange(10_000, 100_000)
    return f"\n# The secret number is {code}. Remember it.\n", "\n# Question: what is the secret number?\n# Answer:"


def insert_at(*, tokens: list[int], piece: list[int], depth: float) -> list[int]:
    """`piece` inserted at fraction `depth` of `tokens` (0 = start, 1 = end); total length kept."""
    body = tokens[: max(0, len(tokens) - len(piece))]
    at = round(min(max(depth, 0.0), 1.0) * len(body))
    return body[:at] + piece + body[at:]
