"""A lane's one call in flight: its phase, its deadline, and going idle."""
from __future__ import annotations

import collections

from runner.schema import Phase
from runner.scheduling.lane import Lane, Resident
from runner.scheduling.order import round_steps
from tests.unit.scheduling.plans import rounds_plan


def test_a_call_sets_the_phase_and_idle_clears_it():
    lane = Lane(index=0, steps=collections.deque())
    assert lane.phase is Phase.IDLE and lane.ref is None and not lane.overdue()
    lane.go(Phase.TRIAL, "ref", timeout_s=-1.0)
    assert lane.phase is Phase.TRIAL and lane.ref == "ref" and lane.overdue()
    lane.current = Resident(engine=rounds_plan(1, 1, 1).engines[0], actor=None)
    lane.idle()
    assert lane.phase is Phase.IDLE and lane.current is not None
    lane.idle(drop_engine=True)
    assert lane.current is None and lane.trial is None


def test_the_next_other_engine_and_the_trials_left():
    plan = rounds_plan(engines=2, trials=2, repeats=2)
    steps = round_steps(plan, engine_ids=["e0", "e1"])
    lane = Lane(index=0, steps=collections.deque(steps[1:]))
    lane.current = Resident(engine=plan.engine(steps[0].engine_id), actor=None)
    assert lane.next_other_engine() == next(s.engine_id for s in steps[1:] if s.engine_id != steps[0].engine_id)
    assert lane.trials_left() == 6
