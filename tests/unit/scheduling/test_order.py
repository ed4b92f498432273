"""Order (pure): rounds of repeats, engines rotated, trials shuffled, engines onto lanes, positions."""
from __future__ import annotations

import dataclasses

from runner.measurement.workloads.decode import DecodeParams
from runner.plan.grid import Trial
from runner.scheduling.device import CPU, CUDA
from runner.scheduling.order import (JUDGED_SESSIONS, assign_lanes, lane_count, lane_steps, least_soon_needed,
                                     next_position, opening_first, pending_groups, round_steps, run_cost)
from tests.unit.scheduling.plans import rounds_plan, tp_plan


def test_rounds_hold_repeats_engines_rotate_and_trials_shuffle_deterministically():
    plan = rounds_plan(engines=3, trials=4, repeats=3)
    steps = round_steps(plan, engine_ids=["e0", "e1", "e2"], seed=7)
    assert [s.round for s in steps] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    orders = [[s.engine_id for s in steps if s.round == r] for r in range(3)]
    assert orders[1] == orders[0][1:] + orders[0][:1] and orders[2] == orders[1][1:] + orders[1][:1]
    assert all(all(t.repeat == s.round and t.engine_id == s.engine_id for t in s.trials) for s in steps)
    assert steps == round_steps(plan, engine_ids=["e0", "e1", "e2"], seed=7)
    other = round_steps(plan, engine_ids=["e0", "e1", "e2"], seed=8)
    assert {t.trial_id for s in other for t in s.trials} == {t.trial_id for t in plan.trials}
    assert [[t.trial_id for t in s.trials] for s in steps] != [[t.trial_id for t in s.trials] for s in other] or \
        [s.engine_id for s in steps] != [s.engine_id for s in other]


def test_resume_continues_the_interrupted_round():
    plan = rounds_plan(engines=2, trials=2, repeats=2)
    full = round_steps(plan, engine_ids=["e0", "e1"], seed=0)
    done = {t.trial_id for t in full[0].trials} | {full[1].trials[0].trial_id}
    resumed = round_steps(plan, engine_ids=["e0", "e1"], seed=0, skip_trial_ids=done)
    assert resumed[0].round == 0 and resumed[0].trials == tuple(opening_first(list(full[1].trials[1:])))
    assert [s.round for s in resumed] == [0, 1, 1]


def test_an_engines_first_visit_opens_with_its_opening_trial_the_rest_stay_shuffled():
    plan = rounds_plan(engines=2, trials=5, repeats=3)
    big = {t.trial_id: dataclasses.replace(t, params=DecodeParams(input_len=4096)) for t in plan.trials
           if t.concurrency != 3}
    plan = dataclasses.replace(plan, trials=[big.get(t.trial_id, t) for t in plan.trials])
    steps = round_steps(plan, engine_ids=["e0", "e1"], seed=5)
    first_visits = [s for s in steps if s.round == 0]
    assert all(s.trials[0].concurrency == 4 for s in first_visits)  # the most sessions: the figure to judge
    shuffled = [round_steps(plan, engine_ids=["e0", "e1"], seed=k)[2].trials for k in range(6)]
    assert len({tuple(t.trial_id for t in ts) for ts in shuffled}) > 1  # later visits: shuffled as before


def trial(concurrency: int, **params):
    return Trial(trial_id=f"c{concurrency}-{sorted(params.items())}", engine_id="e0", workload="decode",
                 params=DecodeParams(**params), concurrency=concurrency, repeat=0)


def test_the_opening_trial_is_the_cheapest_run_of_those_with_enough_sessions_to_judge():
    one_session = trial(1, input_len=128, output_len=32)
    shared_prefix_like = trial(16, input_len=4096, output_len=32)
    longer_prompts = trial(16, input_len=16384, output_len=32)
    multi_turn_like = trial(8, input_len=4096, output_len=64, requests_per_session=3)  # 192 decode steps in turn
    trials = [one_session, multi_turn_like, longer_prompts, shared_prefix_like]
    assert opening_first(trials) == [shared_prefix_like, one_session, multi_turn_like, longer_prompts]
    assert run_cost(multi_turn_like) == (192, 8 * (4096 + 64))
    beyond = trial(JUDGED_SESSIONS * 4, input_len=128, output_len=64)  # more sessions than the check needs
    assert opening_first([beyond, shared_prefix_like])[0] == shared_prefix_like


def test_without_enough_sessions_the_most_there_are_open():
    trials = [trial(1, input_len=128), trial(4, input_len=2048), trial(2, input_len=128)]
    assert [t.concurrency for t in opening_first(trials)] == [4, 1, 2]
    assert opening_first([]) == []


def test_equals_keep_their_order_and_a_trial_without_an_estimate_opens_last():
    a, b = trial(2, input_len=128), trial(2, input_len=128, seed=1)
    assert opening_first([a, b]) == [a, b] and opening_first([b, a]) == [b, a]
    unknown = dataclasses.replace(a, params=object())
    assert opening_first([unknown, b]) == [b, unknown]


def test_lanes_balance_engines_and_each_runs_its_own_rounds():
    plan = rounds_plan(engines=5, trials=2, repeats=1)
    lanes = assign_lanes(plan, lanes=2)
    assert sorted(sum(lanes, [])) == ["e0", "e1", "e2", "e3", "e4"] and [len(x) for x in lanes] == [3, 2]


def test_longest_group_first_and_tp_groups_take_their_gpus():
    plan = tp_plan(tps_and_trials=[(1, 1), (1, 5), (2, 3)])
    assert [g.engine.engine_id for g in pending_groups(plan, skip_trial_ids={"t1-0"})] == ["e1", "e2", "e0"]
    assert lane_count(plan, policy=CUDA, units=4, max_parallel=4) == 2  # the widest engine takes 2 GPUs a lane
    assert lane_count(plan, policy=CUDA, units=1, max_parallel=4) == 1  # too few: one lane all the same
    assert lane_count(plan, policy=CPU, units=4, max_parallel=3) == 3
    assert assign_lanes(plan, lanes=2) == [["e1"], ["e2", "e0"]]


def test_lane_steps_are_each_lanes_rounds_of_its_assigned_engines():
    plan = rounds_plan(engines=4, trials=2, repeats=2)
    lanes = lane_steps(plan, policy=CPU, units=2, max_parallel=2, seed=3)
    for i, ids in enumerate(assign_lanes(plan, lanes=2)):
        assert lanes[i] == round_steps(plan, engine_ids=ids, seed=3, lane=i)


def test_evict_the_engine_needed_last():
    class R:
        def __init__(self, engine_id):
            self.engine = type("E", (), {"engine_id": engine_id})()

    plan = rounds_plan(engines=3, trials=1, repeats=2)
    steps = round_steps(plan, engine_ids=["e0", "e1", "e2"], seed=0)[1:]
    order = [s.engine_id for s in steps]
    first, second = order[0], order[1]
    assert least_soon_needed([R(first), R(second)], steps).engine.engine_id == second
    assert least_soon_needed([R("e0"), R("gone")], steps).engine.engine_id == "gone"


def test_positions_continue_across_resumes():
    assert next_position([]) == 0
    assert next_position([{"position": 4}, {"position": None}, {"position": 9}]) == 10
