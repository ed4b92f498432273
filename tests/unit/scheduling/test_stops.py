"""Stop rules (pure): the deadline and its estimates, retries."""
from __future__ import annotations

import time

import pytest

from runner.scheduling.order import round_steps
from runner.scheduling.stops import (Deadline, DeadlineReached, back_before_deadline, load_estimate, may_retry,
                                     trial_estimate)
from tests.unit.scheduling.plans import rounds_plan


def test_trial_estimate_from_the_sweep_so_far():
    durations = {("e0", "decode"): [2.0, 4.0, 3.0], ("e1", "decode"): [10.0]}
    assert trial_estimate(durations, engine_id="e0", workload="decode") == 3.0
    assert trial_estimate(durations, engine_id="e2", workload="decode") == 3.5  # any engine's, median
    assert trial_estimate(durations, engine_id="e0", workload="multi_turn") is None


def test_load_estimate_is_the_engines_own_else_the_median():
    assert load_estimate({"e0": 10.0, "e1": 30.0, "e2": 40.0}, engine_id="e1") == 30.0
    assert load_estimate({"e0": 10.0, "e1": 30.0, "e2": 40.0}, engine_id="e9") == 30.0
    assert load_estimate({}, engine_id="e0") is None


def _ahead():
    """steps[0]'s engine has just run; two other engines load (60 s each) and run 2 trials (2 s) before it again."""
    plan = rounds_plan(engines=3, trials=2, repeats=2)
    steps = round_steps(plan, engine_ids=["e0", "e1", "e2"])
    return dict(engine_id=steps[0].engine_id, steps=steps[1:], loaded=set(),
                loads={"e0": 60.0, "e1": 60.0, "e2": 60.0},
                durations={("e0", "decode"): [2.0], ("e1", "decode"): [2.0], ("e2", "decode"): [2.0]})


def test_an_engine_is_kept_when_its_next_turn_is_reachable():
    assert back_before_deadline(left_s=1000, **_ahead())  # 124 s ahead
    assert back_before_deadline(left_s=None, **_ahead())


def test_an_engine_is_not_kept_when_the_deadline_comes_first():
    assert not back_before_deadline(left_s=100, **_ahead())
    never_again = {**_ahead(), "engine_id": "gone"}
    assert not back_before_deadline(left_s=1000, **never_again)


def test_the_deadline_stops_a_call_that_cannot_end_before_it():
    deadline = Deadline(deadline_s=100, t0=time.monotonic() - 90)
    deadline.check(what="trial t", estimate_s=None, todo=lambda: 3)  # no estimate yet: the first one runs
    deadline.check(what="trial t", estimate_s=5, todo=lambda: 3)
    with pytest.raises(DeadlineReached, match="trial t would take ~20 s") as stop:
        deadline.check(what="trial t", estimate_s=20, todo=lambda: 3)
    assert stop.value.left == 3
    Deadline(deadline_s=None).check(what="x", estimate_s=1e9, todo=lambda: 0)


def test_a_trial_retries_while_within_max_trial_retries():
    assert may_retry(attempts=1, max_retries=1) and not may_retry(attempts=2, max_retries=1)
    assert not may_retry(attempts=1, max_retries=0)
