"""A lane's way through its steps: take a step, enter its engine (wake, load, preload), run its trials, leave."""
from __future__ import annotations

import collections
import os
import time
from typing import Callable, Optional

from runner.plan.grid import EngineConfig, Plan
from runner.schema import Phase, TrialStatus
from runner.scheduling.actors import bundle_key
from runner.scheduling.first_trial import FirstTrialClock
from runner.scheduling.held import HeldEngines
from runner.scheduling.lane import Lane, Preload, Resident
from runner.scheduling.order import least_soon_needed
from runner.scheduling.race import Race
from runner.scheduling.recorder import Recorder
from runner.scheduling.residency import host_allows, parallel_cpu_loads
from runner.scheduling.settings import ExecutionSettings
from runner.scheduling.startup_order import StartGate
from runner.scheduling.stops import Deadline, back_before_deadline, load_estimate, trial_estimate


class LaneSteps:
    def __init__(self, *, plan: Plan, model_cfg, settings: ExecutionSettings, held: HeldEngines, recorder: Recorder,
                 race: Race, deadline: Deadline, later: bool = False, progress=None,
                 before_engines: Optional[Callable[..., None]] = None, clock: Optional[FirstTrialClock] = None):
        self.plan, self.model_cfg, self.settings = plan, model_cfg, settings
        self.clock = clock or FirstTrialClock(origin=time.time(), done=True)
        # What the command holds across its stages; `later`: later stages may follow, so engines stay loaded.
        self.held, self.later = held, later
        # A check deferred until now (vLLM's engine-argument rules): raises before any engine loads or runs a trial;
        # `load`: an engine loads next (it waits for the model-info fill), else a trial runs (the fill stops).
        self.before_engines = before_engines or (lambda *, load: None)
        self.policy = settings.policy
        self.actors = held.actors  # the command's actors (runner.scheduling.actors)
        self.kept = held.actors.kept  # its side of the engine pool (runner.pool.kept: kept engines, or no pool)
        self.recorder, self.race, self.deadline, self.progress = recorder, race, deadline, progress
        self.lanes: list[Lane] = []
        self.host_gib = float("inf")  # the node's free RAM, once a lane's first actor reported it
        # Engines sharing a GPU start one after another (their memory profiles must not overlap).
        self.start_gate = StartGate(engines_per_gpu=settings.engines_per_gpu)
        self.failed_starts: collections.Counter = collections.Counter()  # memory failures retried, per engine
        self.first_failures: dict[str, str] = {}  # engine_id -> its first failed start, when retried

    # ---- calls ----
    def call(self, lane: Lane, phase: Phase, ref, timeout_s: float) -> None:
        self.recorder.call_going_out()
        lane.go(phase, ref, timeout_s)

    def new_actor(self, lane: Lane, engine: EngineConfig):
        return self.actors.new(engine, lane=lane.index, lanes=len(self.lanes), bundle=lane.bundle)

    def take_spare_or_new(self, lane: Lane, engine: EngineConfig):
        if lane.spare is not None and not self.kept.suits(lane.spare, engine.engine_id):  # named for another engine
            self.actors.kill(lane.spare, graceful=False)
            lane.spare = lane.spare_ready = None
        actor = lane.spare if lane.spare is not None else self.new_actor(lane, engine)
        lane.spare = lane.spare_ready = None
        return actor

    def resident_mode(self, engine: EngineConfig) -> bool:
        return self.policy.may_stay_resident(engine, self.settings.resident)

    def check_deadline(self, *, what: str, estimate_s: Optional[float], in_hand: int = 0) -> None:
        self.deadline.check(what=what, estimate_s=estimate_s,
                            todo=lambda: sum(lane.trials_left() for lane in self.lanes) + in_hand)

    # ---- steps ----
    def begin_step(self, lane: Lane) -> bool:
        """Takes the lane's next (round, engine) step; returns False when the lane is done."""
        while lane.steps:
            step = lane.steps.popleft()
            if step.round != lane.round:
                if lane.round >= 0:
                    self.race.after_round(lane.round)
                lane.round = step.round
            engine = self.plan.engine(step.engine_id)
            trials = collections.deque()
            for trial in step.trials:
                stop = self.race.stop(trial)
                if stop is not None:
                    self.recorder.trial_failed(engine, trial, kind=stop[0], reason=stop[1], status=TrialStatus.SKIPPED)
                else:
                    trials.append(trial)
            if not trials:
                continue
            lane.trials = trials
            self.enter_engine(lane, engine)
            return True
        self.held.leave(lane, keep=self.later)  # kept: its engines stay loaded for the study's later stages
        for resident in list(lane.residents.values()):
            self.evict(lane, resident)
        if lane.spare is not None:
            self.actors.kill(lane.spare, graceful=False)
            lane.spare = lane.spare_ready = None
        return False

    def evict(self, lane: Lane, resident: Resident, *, graceful: bool = True) -> None:
        lane.residents.pop(resident.engine.engine_id, None)
        if graceful:
            self.retire(lane, resident)
        else:
            self.actors.kill(resident.actor, graceful=False)

    def retire(self, lane: Lane, resident: Resident) -> None:
        """The engine goes (off the critical path), unless a neighbour's start is profiling memory on its GPU: then
        it goes once that start ends (start_next)."""
        if not self.start_gate.hold_release(lane.index, resident):
            self.actors.retire(resident.engine, resident.actor)

    def enter_engine(self, lane: Lane, engine: EngineConfig) -> None:
        if lane.preloading:  # engines still loading beside a failed one: they come in first
            lane.entering = engine
            self.after_load(lane)
            return
        resident = lane.residents.get(engine.engine_id)
        if resident is not None:
            if resident.asleep and self.sleep_first(lane, engine):
                return
            lane.current = resident
            if resident.asleep:
                self.actors.free_device()
                self.call(lane, Phase.WAKE, resident.actor.wake_up.remote(), self.settings.start_timeout_s)
                return
            self.next_trial(lane)
            return
        while len(lane.residents) >= lane.max_resident and lane.residents:  # room first: the least soon needed goes
            self.evict(lane, least_soon_needed(list(lane.residents.values()), lane.steps))
        if self.sleep_first(lane, engine):
            return
        parked = self.kept.take(engine.engine_id, bundle=bundle_key(lane.bundle))
        if parked is not None:  # in the engine pool: woken, not loaded
            self.actors.taken_back(parked.actor)
            self.actors.free_device()
            lane.current = Resident(engine=engine, actor=parked.actor)
            self.call(lane, Phase.WAKE, self.kept.adopt_call(parked, keys=self.actors.keys, settings=self.settings),
                      self.settings.start_timeout_s)
            return
        self.check_deadline(what=f"loading {engine.engine_id}",
                            estimate_s=load_estimate(self.recorder.loads, engine_id=engine.engine_id))
        self.actors.free_device()
        lane.current = Resident(engine=engine, actor=self.take_spare_or_new(lane, engine))
        if not lane.planned:
            self.call(lane, Phase.PREPARE, lane.current.actor.prepare.remote(), self.settings.start_timeout_s)
            return
        self.start_engine(lane)

    def sleep_first(self, lane: Lane, engine: EngineConfig) -> bool:
        """A resident left awake (kept for a later stage, or whose next turn's trials were all skipped) holds the
        device: it sleeps before another engine wakes or loads there, and `engine` enters after (on_slept)."""
        if not self.policy.residents_sleep:
            return False
        awake = next((r for r in lane.residents.values() if not r.asleep and r.engine.engine_id != engine.engine_id),
                     None)
        if awake is None:
            return False
        if not awake.sleeps:  # loaded without sleep mode: it makes room by going
            self.evict(lane, awake)
            self.actors.free_device()
            return self.sleep_first(lane, engine)
        awake.asleep = True
        lane.current, lane.entering = awake, engine
        self.call(lane, Phase.SLEEP, awake.actor.sleep.remote(), self.settings.start_timeout_s)
        return True

    def start_engine(self, lane: Lane) -> None:
        if not self.start_gate.admit(lane.index):
            lane.idle()  # no call in flight (the one answered is done): it waits for its neighbour's start to end
            return  # this start follows once that one ends (start_next)
        self.before_engines(load=True)
        started = self.started(lane, lane.current.engine)
        lane.current.sleeps = started.sleep_mode
        ref = lane.current.actor.start.remote(engine=started, model=self.model_cfg)
        self.call(lane, Phase.START, ref, self.settings.start_timeout_s)
        if self.policy.preloads_beside:
            self.preload(lane)
        if not self.policy.spare_during_trials:
            self.start_spare(lane)

    def started(self, lane: Lane, engine: EngineConfig) -> EngineConfig:
        """`engine` as its start runs it: with sleep mode where it may sleep between its turns here (several stay
        resident, or an adaptive study keeps it for its later stages), or in its engine pool."""
        sleeps = self.policy.residents_sleep and (lane.max_resident > 1 or self.later)
        return self.kept.start_of(engine, sleep_mode=sleeps)

    def start_next(self, lane: Lane) -> None:
        """The lane's start has ended: engines held back meanwhile go, then the next lane waiting on its GPU starts
        (after they have gone: a start waits for its neighbours' releases)."""
        for resident in self.start_gate.releases_due(lane.index):
            self.actors.retire(resident.engine, resident.actor)
        nxt = self.start_gate.release(lane.index)
        if nxt is not None:
            waiting = next(other for other in self.lanes if other.index == nxt)
            self.actors.free_device()
            self.start_engine(waiting)

    def preload(self, lane: Lane) -> None:
        """Engines resident: the lane's next engines load now, beside this one (loads overlap loads; no trial
        starts until every one of them is in), so later turns switch without a load."""
        if lane.max_resident <= 1 or not self.resident_mode(lane.current.engine):
            return
        current = lane.current.engine.engine_id
        room = min(lane.max_resident - 1 - len([e for e in lane.residents if e != current]),
                   parallel_cpu_loads(cores=os.cpu_count() or 1, cpus_per_engine=self.settings.cpus_per_engine,
                                      lanes=len(self.lanes)) - 1)
        for step in lane.steps:
            if room <= len(lane.preloading):
                return
            engine_id = step.engine_id
            if engine_id == current or engine_id in lane.residents or engine_id in lane.preloading or \
                    self.kept.has(engine_id):
                continue
            engine = self.plan.engine(engine_id)
            actor = self.take_spare_or_new(lane, engine)
            lane.preloading[engine_id] = Preload(resident=Resident(engine=engine, actor=actor), began=time.time(),
                                                 ref=actor.start.remote(engine=self.started(lane, engine),
                                                                        model=self.model_cfg))

    def after_load(self, lane: Lane) -> None:
        """Trials start once the engines loading beside this one are in (their loads would slow the trials)."""
        if lane.preloading:
            lane.preload_id, preload = next(iter(lane.preloading.items()))
            self.call(lane, Phase.PRELOAD, preload.ref, self.settings.start_timeout_s)
            return
        if lane.current is None:
            engine, lane.entering = lane.entering, None
            lane.idle()
            if engine is not None:
                self.enter_engine(lane, engine)
            return
        self.next_trial(lane)

    def next_trial(self, lane: Lane) -> None:
        if not lane.trials:
            self.end_step(lane)
            return
        if self.policy.quiet_trials:
            if self.actors.dying:
                self.actors.reap(wait=True)  # an engine shutting down would take cores from the trial
            if lane.spare_ready is not None:
                self.await_spare(lane)  # so would the next engine's imports
        self.before_engines(load=False)
        trial = lane.trials[0]
        engine = lane.current.engine
        self.check_deadline(what=f"trial {trial.trial_id}", in_hand=1, estimate_s=trial_estimate(
            self.recorder.durations, engine_id=engine.engine_id, workload=trial.workload))
        lane.trials.popleft()
        lane.trial = trial
        attempt = self.recorder.next_attempt(trial)
        self.call(lane, Phase.TRIAL, lane.current.actor.run_trial.remote(trial=trial, attempt=attempt),
                  self.settings.trial_timeout_s)
        self.clock.first_trial()
        if self.policy.spare_during_trials:
            self.start_spare(lane)
        if self.progress is not None:
            from runner.scheduling.describe import engine_label

            self.progress.set_postfix_str(f"r{trial.repeat} {engine_label(engine, self.plan.engines)}", refresh=True)

    def start_spare(self, lane: Lane) -> None:
        """The next engine's process and imports start ahead: on CUDA while this engine runs trials; on CPU
        while this engine loads (during trials the imports would take cores from the trial being measured)."""
        if lane.spare is not None or lane.current is None:
            return
        nxt = lane.next_other_engine()
        if nxt is None or nxt in lane.residents or self.kept.has(nxt):
            return
        if self.policy.spare_needs_share and lane.max_resident <= 1 and not self.resident_mode(lane.current.engine):
            return  # a whole-GPU (or TP) bundle has no fraction to spare
        lane.spare = self.new_actor(lane, self.plan.engine(nxt))
        lane.spare_ready = lane.spare.prepare.remote()

    def await_spare(self, lane: Lane) -> None:
        """Blocks until the spare's imports are done (a failed prepare shows again when the spare starts); the
        wait goes on the timeline as the next engine's `prepare`."""
        import ray

        started, started_epoch = time.monotonic(), time.time()
        done, _ = ray.wait([lane.spare_ready], timeout=0)
        if not done:
            ray.wait([lane.spare_ready], timeout=self.settings.start_timeout_s)
            self.recorder.span(lane=lane.index, phase=Phase.PREPARE, engine_id=lane.next_other_engine(),
                               round=lane.round, started_at=started_epoch, duration_s=time.monotonic() - started,
                               ok=True)
        lane.spare_ready = None

    def end_step(self, lane: Lane) -> None:
        current = lane.current
        engine_id = current.engine.engine_id
        lane.idle(drop_engine=True)
        if lane.steps and lane.steps[0].engine_id == engine_id:
            lane.residents[engine_id] = current  # its own next turn comes next: it stays as it is
            return
        again = any(st.engine_id == engine_id for st in lane.steps)
        if again and lane.max_resident > 1 and self.keeps(lane, current):
            lane.residents[engine_id] = current
            if self.policy.residents_sleep:
                current.asleep = True
                lane.current = current
                self.call(lane, Phase.SLEEP, current.actor.sleep.remote(), self.settings.start_timeout_s)
        elif not again and self.later and self.resident_mode(current.engine) and self.keeps(
                lane, current, later_stage=True):
            lane.residents[engine_id] = current  # for the study's later stages: asleep once another engine needs room
        elif not again and self.policy.keeps_finished_idle and self.resident_mode(current.engine) and \
                len(lane.residents) < lane.max_resident and lane.steps and lane.steps[0].engine_id in lane.residents:
            lane.residents[engine_id] = current  # its teardown would take cores from the next engine's trials
        else:
            lane.residents.pop(engine_id, None)
            self.retire(lane, current)

    def keeps(self, lane: Lane, resident: Resident, *, later_stage: bool = False) -> bool:
        """Whether an engine with a later turn stays resident: room in host RAM, back before the deadline (a turn
        in a `later_stage` is not planned yet: room alone)."""
        held = sum(r.weights_gib for r in lane.residents.values() if r is not resident) + resident.weights_gib
        if not host_allows(policy=self.policy, held_gib=held, host_gib=self.host_gib):
            return False
        return later_stage or back_before_deadline(
            engine_id=resident.engine.engine_id, steps=lane.steps, left_s=self.deadline.left_s(),
            loaded=set(lane.residents), loads=self.recorder.loads, durations=self.recorder.durations)
