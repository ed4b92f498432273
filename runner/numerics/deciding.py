"""The figure that decides a workload: which column, which direction, which requests. Pure.

Each workload class declares one of these (`Workload.deciding`); the report and
the race scheduler read it from the workload registry, so a new workload cannot
silently be judged on another workload's figure.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Optional


@dataclass(frozen=True, kw_only=True)
class RequestSelection:
    """Take these requests of a trial instead of a trial column: their p50, or each one as a sample."""

    description: str
    turn: Optional[int] = None
    phases: Optional[tuple[str, ...]] = None
    per_request: bool = False  # every selected request is a sample (else: one sample per trial, their p50)
    reciprocal: bool = False  # the sample is 1 / column (TPOT → decode tok/s)


@dataclass(frozen=True, kw_only=True)
class DecidingMetric:
    label: str
    column: str  # a trials column; with `requests`, the requests column whose p50 is taken
    higher_is_better: bool
    unit: str
    scale: float = 1.0  # display scale (seconds → ms)
    requests: Optional[RequestSelection] = None

    def display(self, value) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return "–"
        return f"{value * self.scale:.4g}"

    @property
    def heading(self) -> str:
        return f"{self.label} ({self.unit}, {'higher' if self.higher_is_better else 'lower'} is better)"


DECODE_SPEED = DecidingMetric(label="decode tok/s per session", column="decode_tok_s_per_session",
                              higher_is_better=True, unit="tok/s")
# Each measured run is a sample, so that R runs in one trial count as R repeats (reference study B).
DECODE_SPEED_PER_RUN = replace(DECODE_SPEED, label="decode tok/s per run", column="tpot_s",
                               requests=RequestSelection(description="each measured run is a sample (1 / TPOT)",
                                                         phases=("measured",), per_request=True, reciprocal=True))
TTFT_P50 = DecidingMetric(label="TTFT p50", column="ttft_p50_s", higher_is_better=False, unit="ms", scale=1000.0)
REPEAT_TTFT_P50 = replace(TTFT_P50, label="repeat TTFT p50")
FIRST_REQUEST_TTFT_P50 = replace(TTFT_P50, label="first-request TTFT p50")
# Turn 0 is a cold prefill for every arm and would dilute the difference caching makes (reference study A).
TURN2_TTFT_P50 = replace(TTFT_P50, label="turn-2 TTFT p50", column="ttft_s",
                         requests=RequestSelection(description="turn index 1 (first follow-up)", turn=1))
