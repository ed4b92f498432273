"""What the actor's calls return to the driver (typed: the driver reads fields, never guesses)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(kw_only=True)
class StartResult:
    ok: bool
    columns: dict = field(default_factory=dict)
    failure_kind: Optional[str] = None
    failure_reason: Optional[str] = None
    failure_numbers: dict = field(default_factory=dict)
    memory: dict = field(default_factory=dict)  # an adopted pooled engine: its node's memory (actor.memory_report)


@dataclass(kw_only=True)
class TrialResult:
    trial: object  # runner.schema.TrialRecord
    requests: list
    # The engine's first trial after a load or a pool wake ran twice: this is the first run (TABLES["first_runs"]).
    first_run: Optional["TrialResult"] = None
