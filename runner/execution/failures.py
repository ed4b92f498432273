"""Start-up failures as results: the reason and its numbers, parsed from the engine's log. Pure.

Also the fault-injection test hook (`RUNNER_FAULTS`), which the actor consults after each
trial's workload; it is inert unless that variable is set.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field


@dataclass(kw_only=True)
class Failure:
    kind: str
    reason: str
    numbers: dict = field(default_factory=dict)


_NUM = r"([0-9][0-9,]*\.?[0-9]*)"

_PATTERNS: list[tuple[str, re.Pattern, tuple[str, ...]]] = [
    # Another process on the GPU freed memory while vLLM measured its own (engines starting side by side).
    ("memory_changed_while_profiling",
     re.compile(r"Error in memory profiling\. Initial free memory " + _NUM + r" GiB, current free memory " + _NUM
                + r" GiB", re.S), ("initial_free_gib", "current_free_gib")),
    ("memory_changed_while_profiling", re.compile(r"Error in memory profiling"), ()),
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
    # vLLM's CPU build: gpu_memory_utilization is a share of the NUMA node's memory.
    ("not_enough_free_memory_for_budget",
     re.compile(r"Available memory on node \S+ \(" + _NUM + r"/" + _NUM + r" GiB\) on startup is less than desired "
                r"CPU memory utilization \(" + _NUM + r", " + _NUM + r" GiB\)", re.S),
     ("free_gib", "total_gib", "utilization", "desired_gib")),
    ("out_of_memory_while_loading", re.compile(r"(torch\.cuda\.)?OutOfMemoryError|CUDA out of memory"), ()),
    ("speculative_config_refused",
     re.compile(r"(speculative|Speculative|num_speculative_tokens|MTP|mtp)[^\n]*(not supported|unsupported|"
                r"must be|cannot|can't|does not support)"), ()),
    ("prefix_caching_refused", re.compile(r"[Pp]refix caching[^\n]*(not supported|unsupported|cannot)"), ()),
    # What this device or build cannot run (e.g. "FP8 KV cache on CPU requires x86 with AVX-512 or AMX").
    ("not_supported_here", re.compile(r"NotImplementedError: \S[^\n]*"), ()),
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
    # The engine core's own exception is the cause; the frontend's "initialization failed" only points at it.
    causes = [m.group(1) for m in _EXCEPTION_LINE.finditer(text) if "initialization failed" not in m.group(1)]
    last_error = [ln for ln in text.splitlines() if "Error" in ln or "error" in ln]
    reason = (causes[0] if causes else last_error[-1] if last_error else
              exception or "engine failed to start").strip()[-600:]
    return Failure(kind="engine_start_failed", reason=reason)


_EXCEPTION_LINE = re.compile(r"(?:^|\] |\) )((?:[A-Za-z_.]*\.)?[A-Z]\w*(?:Error|Exception): .+)$", re.M)


# ---- test hook: injected faults -----------------------------------------------------------------
# RUNNER_FAULTS='[{"fault": "kill", "concurrency": 2}, {"fault": "hang", "concurrency": 3, "attempts": [1, 2]}]'
# kill: the actor process SIGKILLs itself after the trial's requests ran, before the result is returned
#       (an actor lost mid-trial: segfault, device error, OOM killer).
# hang: the trial never returns (a stuck engine); execution.trial_timeout_s ends it.
# A rule matches a trial by any of trial_id / workload / concurrency / repeat it names, on the
# attempts it lists (default: the first only, so a retry succeeds). For tests only.
FAULTS_ENV = "RUNNER_FAULTS"
FAULT_KINDS = ("kill", "hang")


def injected_fault(*, trial, attempt: int, spec: str | None = None) -> str | None:
    """The fault to inject into this trial attempt, if the hook names one."""
    spec = os.environ.get(FAULTS_ENV) if spec is None else spec
    if not spec:
        return None
    for rule in json.loads(spec):
        if rule.get("fault") not in FAULT_KINDS:
            raise ValueError(f"{FAULTS_ENV}: unknown fault {rule.get('fault')!r}; valid: {', '.join(FAULT_KINDS)}")
        if attempt not in rule.get("attempts", [1]):
            continue
        if all(getattr(trial, key) == rule[key] for key in ("trial_id", "workload", "concurrency", "repeat")
               if key in rule):
            return rule["fault"]
    return None


async def fault_point(*, trial, attempt: int) -> None:
    """Called by the actor once a trial's requests ran; does nothing unless RUNNER_FAULTS names the trial."""
    fault = injected_fault(trial=trial, attempt=attempt)
    if fault == "kill":
        import signal

        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "hang":
        import asyncio

        await asyncio.Event().wait()
