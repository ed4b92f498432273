"""Request traces in Mooncake's JSONL format, read and checked line by line, and their prompts rebuilt. Pure.

One JSON object a line: `timestamp` (ms since the trace's start, sorted), `input_length` and `output_length`
(tokens), `hash_ids` (one id per block of `block_tokens` prompt tokens: requests that share leading ids share
that prefix). A prompt is its blocks' tokens in order, each block's tokens drawn from a generator seeded by
its id, cut to `input_length` (a prompt longer than its blocks is padded with tokens of its own), so that
prefix caching sees exactly the sharing the trace records.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

# Mooncake's traces hash prompts in blocks of 512 tokens.
MOONCAKE_BLOCK_TOKENS = 512


class TraceError(ValueError):
    """A trace file no run can replay; the message names the file and the line."""


@dataclass(frozen=True, kw_only=True)
class TraceRequest:
    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]


def _count(row: dict, key: str, *, where: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TraceError(f"{where}: {key}={value!r} must be an integer ≥ 1")
    return value


def parse_trace(text: str, *, name: str) -> list[TraceRequest]:
    """Every request of a trace's text, or a TraceError naming the first bad line."""
    requests: list[TraceRequest] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc.msg}); a Mooncake trace is one JSON object a line") from None
        if not isinstance(row, dict):
            raise TraceError(f"{where}: expected a JSON object with timestamp, input_length, output_length, "
                             f"hash_ids")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in row]
        if missing:
            raise TraceError(f"{where}: no {missing[0]!r} key; a Mooncake trace line has timestamp (ms), "
                             f"input_length, output_length, hash_ids")
        ts = row["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise TraceError(f"{where}: timestamp={ts!r} is not a number of milliseconds")
        if ts < 0:
            raise TraceError(f"{where}: timestamp={ts!r} is negative")
        if requests and ts < requests[-1].timestamp_ms:
            raise TraceError(f"{where}: timestamp {ts:g} is before line {requests[-1].line}'s "
                             f"{requests[-1].timestamp_ms:g}: the trace must be sorted by timestamp")
        hash_ids = row.get("hash_ids", [])
        if not isinstance(hash_ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hash_ids):
            raise TraceError(f"{where}: hash_ids must be a list of integers")
        requests.append(TraceRequest(line=number, timestamp_ms=float(ts),
                                     input_length=_count(row, "input_length", where=where),
                                     output_length=_count(row, "output_length", where=where),
                                     hash_ids=tuple(hash_ids)))
    if not requests:
        raise TraceError(f"{name}: no requests")
    return requests


@lru_cache(maxsize=8)
def _read(path: str, mtime: float) -> tuple[TraceRequest, ...]:
    return tuple(parse_trace(Path(path).read_text(encoding="utf-8"), name=path))


def read_trace(path: str) -> list[TraceRequest]:
    """A trace file's requests (read once per process while the file is unchanged)."""
    full = os.path.expanduser(path)
    if not os.path.isfile(full):
        raise TraceError(f"{path}: no such file")
    return list(_read(full, os.path.getmtime(full)))


def send_offsets(requests: list[TraceRequest], *, time_scale: float) -> list[float]:
    """Seconds from the first request's send to each one's: the trace's own clock × `time_scale`."""
    start = requests[0].timestamp_ms if requests else 0.0
    return [(r.timestamp_ms - start) / 1000.0 * time_scale for r in requests]


def shared_prefix_blocks(requests: list[TraceRequest]) -> list[int]:
    """Per request, how many leading hash ids it shares with some earlier request: the prefix blocks a cache
    can hold for it when it arrives."""
    seen: set[tuple[int, ...]] = set()
    shared = []
    for r in requests:
        n = 0
        while n < len(r.hash_ids) and r.hash_ids[:n + 1] in seen:
            n += 1
        shared.append(n)
        seen.update(r.hash_ids[:i] for i in range(1, len(r.hash_ids) + 1))
    return shared


def trace_prompt(request: TraceRequest, *, index: int, block_tokens: int,
                 block: Callable[[str, int], list[int]]) -> list[int]:
    """The request's prompt: `block(key, length)` gives the seeded tokens of one block (key "h<id>" for a
    hash id, "r<index>" for the request's own padding)."""
    tokens: list[int] = []
    for h in request.hash_ids:
        if len(tokens) >= request.input_length:
            break
        tokens.extend(block(f"h{h}", block_tokens))
    if len(tokens) < request.input_length:
        tokens.extend(block(f"r{index}", request.input_length - len(tokens)))
    return tokens[:request.input_length]
