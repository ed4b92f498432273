"""One load per engine per command (runner.scheduling.held), with recording actors (no Ray): a lane whose stage
ends leaves its engines loaded for the next stage's lane of the same key, which enters them without a load; on
CUDA an engine left awake sleeps before another one wakes or loads on its GPU."""
from __future__ import annotations

import collections

from runner.measurement.records import RunKeys
from runner.schema import Phase
from runner.scheduling.actors import EngineActors
from runner.scheduling.held import HeldEngines
from runner.scheduling.lane import Lane, Resident
from runner.scheduling.order import Step, round_steps
from runner.scheduling.race import Race
from runner.scheduling.stops import Deadline
from runner.scheduling.transitions import LaneSteps
from tests.support.recorded import RecordedActor as Actor
from tests.unit.scheduling.plans import rounds_plan, settings


class Recorder:
    loads: dict = {}
    durations: dict = {}

    def call_going_out(self) -> None:
        pass

    def next_attempt(self, trial) -> int:
        return 1


def _steps(device: str, *, engines: int = 2):
    log: list[str] = []
    plan = rounds_plan(engines=engines, trials=1, repeats=1)
    s = settings(device=device)
    pool = EngineActors(settings=s, keys=RunKeys(sweep="s", run_id="r"), log_dir="/tmp")
    pool.reap = lambda wait=False: (log.append("reap"), pool.dying.clear())
    carry = HeldEngines(actors=pool)
    steps = LaneSteps(plan=plan, model_cfg={}, settings=s, held=carry, later=True, recorder=Recorder(),
                      race=Race(plan=plan, enabled=False, tie_band=0.02, seed=0), deadline=Deadline(deadline_s=None))
    steps.before_engines = lambda *, load: None
    steps.new_actor = lambda lane, engine: (_ for _ in ()).throw(AssertionError(f"a load of {engine.engine_id}"))
    return steps, plan, carry, log


def test_an_engines_last_turn_of_a_stage_leaves_it_loaded_for_the_next_stage():
    steps, plan, carry, log = _steps("cpu")
    lane = Lane(index=0, steps=collections.deque(), max_resident=2, planned=True)
    steps.lanes = [lane]
    lane.current = Resident(engine=plan.engine("e0"), actor=Actor(log, "a0"))
    steps.end_step(lane)  # no later turn in this stage: kept (a later stage may want it), not retired
    assert "e0" in lane.residents and not steps.actors.dying
    assert not steps.begin_step(lane)  # the stage is over for this lane: its engines go to the carry
    assert carry.engines_left() == {"e0"} and not lane.residents and not steps.actors.dying

    later = Lane(index=0, steps=collections.deque(round_steps(plan, engine_ids=["e0"])), max_resident=2,
                 planned=True)
    steps.lanes = [later]
    carry.take(later)
    assert steps.begin_step(later)  # entered without a load (new_actor would raise): its trial goes out
    assert later.phase is Phase.TRIAL and log == ["run_trial a0"]


def _cuda_stage_entering_an_asleep_engine(*, awake_sleeps: bool):
    """A CUDA lane of a later stage that left e0 awake and e1 asleep; its first step is e1's (begun)."""
    steps, plan, carry, log = _steps("cuda")
    awake = Resident(engine=plan.engine("e0"), actor=Actor(log, "a0"), sleeps=awake_sleeps)
    asleep = Resident(engine=plan.engine("e1"), actor=Actor(log, "a1"), asleep=True)
    carry.left["lane-0"] = {"e0": awake, "e1": asleep}
    lane = Lane(index=0, steps=collections.deque(round_steps(plan, engine_ids=["e1"])), max_resident=2,
                planned=True)
    steps.lanes = [lane]
    carry.take(lane)
    assert steps.begin_step(lane)
    return steps, lane, awake, log


def test_on_cuda_an_engine_left_awake_sleeps_before_another_enters():
    steps, lane, awake, log = _cuda_stage_entering_an_asleep_engine(awake_sleeps=True)
    assert log == ["sleep a0"] and lane.phase is Phase.SLEEP and lane.entering.engine_id == "e1"
    # The sleep answered (LaneMachine.on_slept): the waiting engine wakes, no load.
    lane.idle(drop_engine=True)
    engine, lane.entering = lane.entering, None
    steps.enter_engine(lane, engine)
    assert log[-1] == "wake_up a1" and lane.phase is Phase.WAKE and awake.asleep


def test_lanes_are_reordered_onto_the_engines_they_left_loaded():
    steps, plan, carry, log = _steps("cpu", engines=3)
    carry.left = {"lane-0": {"e2": None}, "lane-1": {"e0": None}}
    per_lane = [[Step(round=0, engine_id="e0", trials=())], [Step(round=0, engine_id="e2", trials=())]]
    assert [lane[0].engine_id for lane in carry.arrange(per_lane)] == ["e2", "e0"]


def test_drop_retires_what_is_left_and_releases_the_bundles():
    steps, plan, carry, log = _steps("cpu")
    carry.left["lane-0"] = {"e0": Resident(engine=plan.engine("e0"), actor=Actor(log, "a0"))}
    released = []
    carry.bundles.release = lambda: released.append(True)
    carry.drop()
    assert log == ["read_log a0", "shutdown a0", "reap"] and released and not carry.left


def test_on_cuda_an_engine_loaded_without_sleep_mode_makes_room_by_going():
    steps, lane, _, log = _cuda_stage_entering_an_asleep_engine(awake_sleeps=False)
    assert log == ["read_log a0", "shutdown a0", "reap", "wake_up a1"] and lane.phase is Phase.WAKE
    assert list(lane.residents) == ["e1"]
