"""Request traces, read and checked line by line, cut to the part a run replays, and their prompts rebuilt. Pure.

Formats (`trace_format`):
- `mooncake`: one JSON object a line: `timestamp` (ms since the trace's start, sorted), `input_length` and
  `output_length` (tokens), `hash_ids` (one id per block of `block_tokens` prompt tokens: requests that share
  leading ids share that prefix).
- `azure`: the Azure LLM inference trace CSV, `TIMESTAMP,ContextTokens,GeneratedTokens` (a date-time a row).
- `burstgpt`: BurstGPT's CSV, `Timestamp` (seconds), `Model`, `Request tokens`, `Response tokens`, `Total tokens`,
  `Log Type`; a row with 0 response tokens is a failed request in the trace: skipped and counted. The model is
  the request's category.
The CSV traces record no prefix sharing: each prompt is its own.

A prompt is its blocks' tokens in order, each block's tokens drawn from a generator seeded by its id, cut to
`input_length` (a prompt longer than its blocks is padded with tokens of its own), so that prefix caching sees
exactly the sharing the trace records.
"""
from __future__ import annotations

import csv
import enum
import io
import json
import math
import os
import random
from dataclasses import dataclass, replace
from datetime import datetime
from functools import lru_cache
from typing import Callable, Optional

from runner.traffic.over_length import OverLength
from runner.traffic.text_files import read_text_file

# Mooncake's traces hash prompts in blocks of 512 tokens.
MOONCAKE_BLOCK_TOKENS = 512


class TraceError(ValueError):
    """A trace file no run can replay; the message names the file and the line."""


class TraceFormat(enum.StrEnum):
    MOONCAKE = "mooncake"
    AZURE = "azure"
    BURSTGPT = "burstgpt"


@dataclass(frozen=True, kw_only=True)
class TraceRequest:
    line: int
    timestamp_ms: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    category: Optional[str] = None

    @property
    def tokens(self) -> int:
        return self.input_length + self.output_length


@dataclass(frozen=True, kw_only=True)
class TraceFile:
    requests: tuple[TraceRequest, ...]
    failed: int = 0  # rows the trace records as failed (skipped, counted)


def _count(row: dict, key: str, *, where: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TraceError(f"{where}: {key}={value!r} must be an integer ≥ 1")
    return value


def _mooncake(text: str, *, name: str) -> TraceFile:
    requests: list[TraceRequest] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"{name} line {number}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc.msg}); a Mooncake trace is one JSON object a line"
                             f"{_guess(text)}") from None
        if not isinstance(row, dict):
            raise TraceError(f"{where}: expected a JSON object with timestamp, input_length, output_length, "
                             f"hash_ids{_guess(text)}")
        missing = [k for k in ("timestamp", "input_length", "output_length") if k not in row]
        if missing:
            raise TraceError(f"{where}: no {missing[0]!r} key; a Mooncake trace line has timestamp (ms), "
                             f"input_length, output_length, hash_ids (its keys: {', '.join(map(str, row))})"
                             f"{_guess(text)}")
        ts = row["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts):
            raise TraceError(f"{where}: timestamp={ts!r} is not a number of milliseconds")
        if ts < 0:
            raise TraceError(f"{where}: timestamp={ts!r} is negative")
        _sorted(requests, ts, where)
        hash_ids = row.get("hash_ids", [])
        if not isinstance(hash_ids, list) or any(isinstance(h, bool) or not isinstance(h, int) for h in hash_ids):
            raise TraceError(f"{where}: hash_ids must be a list of integers")
        requests.append(TraceRequest(line=number, timestamp_ms=float(ts),
                                     input_length=_count(row, "input_length", where=where),
                                     output_length=_count(row, "output_length", where=where),
                                     hash_ids=tuple(hash_ids)))
    return TraceFile(requests=tuple(requests))


def _sorted(requests: list[TraceRequest], ts: float, where: str) -> None:
    if requests and ts < requests[-1].timestamp_ms:
        raise TraceError(f"{where}: timestamp {ts:g} is before line {requests[-1].line}'s "
                         f"{requests[-1].timestamp_ms:g}: the trace must be sorted by timestamp")


# The columns each CSV format needs (its header names them).
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")


def detect_format(text: str) -> Optional[TraceFormat]:
    """The trace format the text's first line says it is (None: none of them)."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    header = {c.strip().lstrip("\ufeff") for c in first.split(",")}
    if set(AZURE_COLUMNS) <= header:
        return TraceFormat.AZURE
    if set(BURSTGPT_COLUMNS) <= header:
        return TraceFormat.BURSTGPT
    try:
        row = json.loads(first)
    except json.JSONDecodeError:
        return None
    return TraceFormat.MOONCAKE if isinstance(row, dict) and "input_length" in row else None


def _guess(text: str) -> str:
    found = detect_format(text)
    if found is not None:
        return f" (it looks like {found.value}: trace_format={found.value})"
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.lstrip().startswith(("[", "{")) and any(k in first for k in ('"conversations"', '"messages"', '"turns"')):
        return " (it looks like a prompt file: workload=[prompt_set] workload.prompt_set.prompt_file=<this file>)"
    return ""


def _csv_rows(text: str, *, name: str, fmt: TraceFormat, needed: tuple[str, ...]):
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))
    columns = [c.strip() for c in reader.fieldnames or []]
    missing = [c for c in needed if c not in columns]
    if missing:
        raise TraceError(f"{name} line 1: no {missing[0]!r} column: not a {fmt.value} trace (its columns: "
                         f"{', '.join(columns) or 'none'}; {fmt.value} needs {', '.join(needed)}){_guess(text)}")
    for number, row in enumerate(reader, 2):
        yield f"{name} line {number}", number, {(k or "").strip(): (v or "").strip() for k, v in row.items()}


def _int(row: dict, key: str, where: str, *, least: int = 1) -> int:
    try:
        value = int(float(row[key]))
    except ValueError:
        value = None
    if value is None or value < least or str(value) != row[key].split(".")[0]:
        raise TraceError(f"{where}: {key}={row[key]!r} must be an integer ≥ {least}")
    return value


def _azure(text: str, *, name: str) -> TraceFile:
    requests: list[TraceRequest] = []
    start = None
    for where, number, row in _csv_rows(text, name=name, fmt=TraceFormat.AZURE, needed=AZURE_COLUMNS):
        stamp = row["TIMESTAMP"]
        whole, _, fraction = stamp.partition(".")
        try:
            at = datetime.fromisoformat(whole).timestamp() + (float("0." + fraction.split("+")[0].split("Z")[0])
                                                               if fraction else 0.0)
        except ValueError:
            raise TraceError(f"{where}: TIMESTAMP={stamp!r} is not a date-time like 2023-11-16 18:15:46.68") from None
        start = at if start is None else start
        ts = (at - start) * 1000.0
        _sorted(requests, ts, where)
        requests.append(TraceRequest(line=number, timestamp_ms=ts, input_length=_int(row, "ContextTokens", where),
                                     output_length=_int(row, "GeneratedTokens", where), hash_ids=()))
    return TraceFile(requests=tuple(requests))


def _burstgpt(text: str, *, name: str) -> TraceFile:
    requests: list[TraceRequest] = []
    failed = 0
    for where, number, row in _csv_rows(text, name=name, fmt=TraceFormat.BURSTGPT, needed=BURSTGPT_COLUMNS):
        try:
            ts = float(row["Timestamp"]) * 1000.0
        except ValueError:
            ts = math.nan
        if not math.isfinite(ts) or ts < 0:
            raise TraceError(f"{where}: Timestamp={row['Timestamp']!r} is not a number of seconds ≥ 0")
        _sorted(requests, ts, where)
        if _int(row, "Response tokens", where, least=0) == 0:
            failed += 1  # BurstGPT records a failed request as 0 response tokens
            continue
        requests.append(TraceRequest(line=number, timestamp_ms=ts, input_length=_int(row, "Request tokens", where),
                                     output_length=_int(row, "Response tokens", where), hash_ids=(),
                                     category=row.get("Model") or None))
    return TraceFile(requests=tuple(requests), failed=failed)


def parse_trace_file(text: str, *, name: str, fmt: str = TraceFormat.MOONCAKE) -> TraceFile:
    """Every request of a trace's text, or a TraceError naming the first bad line."""
    fmt = TraceFormat(fmt)
    found = {TraceFormat.MOONCAKE: _mooncake, TraceFormat.AZURE: _azure, TraceFormat.BURSTGPT: _burstgpt}[fmt](
        text, name=name)
    if not found.requests:
        raise TraceError(f"{name}: no requests" + (f" ({found.failed} recorded as failed)" if found.failed else ""))
    return found


def parse_trace(text: str, *, name: str, fmt: str = TraceFormat.MOONCAKE) -> list[TraceRequest]:
    return list(parse_trace_file(text, name=name, fmt=fmt).requests)


# The fix for a file that is not UTF-8 text.
NOT_TEXT_FIX = "workload.trace.trace_file=<a UTF-8 JSONL or CSV trace>"


@lru_cache(maxsize=8)
def _read(path: str, fmt: str, mtime: float, size: int) -> TraceFile:
    return parse_trace_file(read_text_file(path, error=TraceError, fix=NOT_TEXT_FIX).text, name=path, fmt=fmt)


def read_trace_file(path: str, fmt: str = TraceFormat.MOONCAKE) -> TraceFile:
    """A trace file read whole (once per process while the file is unchanged)."""
    full = os.path.expanduser(path)
    if not os.path.isfile(full):
        raise TraceError(f"{path}: no such file")
    stat = os.stat(full)
    return _read(full, str(fmt), stat.st_mtime, stat.st_size)


def read_trace(path: str, fmt: str = TraceFormat.MOONCAKE) -> list[TraceRequest]:
    return list(read_trace_file(path, fmt).requests)


@dataclass(frozen=True, kw_only=True)
class Selection:
    """The part of a trace a run replays, in this order: a window of the trace's clock (seconds from its first
    request, [start_s, end_s)), a request range of what is left ([skip, skip + count)), a seeded sample of that
    (a fraction or a count; the requests drawn keep their timestamps)."""

    start_s: float = 0.0
    end_s: Optional[float] = None
    skip: int = 0
    count: Optional[int] = None
    sample_fraction: Optional[float] = None
    sample_requests: Optional[int] = None
    seed: int = 0

    def apply(self, requests) -> list[TraceRequest]:
        requests = list(requests)
        if requests:
            t0 = requests[0].timestamp_ms
            requests = [r for r in requests if (r.timestamp_ms - t0) >= self.start_s * 1000.0
                        and (self.end_s is None or (r.timestamp_ms - t0) < self.end_s * 1000.0)]
        requests = requests[self.skip:][:self.count]
        n = (self.sample_requests if self.sample_requests is not None
             else round(len(requests) * self.sample_fraction) if self.sample_fraction is not None else None)
        if n is not None and n < len(requests):
            keep = sorted(random.Random(self.seed).sample(range(len(requests)), n))
            requests = [requests[i] for i in keep]
        return requests


@dataclass(frozen=True, kw_only=True)
class Fitted:
    """A replay's requests on an engine of max_model_len, under its over_length setting: a clipped prompt keeps
    its first max_model_len − output tokens; a request whose output alone does not fit is skipped."""

    requests: tuple[TraceRequest, ...]
    skipped: int
    clipped: int
    over: tuple[TraceRequest, ...]  # the requests that did not fit as recorded


def fit(requests, *, max_model_len: int, policy: str) -> Fitted:
    policy = OverLength(policy)
    kept, over, clipped = [], [], 0
    for r in requests:
        if r.tokens <= max_model_len:
            kept.append(r)
            continue
        over.append(r)
        if policy == OverLength.REFUSE:
            kept.append(r)  # validation refuses the run before any engine starts
        elif policy == OverLength.CLIP and r.output_length < max_model_len:
            kept.append(replace(r, input_length=max_model_len - r.output_length))
            clipped += 1
    return Fitted(requests=tuple(kept), skipped=len(over) - clipped if policy != OverLength.REFUSE else 0,
                  clipped=clipped, over=tuple(over))


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
