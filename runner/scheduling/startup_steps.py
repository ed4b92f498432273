"""The command's start-up before its first engine, step by step: one terminal line, so that a slow start says
where its seconds went (a fresh machine pays first-use costs in several of them)."""
from __future__ import annotations

import dataclasses
import time
from typing import Optional


@dataclasses.dataclass(kw_only=True)
class StartupSteps:
    origin: float  # epoch seconds: the process's start
    ends: list[tuple[str, float]] = dataclasses.field(default_factory=list)  # (step, epoch seconds at its end)

    def mark(self, step: str, *, at: Optional[float] = None) -> None:
        self.ends.append((step, time.time() if at is None else at))

    def durations(self) -> list[tuple[str, float]]:
        starts = [self.origin] + [end for _, end in self.ends[:-1]]
        return [(step, max(0.0, end - start)) for (step, end), start in zip(self.ends, starts)]

    def line(self) -> str:
        parts = " · ".join(f"{step} {seconds:.1f} s" for step, seconds in self.durations())
        total = (self.ends[-1][1] - self.origin) if self.ends else 0.0
        return f"start-up: {parts} (total {total:.1f} s before the first engine's actor)"
