"""Start-up failures as results: the reason and its numbers, parsed from the engine's log. Pure."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass(kw_only=True)
class Failure:
    kind: str
    reason: str
    numbers: dict = field(default_factory=dict)


_NUM = r"([0-9][0-9,]*\.?[0-9]*)"

_PATTERNS: list[tuple[str, re.Pattern, tuple[str, ...]]] = [
    ("kv_cache_too_small_for_max_len",
     re.compile(r"max seq len \(" + _NUM + r"\).*?" + _NUM + r" GiB KV cache is needed.*?available KV cache memory \("
                + _NUM + r" GiB\).*?estimated maximum model length is " + _NUM, re.S),
     ("max_model_len", "needed_gib", "available_gib", "estimated_max_len")),
    ("kv_cache_too_small_for_max_len",
     re.compile(r"max seq len \(" + _NUM + r"\).*?" + _NUM + r" GiB KV cache is needed.*?available KV cache memory \("
                + _NUM + r" GiB\)", re.S),
     ("max_model_len", "needed_gib", "available_gib")),
    ("no_kv_cache_memory", re.compile(r"No available memory for the cache blocks"), ()),
    ("not_enough_free_memory_for_budget",
     re.compile(r"Free memory on device.*?\(" + _NUM + r"/" + _NUM + r" GiB\).*?less than desired GPU memory "
                r"utilization \(" + _NUM + r", " + _NUM + r" GiB\)", re.S),
     ("free_gib", "total_gib", "utilization", "desired_gib")),
    ("not_enough_free_memory_for_budget", re.compile(r"Free memory on device.*?less than desired GPU memory", re.S), ()),
    ("out_of_memory_while_loading", re.compile(r"(torch\.cuda\.)?OutOfMemoryError|CUDA out of memory"), ()),
    ("speculative_config_refused",
     re.compile(r"(speculative|Speculative|num_speculative_tokens|MTP|mtp)[^\n]*(not supported|unsupported|"
                r"must be|cannot|can't|does not support)"), ()),
    ("prefix_caching_refused", re.compile(r"[Pp]refix caching[^\n]*(not supported|unsupported|cannot)"), ()),
]


def _number(text: str) -> float | int:
    text = text.replace(",", "").rstrip(".")
    value = float(text)
    return int(value) if value.is_integer() and "." not in text else value


def _reason_line(log: str, start: int) -> str:
    line_start = log.rfind("\n", 0, start) + 1
    line_end = log.find("\n", start)
    line = log[line_start: line_end if line_end != -1 else None].strip()
    return line[-600:]


def parse_startup_failure(*, log: str, exception: str = "") -> Failure:
    """The first known failure pattern in the child's log, else the exception itself."""
    text = log + "\n" + exception
    for kind, pattern, names in _PATTERNS:
        match = pattern.search(text)
        if match:
            numbers = {name: _number(match.group(i + 1)) for i, name in enumerate(names)
                       if match.lastindex and i + 1 <= match.lastindex}
            return Failure(kind=kind, reason=_reason_line(text, match.start()), numbers=numbers)
    last_error = [ln for ln in text.splitlines() if "Error" in ln or "error" in ln]
    reason = (last_error[-1] if last_error else exception or "engine failed to start").strip()[-600:]
    return Failure(kind="engine_start_failed", reason=reason)
