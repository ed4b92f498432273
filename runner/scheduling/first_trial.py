"""What the driver did between its start-up line and the command's first trial, part by part: one terminal line
when that trial goes out, so that a slow first trial (engines woken from the pool, no load) says where its seconds
went (the `start-up:` line covers what came before the first engine's actor)."""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field


@dataclass(kw_only=True)
class FirstTrialClock:
    origin: float  # epoch seconds: the command's start
    parts: dict[str, float] = field(default_factory=dict)  # part -> seconds (calls side by side: each counted)
    notes: list[str] = field(default_factory=list)
    done: bool = False

    def add(self, part: str, seconds: float) -> None:
        if not self.done:
            self.parts[part] = self.parts.get(part, 0.0) + max(0.0, seconds)

    @contextlib.contextmanager
    def timed(self, part: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(part, time.perf_counter() - started)

    def note(self, text: str) -> None:
        if not self.done:
            self.notes.append(text)

    def line(self, now: float) -> str:
        parts = " · ".join(f"{part} {seconds:.1f} s" for part, seconds in self.parts.items() if seconds >= 0.05)
        notes = f" ({'; '.join(self.notes)})" if self.notes else ""
        return f"first trial: {now - self.origin:.1f} s after the command's start; since the start-up line: " \
               f"{parts or 'nothing over 0.05 s'}{notes}"

    def first_trial(self) -> None:
        """The first trial's call went out: the line, once."""
        if self.done:
            return
        self.done = True
        print(self.line(time.time()), flush=True)
