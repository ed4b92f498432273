"""What a trial drafts on a shared engine (runner.plan.draft_hosts): a value the plan hands the actor. Pure."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Optional

# Every batch size (vLLM's lookup builder caps a range at the engine's max_num_seqs).
ALL_BATCHES = 1 << 30


@dataclass(frozen=True, kw_only=True)
class TrialDraft:
    """What a trial on a shared engine drafts: its own k (a schedule's largest k) or schedule, and its engine's k."""

    k: int
    schedule: Optional[str] = None  # [[start, end, k], ...] as JSON (EngineSettings.spec_schedule)
    engine_k: int
    planned_engine_id: str  # the engine of its own k in the full grid (which is not loaded)

    def ranges(self) -> Optional[list[list[int]]]:
        """The lookup the engine core is given: None for the engine's own static k."""
        if self.schedule:
            return [list(r) for r in json.loads(self.schedule)]
        if self.k == self.engine_k:
            return None
        return [[1, ALL_BATCHES, self.k]]

    @property
    def label(self) -> str:
        return f"k={self.k}" + (f" sched={self.schedule}" if self.schedule else "")

    def settings_on(self, engine_settings):
        """The settings the trial's rows carry: its engine's, with the k (or schedule) the trial ran."""
        return dataclasses.replace(engine_settings, num_speculative_tokens=self.k, spec_schedule=self.schedule)
