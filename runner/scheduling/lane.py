"""One device lane's state: its steps left, its resident engines, the one call it has in flight."""
from __future__ import annotations

import collections
import time
from dataclasses import dataclass, field
from typing import Optional

from runner.plan.grid import EngineConfig, Trial
from runner.schema import Phase
from runner.scheduling.order import Step


@dataclass(kw_only=True)
class Resident:
    engine: EngineConfig
    actor: object
    asleep: bool = False
    weights_gib: float = 0.0
    sleeps: bool = True  # started with sleep mode where the device has it (else it is evicted, never put to sleep)


@dataclass(kw_only=True)
class Preload:
    """An engine loading beside the lane's current one."""

    resident: Resident
    ref: object
    began: float  # epoch


@dataclass(kw_only=True)
class Call:
    """The lane's one call in flight: its phase, its Ray ref, when it started and must answer by."""

    phase: Phase
    ref: object
    started: float  # monotonic
    started_epoch: float
    deadline: float


@dataclass(kw_only=True)
class Lane:
    """One device unit (GPU, TP group or CPU slot): its own rounds, its own resident engines."""

    index: int
    steps: collections.deque[Step]
    bundle: Optional[tuple] = None  # (placement group, bundle index) on cuda
    max_resident: int = 1
    planned: bool = False
    residents: dict[str, Resident] = field(default_factory=dict)
    spare: object = None  # an actor started ahead (process + imports + context), no engine yet
    spare_ready: object = None  # its prepare call: on CPU no trial starts before it has answered
    trials: collections.deque[Trial] = field(default_factory=collections.deque)  # the current step's, left
    current: Optional[Resident] = None
    call: Optional[Call] = None
    trial: Optional[Trial] = None
    round: int = -1
    preloading: dict[str, Preload] = field(default_factory=dict)
    preload_id: Optional[str] = None
    entering: Optional[EngineConfig] = None  # the engine to enter once the preloads are in

    @property
    def phase(self) -> Phase:
        return self.call.phase if self.call is not None else Phase.IDLE

    @property
    def ref(self):
        return self.call.ref if self.call is not None else None

    def go(self, phase: Phase, ref, timeout_s: float) -> None:
        now = time.monotonic()
        self.call = Call(phase=phase, ref=ref, started=now, started_epoch=time.time(), deadline=now + timeout_s)

    def idle(self, *, drop_engine: bool = False) -> None:
        """No call in flight; `drop_engine`: the lane holds no current engine either."""
        self.call = None
        if drop_engine:
            self.current, self.trial = None, None

    def overdue(self) -> bool:
        return self.call is not None and time.monotonic() > self.call.deadline

    def next_other_engine(self) -> Optional[str]:
        current = self.current.engine.engine_id if self.current is not None else None
        return next((st.engine_id for st in self.steps if st.engine_id != current), None)

    def trials_left(self) -> int:
        return sum(len(st.trials) for st in self.steps) + len(self.trials)
