"""The lane's way through its steps, with a recording actor pool (no Ray): on CUDA a wake waits for the
retired engine's teardown (it still holds device memory); on CPU the teardown stays in the background."""
from __future__ import annotations

import collections

from runner.measurement.records import RunKeys
from runner.schema import Phase
from runner.scheduling.actors import EngineActors
from runner.scheduling.held import HeldEngines
from runner.scheduling.lane import Lane, Resident
from runner.scheduling.order import round_steps
from runner.scheduling.race import Race
from runner.scheduling.stops import Deadline
from runner.scheduling.transitions import LaneSteps
from tests.support.recorded import RecordedActor as PooledActor
from tests.unit.scheduling.plans import rounds_plan, settings


class RecordingPool(EngineActors):
    def __init__(self, log: list, **kwargs):
        super().__init__(**kwargs)
        self.log = log

    def reap(self, *, wait: bool = False) -> None:
        self.log.append(f"reap wait={wait}")
        self.dying.clear()


class Recorder:
    loads: dict = {}
    durations: dict = {}

    def call_going_out(self) -> None:
        pass


class Actor:
    def __init__(self, log: list):
        self.log = log
        self.wake_up = self

    def remote(self):
        self.log.append("wake")
        return "ref"


def _lane_with_an_asleep_engine(device: str):
    log: list[str] = []
    plan = rounds_plan(engines=3, trials=2, repeats=2)
    s = settings(device=device)
    pool = RecordingPool(log, settings=s, keys=RunKeys(sweep="s", run_id="r"), log_dir="/tmp")
    pool.dying.append("an engine retired a moment ago")
    steps = LaneSteps(plan=plan, model_cfg={}, settings=s, held=HeldEngines(actors=pool), recorder=Recorder(),
                      race=Race(plan=plan, enabled=False, tie_band=0.02, seed=0), deadline=Deadline(deadline_s=None))
    lane = Lane(index=0, steps=collections.deque(round_steps(plan, engine_ids=["e0", "e1", "e2"])[1:]))
    resident = Resident(engine=plan.engines[0], actor=Actor(log), asleep=True)
    lane.residents[resident.engine.engine_id] = resident
    return steps, lane, resident, log


def test_a_wake_on_cuda_waits_for_the_retired_engines_teardown():
    steps, lane, resident, log = _lane_with_an_asleep_engine("cuda")
    steps.enter_engine(lane, resident.engine)
    assert log == ["reap wait=True", "wake"] and lane.phase is Phase.WAKE and lane.current is resident


def test_a_cpu_wake_leaves_teardown_in_the_background():
    steps, lane, resident, log = _lane_with_an_asleep_engine("cpu")
    steps.enter_engine(lane, resident.engine)
    assert log == ["wake"] and lane.phase is Phase.WAKE and steps.actors.dying


def _pooled_lane():
    from runner.pool.kept import Parked
    from runner.pool.pools import Holder

    log: list[str] = []
    plan = rounds_plan(engines=2, trials=1, repeats=1)
    s = settings(device="cpu", keep_engines=True)
    pool = EngineActors(settings=s, keys=RunKeys(sweep="s", run_id="r"), log_dir="/tmp")
    pool.kept.parked["e0"] = Parked(actor=PooledActor(log, "a0"), first=True)
    pool.kept._holder = Holder(job="01000000", handle=None)  # as its claim made it (no Ray here)
    steps = LaneSteps(plan=plan, model_cfg={}, settings=s, held=HeldEngines(actors=pool), recorder=Recorder(),
                      race=Race(plan=plan, enabled=False, tie_band=0.02, seed=0), deadline=Deadline(deadline_s=None))
    lane = Lane(index=0, steps=collections.deque(round_steps(plan, engine_ids=["e0", "e1"])))
    steps.lanes = [lane]
    return steps, lane, plan, log


def test_an_engine_in_the_pool_is_woken_not_loaded():
    steps, lane, plan, log = _pooled_lane()
    steps.new_actor = lambda *a: (_ for _ in ()).throw(AssertionError("a new actor for a pooled engine"))
    steps.enter_engine(lane, plan.engine("e0"))
    assert log == ["adopt a0 first"] and lane.phase is Phase.WAKE and lane.current.actor.name == "a0"
    assert not steps.kept.has("e0")


def test_a_pooled_engine_that_leaves_its_lane_is_parked_not_killed():
    steps, lane, plan, log = _pooled_lane()
    actor = PooledActor(log, "a1")
    steps.actors.kept.named[id(actor)] = "e1"
    steps.actors.retire(plan.engine("e1"), actor)
    assert log == ["read_log a1", "park a1"] and steps.kept.has("e1")
    # Wanted again while its park is still in flight: taken back, woken (the actor orders the wake after the park).
    steps.enter_engine(lane, plan.engine("e1"))
    assert log[-1] == "adopt a1" and not steps.actors.dying and lane.phase is Phase.WAKE


def test_a_spare_named_for_another_engine_does_not_host_this_one():
    steps, lane, plan, log = _pooled_lane()
    spare, fresh = PooledActor(log, "spare-e1"), PooledActor(log, "fresh")
    steps.actors.kept.named[id(spare)] = "e1"
    killed = []
    steps.actors.kill = lambda actor, graceful: killed.append(actor.name)
    steps.new_actor = lambda lane_, engine_: fresh
    lane.spare = spare
    assert steps.take_spare_or_new(lane, plan.engine("e0")) is fresh and killed == ["spare-e1"]
