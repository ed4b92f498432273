"""The dry run's text shows the run's own lane assignment."""
from __future__ import annotations

from runner.config.execution import Residency
from runner.scheduling.describe import describe_devices, describe_rounds
from runner.scheduling.device import policy_for
from runner.scheduling.order import lane_steps
from runner.scheduling.settings import Capacity
from tests.unit.scheduling.plans import rounds_plan, tp_plan


def _shown_lanes(lines: list[str]) -> list[list[str]]:
    return [[] if "(idle)" in line else line.split(": ", 1)[1].split(" -> ") for line in lines
            if line.startswith("  lane ")]


def _run_lanes(plan, *, device, capacity, done=frozenset()) -> list[list[str]]:
    steps = lane_steps(plan, policy=policy_for(device), units=capacity.device_units,
                       max_parallel=capacity.max_parallel_engines, seed=0, skip_trial_ids=done)
    return [list(dict.fromkeys(s.engine_id for s in lane)) for lane in steps]


def test_the_dry_runs_lanes_are_the_runs():
    cases = [(tp_plan(tps_and_trials=[(1, 1), (1, 5), (2, 3), (2, 2)]), "cuda", Capacity(device_units=4,
                                                                                            max_parallel_engines=4)),
             (tp_plan(tps_and_trials=[(1, 2), (1, 5), (1, 3)]), "cuda",
              Capacity(device_units=8, max_parallel_engines=2)),
             (rounds_plan(engines=5, trials=2, repeats=2), "cpu", Capacity(device_units=2, max_parallel_engines=2)),
             (rounds_plan(engines=3, trials=1, repeats=1), "cpu", Capacity(device_units=4, max_parallel_engines=4))]
    for plan, device, capacity in cases:
        for done in (frozenset(), {plan.trials[0].trial_id}):
            shown = _shown_lanes(describe_devices(plan, device=device, capacity=capacity, done=set(done)))
            run = _run_lanes(plan, device=device, capacity=capacity, done=done)
            # The run's lanes, in its order of engines (a lane's first round), are the dry run's.
            assert [sorted(ids) for ids in shown] == [sorted(ids) for ids in run], (device, capacity)


def test_rounds_line_names_what_switching_costs():
    plan = rounds_plan(engines=2, trials=1, repeats=2)
    assert "loaded, idle between turns" in describe_rounds(plan, device="cpu", resident=Residency.AUTO)[0]
    assert "sleep mode" in describe_rounds(plan, device="cuda", resident=Residency.AUTO)[0]
    assert "resident engines off" in describe_rounds(plan, device="cpu", resident=Residency.OFF)[0]
    assert describe_rounds(rounds_plan(engines=2, trials=1, repeats=1), device="cpu",
                           resident=Residency.AUTO) == ["rounds: 1; engines load once each"]


def test_the_dry_run_names_each_engines_opening_trial():
    plan = rounds_plan(engines=3, trials=4, repeats=2)  # concurrency 0-3 per engine, the same params
    lines = describe_devices(plan, device="cpu", capacity=Capacity(device_units=2, max_parallel_engines=2),
                             done=set(), seed=3)
    opening = lines[lines.index(next(line for line in lines if line.startswith("each engine's first visit"))) + 1:]
    # One line per engine, each opening with its most sessions (a figure the check can judge).
    assert sorted(line.split(":")[0].strip() for line in opening) == ["e0", "e1", "e2"]
    assert all(" decode c=3 " in line for line in opening)
