"""The lane's way through its steps, with a recording actor pool (no Ray): on CUDA a wake waits for the
retired engine's teardown (it still holds device memory); on CPU the teardown stays in the background."""
from __future__ import annotations

import collections

from runner.measurement.records import RunKeys
from runner.schema import Phase
from runner.scheduling.actors import ActorPool
from runner.scheduling.lane import Lane, Resident
from runner.scheduling.order import round_steps
from runner.scheduling.race import Race
from runner.scheduling.stops import Deadline
from runner.scheduling.transitions import LaneSteps
from tests.unit.scheduling.plans import rounds_plan, settings


class RecordingPool(ActorPool):
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
    steps = LaneSteps(plan=plan, model_cfg={}, settings=s, pool=pool, recorder=Recorder(),
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
    assert log == ["wake"] and lane.phase is Phase.WAKE and steps.pool.dying
