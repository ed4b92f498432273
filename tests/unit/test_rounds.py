"""Pure scheduling logic: residency plan from memory numbers, round order, deadline estimates."""
from __future__ import annotations

import dataclasses

from runner.execution.scheduler import (CPU_IDLE_ENGINE_HARMLESS, actor_resources, assign_lanes, engine_for_actor,
                                        least_soon_needed, next_position, plan_residency, round_steps,
                                        trial_estimate)
from runner.plan.grid import EngineConfig, Plan, Trial
from runner.schema import EngineSettings

H200_GIB = 139.8


def _plan(engines: int, trials: int, repeats: int) -> Plan:
    es = [EngineConfig(engine_id=f"e{i}", settings=EngineSettings(model="m"), engine_args={}) for i in range(engines)]
    ts = [Trial(trial_id=f"t{i}-{j}-r{r}", engine_id=f"e{i}", workload="decode", params={}, concurrency=j, repeat=r)
          for i in range(engines) for r in range(repeats) for j in range(trials)]
    return Plan(sweep="s", engines=es, trials=ts)


# ---- residency planner --------------------------------------------------------------------------
def test_two_engines_at_0_9_stay_resident_on_an_h200():
    plan = plan_residency(device="cuda", budgets=[0.9, 0.9], device_total_gib=H200_GIB, host_available_gib=1000)
    assert plan.max_resident == 2


def test_budget_0_985_falls_back_to_load_run_stop():
    # 0.985 × 139.8 = 137.7 GiB: 1.5 GiB left cannot hold an asleep engine's 1.8 GiB plus the next actor.
    plan = plan_residency(device="cuda", budgets=[0.9, 0.985], device_total_gib=H200_GIB, host_available_gib=1000)
    assert plan.max_resident == 1


def test_resident_count_follows_what_asleep_engines_hold():
    # 0.9: 13.98 GiB free - 0.6 GiB context = 13.38 GiB: 7 asleep at 1.8 GiB each, 1 awake.
    assert plan_residency(device="cuda", budgets=[0.9] * 12, device_total_gib=H200_GIB,
                          host_available_gib=1000).max_resident == 8
    assert plan_residency(device="cuda", budgets=[0.9] * 12, device_total_gib=H200_GIB, host_available_gib=1000,
                          asleep_held_gib=7.0).max_resident == 2
    assert plan_residency(device="cuda", budgets=[0.5] * 3, device_total_gib=None,
                          host_available_gib=1000).max_resident == 1  # unknown GPU: nothing resident


def test_cpu_residents_limited_by_host_memory():
    assert plan_residency(device="cpu", budgets=[0.9] * 4, device_total_gib=None, host_available_gib=20,
                          cpu_engine_gib=2.5).max_resident == 4
    assert plan_residency(device="cpu", budgets=[0.9] * 4, device_total_gib=None, host_available_gib=5,
                          cpu_engine_gib=2.5).max_resident == 1
    assert plan_residency(device="cpu", budgets=[0.9], device_total_gib=None, host_available_gib=50).max_resident == 1


def test_cpu_default_comes_from_the_idle_engine_measurement():
    # bs1 0.990×, bs4 1.021× beside an idle engine (bench/efficiency.py --idle-engine 4, 2026-12-03)
    assert CPU_IDLE_ENGINE_HARMLESS is True


def test_several_actors_share_one_gpu_and_idle_cpu_actors_hold_no_core():
    assert actor_resources(device="cuda", width=1, share=16, cpus_per_engine=1) == {"num_gpus": 0.0625, "num_cpus": 0}
    assert actor_resources(device="cuda", width=2, share=16, cpus_per_engine=1) == {"num_gpus": 2, "num_cpus": 0}
    assert actor_resources(device="cpu", width=1, share=2, cpus_per_engine=1) == {"num_cpus": 0}


def test_sleep_mode_only_where_asked():
    engine = _plan(1, 1, 1).engines[0]
    assert engine_for_actor(engine, sleep_mode=True).engine_args == {"enable_sleep_mode": True}
    assert engine_for_actor(engine).engine_args == {}


# ---- rounds ---------------------------------------------------------------------------------------
def test_rounds_hold_repeats_engines_rotate_and_trials_shuffle_deterministically():
    plan = _plan(engines=3, trials=4, repeats=3)
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
    plan = _plan(engines=2, trials=2, repeats=2)
    full = round_steps(plan, engine_ids=["e0", "e1"], seed=0)
    done = {t.trial_id for t in full[0].trials} | {full[1].trials[0].trial_id}
    resumed = round_steps(plan, engine_ids=["e0", "e1"], seed=0, skip_trial_ids=done)
    assert resumed[0].round == 0 and resumed[0].trials == full[1].trials[1:]
    assert [s.round for s in resumed] == [0, 1, 1]


def test_lanes_balance_engines_and_each_runs_its_own_rounds():
    plan = _plan(engines=5, trials=2, repeats=1)
    lanes = assign_lanes(plan, lanes=2, device="cpu")
    assert sorted(sum(lanes, [])) == ["e0", "e1", "e2", "e3", "e4"] and [len(x) for x in lanes] == [3, 2]


def test_evict_the_engine_needed_last():
    class R:
        def __init__(self, engine_id):
            self.engine = type("E", (), {"engine_id": engine_id})()

    plan = _plan(engines=3, trials=1, repeats=2)
    steps = round_steps(plan, engine_ids=["e0", "e1", "e2"], seed=0)[1:]
    order = [s.engine_id for s in steps]  # e.g. e1 e2 | e0 e1 e2: e0 is needed last of e0, e1
    first, second = order[0], order[1]
    assert least_soon_needed([R(first), R(second)], steps).engine.engine_id == second
    assert least_soon_needed([R("e0"), R("gone")], steps).engine.engine_id == "gone"


# ---- deadline and positions -----------------------------------------------------------------------
def test_trial_estimate_from_the_sweep_so_far():
    durations = {("e0", "decode"): [2.0, 4.0, 3.0], ("e1", "decode"): [10.0]}
    assert trial_estimate(durations, engine_id="e0", workload="decode") == 3.0
    assert trial_estimate(durations, engine_id="e2", workload="decode") == 3.5  # any engine's, median
    assert trial_estimate(durations, engine_id="e0", workload="multi_turn") is None


def test_positions_continue_across_resumes():
    assert next_position([]) == 0
    assert next_position([{"position": 4}, {"position": None}, {"position": 9}]) == 10


# ---- keep an engine only if its next turn comes before the deadline ------------------------------
def _scheduler_at(*, deadline_s, elapsed_s: float):
    import collections
    import time

    from runner.execution.scheduler import ExecutionSettings, Scheduler, _Lane, _Resident
    from runner.measurement.records import RunKeys

    plan = _plan(engines=3, trials=2, repeats=2)
    sched = Scheduler(plan=plan, model_cfg={}, keys=RunKeys(sweep="s", run_id="r"), sink=None,
                      settings=ExecutionSettings(device="cuda", deadline_s=deadline_s), log_dir="/tmp")
    sched.t0 = time.monotonic() - elapsed_s
    sched.loads = {"e0": 60.0, "e1": 60.0, "e2": 60.0}
    sched.durations = {("e0", "decode"): [2.0], ("e1", "decode"): [2.0], ("e2", "decode"): [2.0]}
    steps = round_steps(plan, engine_ids=["e0", "e1", "e2"])
    lane = _Lane(index=0, steps=collections.deque(steps[1:]))  # steps[0]'s engine has just run its trials
    return sched, lane, _Resident(engine=plan.engine(steps[0].engine_id), actor=None)


def test_an_engine_is_kept_when_its_next_turn_is_reachable():
    # Before its next turn: two other engines load (60 s each) and run 2 trials each (2 s): 124 s ahead.
    sched, lane, resident = _scheduler_at(deadline_s=1000, elapsed_s=0)
    assert sched._back_before_deadline(lane, resident)
    sched, lane, resident = _scheduler_at(deadline_s=None, elapsed_s=0)
    assert sched._back_before_deadline(lane, resident)


def test_an_engine_is_not_put_to_sleep_when_the_deadline_comes_first():
    sched, lane, resident = _scheduler_at(deadline_s=500, elapsed_s=400)  # 100 s left < 124 s ahead
    assert not sched._back_before_deadline(lane, resident)


def test_cpu_lanes_load_side_by_side_only_with_cores_to_spare():
    from runner.execution.scheduler import parallel_cpu_loads

    assert parallel_cpu_loads(cores=2, cpus_per_engine=1, lanes=1) == 1  # this machine: one load at a time
    assert parallel_cpu_loads(cores=16, cpus_per_engine=2, lanes=1) == 4
    assert parallel_cpu_loads(cores=16, cpus_per_engine=2, lanes=4) == 1


# ---- on CUDA a retired engine's teardown ends before the next wake or load -------------------------
class _Actor:
    def __init__(self, log: list):
        self.log = log
        self.wake_up = self.shutdown = self.read_log = self

    def remote(self):
        self.log.append("wake")
        return "ref"


def _scheduler_with_a_dying_engine(device: str):
    sched, lane, resident = _scheduler_at(deadline_s=None, elapsed_s=0)
    sched.settings = dataclasses.replace(sched.settings, device=device)
    log: list[str] = []
    sched.dying = ["an engine retired a moment ago"]
    sched._reap = lambda *, wait=False: (log.append(f"reap wait={wait}"), sched.dying.clear())
    sched._call = lambda lane, phase, ref, timeout_s: log.append(f"call {phase.value}")
    resident.actor, resident.asleep = _Actor(log), True
    lane.residents[resident.engine.engine_id] = resident
    return sched, lane, resident, log


def test_a_wake_on_cuda_waits_for_the_retired_engines_teardown():
    sched, lane, resident, log = _scheduler_with_a_dying_engine("cuda")
    sched._enter_engine(lane, resident.engine)
    assert log == ["reap wait=True", "wake", "call wake"]


def test_a_cpu_wake_leaves_teardown_in_the_background():
    sched, lane, resident, log = _scheduler_with_a_dying_engine("cpu")
    sched._enter_engine(lane, resident.engine)
    assert log == ["wake", "call wake"]
