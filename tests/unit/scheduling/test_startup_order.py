"""Engine starts on a GPU that engines share (cluster.engines_per_gpu=2): one at a time per GPU, then side by side;
a start that fails for memory goes once more behind its neighbour's, its first failure kept on the row. The policy
purely, then the lane machine with recording actors (no Ray, no GPU)."""
from __future__ import annotations

import collections
import dataclasses

from runner.execution.failures import parse_startup_failure
from runner.execution.results import StartResult
from runner.measurement.records import RunKeys
from runner.config.sections import run_config
from runner.schema import EngineStatus, Phase
from runner.scheduling.actors import EngineActors
from runner.scheduling.held import HeldEngines
from runner.scheduling.cluster import Capacity
from runner.scheduling.describe import describe_devices
from runner.scheduling.handlers import LaneMachine
from runner.scheduling.lane import Lane, Resident
from runner.scheduling.race import Race
from runner.scheduling.settings import ExecutionSettings
from runner.scheduling.startup_order import StartGate, device_of, retries_start, start_order_line
from runner.scheduling.stops import Deadline
from tests.support.recorded import RecordedActor as Actor
from tests.unit.scheduling.plans import rounds_plan

PROFILE_ERROR = ("AssertionError: Error in memory profiling. Initial free memory 40.8 GiB, current free memory "
                 "65.96 GiB. This happens when other processes sharing the same container release GPU memory while "
                 "vLLM is profiling during initialization.")


def test_lanes_sharing_a_gpu_take_turns_and_other_gpus_do_not_wait():
    gate = StartGate(engines_per_gpu=2)
    assert [device_of(lane=i, engines_per_gpu=2) for i in range(4)] == [0, 0, 1, 1]
    assert gate.admit(0) and not gate.admit(1) and gate.admit(2) and not gate.admit(3)
    assert gate.is_waiting(1) and gate.is_waiting(3) and not gate.is_waiting(0)
    assert gate.release(0) == 1 and not gate.is_waiting(1)  # lane 1 now holds GPU 0
    assert not gate.admit(0)  # a retry on lane 0 goes behind lane 1's start
    assert gate.release(1) == 0 and gate.release(0) is None
    assert gate.release(2) == 3 and gate.release(3) is None


def test_the_gpu_an_actor_reported_groups_the_lanes():
    gate = StartGate(engines_per_gpu=2)
    gate.place(0, reported="node:0")
    gate.place(1, reported="node:1")  # Ray packed them on different GPUs: no wait
    assert gate.admit(0) and gate.admit(1)


def test_one_engine_per_gpu_never_waits():
    gate = StartGate(engines_per_gpu=1)
    assert gate.admit(0) and gate.admit(1) and gate.release(0) is None


def test_only_memory_failures_on_a_shared_gpu_are_retried_and_only_once():
    assert retries_start("memory_changed_while_profiling", failed_starts=1, engines_per_gpu=2)
    assert retries_start("not_enough_free_memory_for_budget", failed_starts=1, engines_per_gpu=2)
    assert not retries_start("memory_changed_while_profiling", failed_starts=2, engines_per_gpu=2)
    assert not retries_start("memory_changed_while_profiling", failed_starts=1, engines_per_gpu=1)
    assert not retries_start("speculative_config_refused", failed_starts=1, engines_per_gpu=2)


def test_vllms_profiling_error_is_a_memory_failure_with_its_numbers():
    failure = parse_startup_failure(log=PROFILE_ERROR)
    assert failure.kind == "memory_changed_while_profiling"
    assert failure.numbers == {"initial_free_gib": 40.8, "current_free_gib": 65.96}


def test_an_engine_going_waits_for_its_neighbours_start_and_goes_before_the_next():
    gate = StartGate(engines_per_gpu=2)
    assert gate.admit(0)  # lane 0 profiles memory on GPU 0
    assert gate.hold_release(1, "lane 1's engine")  # its neighbour's engine would free memory mid-profile: held
    assert not gate.hold_release(0, "lane 0's other engine")  # the starting lane's own go now
    assert not gate.hold_release(2, "GPU 1's engine")  # another GPU: no wait
    assert gate.releases_due(0) == ["lane 1's engine"] and gate.releases_due(0) == []
    gate.release(0)
    assert not gate.hold_release(1, "later")  # no start in flight: it goes at once
    assert not StartGate(engines_per_gpu=1).hold_release(1, "alone")


def test_the_dry_run_says_how_starts_are_ordered():
    capacity = Capacity(device_units=2, max_parallel_engines=2, engines_per_gpu=2)
    lines = describe_devices(rounds_plan(engines=2, trials=1, repeats=1), device="cuda", capacity=capacity,
                             done=set())
    (line,) = [ln for ln in lines if ln.startswith("engine starts:")]
    assert "one at a time on each GPU" in line and "then their engines run side by side" in line
    assert "retried once" in line and "start_retried_after" in line
    assert "an engine going waits for a neighbour's start" in line and "270 s" in line and "no speed-up" in line
    assert start_order_line(engines_per_gpu=1) is None
    alone = describe_devices(rounds_plan(engines=2, trials=1, repeats=1), device="cuda",
                             capacity=Capacity(device_units=1, max_parallel_engines=1), done=set())
    assert not any(ln.startswith("engine starts:") for ln in alone)


# ---- the lane machine, recording ----
class Recorder:
    loads: dict = {}
    durations: dict = {}

    def __init__(self):
        self.engines, self.failed_trials = [], []

    def call_going_out(self):
        pass

    def span(self, **kw):
        pass

    def engine_started(self, engine, *, columns, log_file, device):
        self.engines.append((engine.engine_id, EngineStatus.OK, columns.get("start_retried_after")))

    def engine_record(self, engine, **columns):
        return (engine.engine_id, columns["status"], columns.get("start_retried_after"))

    def write_engine(self, record):
        self.engines.append(record)

    def trial_failed(self, engine, trial, **kw):
        self.failed_trials.append(trial.trial_id)


def _two_lanes_on_one_gpu():
    log: list[str] = []
    plan = rounds_plan(engines=2, trials=1, repeats=1)
    config = run_config(sweep_name="s", model="m", grid={"spec_method": ["off"]}, workloads={"decode": {}})
    config.engine = dataclasses.replace(config.engine, device="cuda")
    s = ExecutionSettings.of(config, capacity=Capacity(device_units=2, max_parallel_engines=2, engines_per_gpu=2))
    pool = EngineActors(settings=s, keys=RunKeys(sweep="s", run_id="r"), log_dir="/tmp")
    pool.save_log = lambda engine, actor: None
    pool.kill = lambda actor, graceful: log.append(f"kill {actor.name}")
    machine = LaneMachine(plan=plan, model_cfg={}, settings=s, held=HeldEngines(actors=pool), recorder=Recorder(),
                          race=Race(plan=plan, enabled=False, tie_band=0.02, seed=0),
                          deadline=Deadline(deadline_s=None))
    fresh = iter(range(100))
    machine.new_actor = lambda lane, engine: Actor(log, f"{engine.engine_id}.{next(fresh)}")
    machine.after_load = lambda lane: log.append(f"lane {lane.index} in")
    machine.start_spare = lambda lane: None
    lanes = [Lane(index=i, steps=collections.deque(), planned=True) for i in range(2)]
    machine.lanes = lanes
    for lane, engine in zip(lanes, plan.engines):
        lane.current = Resident(engine=engine, actor=machine.new_actor(lane, engine))
        machine.start_engine(lane)
    return machine, lanes, log


def _answer(machine, lane, result):
    machine.end_span(lane, ok=result.ok)
    machine.on_started(lane, result)


def test_the_second_engine_starts_once_the_first_is_in():
    machine, (lane0, lane1), log = _two_lanes_on_one_gpu()
    assert log == ["start e0.0"] and lane0.phase is Phase.START and lane1.call is None
    assert machine.start_gate.is_waiting(1)  # the loop keeps it (no call in flight, not done)
    _answer(machine, lane0, StartResult(ok=True, columns={"load_s": 1.0}))
    assert log == ["start e0.0", "start e1.1", "lane 0 in"] and lane1.phase is Phase.START
    _answer(machine, lane1, StartResult(ok=True, columns={"load_s": 1.0}))
    assert log[-1] == "lane 1 in" and machine.recorder.engines == [("e0", EngineStatus.OK, None),
                                                                     ("e1", EngineStatus.OK, None)]


def test_a_memory_failure_is_retried_behind_the_neighbour_and_its_reason_kept():
    machine, (lane0, lane1), log = _two_lanes_on_one_gpu()
    failure = parse_startup_failure(log=PROFILE_ERROR)
    _answer(machine, lane0, StartResult(ok=False, failure_kind=failure.kind, failure_reason=failure.reason))
    # lane 1's start goes first; e0 again on a fresh actor, after it (no call left in flight meanwhile: the loop
    # must not take the answered one again)
    assert log == ["start e0.0", "start e1.1", "kill e0.0"] and machine.start_gate.is_waiting(0)
    assert lane0.call is None and lane0.current.actor.name == "e0.2"
    _answer(machine, lane1, StartResult(ok=True, columns={}))
    assert log[-2:] == ["start e0.2", "lane 1 in"]
    _answer(machine, lane0, StartResult(ok=True, columns={}))
    (kind, status, first), = [row for row in machine.recorder.engines if row[0] == "e0"]
    assert status is EngineStatus.OK and first.startswith("memory_changed_while_profiling: AssertionError: Error")


def test_a_second_memory_failure_fails_the_engine_with_the_first_reason_kept():
    machine, (lane0, lane1), log = _two_lanes_on_one_gpu()
    lane0.steps = collections.deque()
    failed = StartResult(ok=False, failure_kind="memory_changed_while_profiling", failure_reason=PROFILE_ERROR)
    _answer(machine, lane0, failed)
    _answer(machine, lane1, StartResult(ok=True, columns={}))
    _answer(machine, lane0, dataclasses.replace(failed, failure_kind="no_kv_cache_memory", failure_reason="none"))
    assert ("e0", EngineStatus.FAILED, f"memory_changed_while_profiling: {PROFILE_ERROR}"[:600]) in \
        machine.recorder.engines
    assert log.count("start e0.2") == 1 and not any(line.startswith("start e0.3") for line in log)


def test_a_lane_whose_prepare_answered_waits_with_no_call_in_flight():
    machine, (lane0, lane1), log = _two_lanes_on_one_gpu()
    lane1.planned = False
    lane1.go(Phase.PREPARE, "prepare-ref", 10.0)
    machine.end_span(lane1, ok=True)
    machine.on_prepared(lane1, {"device_key": None})
    assert lane1.ref is None and machine.start_gate.is_waiting(1)  # the loop neither re-handles nor ends it
    _answer(machine, lane0, StartResult(ok=True, columns={}))
    assert lane1.phase is Phase.START and log[-2:] == ["start e1.1", "lane 0 in"]
