"""The `execution` block of conf/config.yaml as a typed section: warm-up, timeouts, retries, residency, how
engine processes start, the engine pool. Pure."""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Optional

from runner.config.checks import _fix, _g, _is_number, _problems, plain_name_problem


@dataclass(kw_only=True)
class OldExecutionSlo:
    """execution.slo, the older name of the `slo` block (runner.slo): read for one release, with a warning."""

    ttft_ms: Optional[float] = None
    tpot_ms: Optional[float] = None
    e2e_ms: Optional[float] = None


class Residency(enum.StrEnum):
    """execution.resident: keep engines loaded between their turns."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class Warmup(enum.StrEnum):
    """execution.warmup: what an engine runs, unmeasured, before a trial shape it has not seen. full: the shape
    itself once (output capped); light: each new workload point once at one session (its prompts, few tokens
    out) plus a short pass (short prompts, few tokens) at each new concurrency; auto: the device's own
    (runner.scheduling.device: light on CUDA, full on CPU), recorded in each trial's `warmup` column."""

    AUTO = "auto"
    FULL = "full"
    LIGHT = "light"
    OFF = "off"

    @classmethod
    def on_engine(cls, value) -> "Warmup":
        """What an engine runs for `value`: the driver resolves `auto` for the device; one left unresolved is full."""
        mode = cls(value)
        return cls.FULL if mode is cls.AUTO else mode


class EngineStart(enum.StrEnum):
    """execution.engine_start: how vLLM's engine-core process starts inside an actor (auto: forkserver, measured
    on CPU and on an H200; spawn: vLLM's own way)."""

    AUTO = "auto"
    SPAWN = "spawn"
    FORKSERVER = "forkserver"

    def resolved(self) -> "EngineStart":
        """auto: the fork server, on every device: loads faster with the same decode on CPU and on an H200
        (figures in docs/benchmarks.md)."""
        return EngineStart.FORKSERVER if self is EngineStart.AUTO else self


def _switch(value) -> str:
    text = str(value).lower()
    return {"false": "off", "none": "off", "true": "on"}.get(text, text)


@dataclass(kw_only=True)
class ExecutionSection:
    """The `execution` block of conf/config.yaml: timeouts, retries, residency, order, deadline."""

    warmup: Any = "auto"  # auto | full | light | off (a bare YAML `off` reads as false)
    warmup_output_cap: Optional[int] = field(default=64, metadata=_fix(
        "execution.warmup_output_cap=64", "must be an integer ≥ 1 or null (the trial's own length)"))
    # Each engine's first trial after a load or a pool wake runs twice with the same prompts; the second is its
    # figure, the first goes to first_runs.parquet (the report's "First trials" sets the two side by side).
    first_trial_twice: bool = field(default=True, metadata=_fix("execution.first_trial_twice=true",
                                                                  "must be true or false"))
    trial_timeout_s: float = field(default=1800, metadata=_fix("execution.trial_timeout_s=1800",
                                                                "must be a number of seconds > 0"))
    start_timeout_s: float = field(default=1800, metadata=_fix("execution.start_timeout_s=1800",
                                                                "must be a number of seconds > 0"))
    max_trial_retries: int = field(default=1, metadata=_fix("execution.max_trial_retries=1",
                                                             "must be an integer ≥ 0"))
    resident: Any = "auto"  # auto | on | off
    deadline_s: Optional[float] = field(default=None, metadata=_fix("execution.deadline_s=3600",
                                                                     "must be seconds > 0 or null"))
    order_seed: int = field(default=0, metadata=_fix("execution.order_seed=0", "must be an integer"))
    shutdown_timeout_s: float = field(default=10, metadata=_fix("execution.shutdown_timeout_s=10",
                                                                 "must be seconds > 0"))
    engine_start: str = "auto"  # auto | spawn | forkserver (EngineStart)
    # One load per engine configuration apart from k: the largest-k engine runs every smaller k and schedule arm,
    # its per-step draft count set between trials (runner.plan.draft_hosts). auto: on off CUDA; on CUDA off until a
    # GPU table shows it faithful (docs/fidelity.md).
    live_draft_count: Any = "auto"  # auto | on | off
    # An engine that sleeps pins its first sleep's host buffers while vLLM's init compiles (forkserver only).
    sleep_pin_ahead: bool = field(default=True, metadata=_fix("execution.sleep_pin_ahead=true",
                                                              "must be true or false"))
    slo: OldExecutionSlo = field(default_factory=OldExecutionSlo)  # older name of the root's `slo`
    # Engines that outlive the command: left asleep in a named pool, woken by the next command that plans them.
    keep_engines: bool = field(default=False, metadata=_fix("execution.keep_engines=true", "must be true or false"))
    pool: str = field(default="default", metadata=_fix("execution.pool=default"))
    pool_ttl_s: float = field(default=1800, metadata=_fix("execution.pool_ttl_s=1800", "must be seconds > 0"))

    def __post_init__(self):
        errors = []
        raw_resident, raw_warmup = self.resident, self.warmup
        try:
            self.engine_start = EngineStart(str(self.engine_start).lower())
        except ValueError:
            errors.append(f"execution.engine_start={self.engine_start!r}: valid: auto, spawn, forkserver "
                          f"(fix: execution.engine_start=auto)")
        if _switch(self.live_draft_count) not in ("auto", "on", "off"):
            errors.append(f"execution.live_draft_count={self.live_draft_count!r}: valid: auto, on, off "
                          f"(fix: execution.live_draft_count=auto)")
        else:
            self.live_draft_count = _switch(self.live_draft_count)
        try:
            self.resident = Residency(_switch(self.resident))
        except ValueError:
            errors.append(f"execution.resident={raw_resident!r}: valid: auto, on, off (fix: execution.resident=auto)")
        try:
            self.warmup = Warmup(_switch(self.warmup))
        except ValueError:
            errors.append(f"execution.warmup={raw_warmup!r}: valid: auto, full, light, off (fix: execution.warmup=auto)")
        if self.deadline_s is not None and self.deadline_s <= 0:
            errors.append(f"execution.deadline_s={_g(self.deadline_s)} must be seconds > 0 or null "
                          f"(fix: execution.deadline_s=3600)")
        if self.shutdown_timeout_s <= 0:
            errors.append(f"execution.shutdown_timeout_s={_g(self.shutdown_timeout_s)} must be seconds > 0 "
                          f"(fix: execution.shutdown_timeout_s=10)")
        if self.warmup_output_cap is not None and self.warmup_output_cap < 1:
            errors.append(f"execution.warmup_output_cap={self.warmup_output_cap!r} must be an integer ≥ 1 or null "
                          f"(the trial's own length) (fix: execution.warmup_output_cap=64)")
        for name in ("trial_timeout_s", "start_timeout_s"):
            if getattr(self, name) <= 0:
                errors.append(f"execution.{name}={_g(getattr(self, name))} must be a number of seconds > 0 "
                              f"(fix: execution.{name}=1800)")
        if self.max_trial_retries < 0:
            errors.append(f"execution.max_trial_retries={self.max_trial_retries!r} must be an integer ≥ 0 "
                          f"(fix: execution.max_trial_retries=1)")
        errors += self._pool_problems()
        _problems(errors)

    def _pool_problems(self) -> list[str]:
        errors = []
        problem = plain_name_problem(self.pool, where="execution.pool", example="default")
        if problem:
            errors.append(problem.replace("it names a folder under output_root", "it names a Ray namespace"))
        if not _is_number(self.pool_ttl_s) or self.pool_ttl_s <= 0:
            errors.append(f"execution.pool_ttl_s={_g(self.pool_ttl_s)} must be seconds > 0: how long a pooled engine "
                          f"stays idle before it ends itself (fix: execution.pool_ttl_s=1800)")
        return errors
