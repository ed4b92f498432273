"""The driver's loop: each lane's one call in flight, `ray.wait` for the next answer, its handler, repeat.

Only the driver writes files, so a multi-node cluster needs no shared filesystem; every finished trial is
written before the next one on its engine starts.
"""
from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Callable, Optional

from runner.config.checks import ConfigError
from runner.measurement.records import RunKeys
from runner.plan.grid import Plan
from runner.schema import Phase
from runner.scheduling.first_trial import FirstTrialClock
from runner.scheduling.handlers import LaneMachine
from runner.scheduling.held import HeldEngines
from runner.scheduling.lane import Lane
from runner.scheduling.order import lane_steps, lane_width
from runner.scheduling.race import Race
from runner.scheduling.recorder import Recorder, ResultSink
from runner.scheduling.settings import ExecutionSettings
from runner.scheduling.stops import Deadline, DeadlineReached, Interrupted


class Scheduler:
    """One stage's trials on the engines the command holds (`held`: its actors, bundles and the engines earlier
    stages left loaded). `later`: later stages may follow (an adaptive study), so engines stay loaded for them."""

    def __init__(self, *, plan: Plan, model_cfg, keys: RunKeys, sink: ResultSink, settings: ExecutionSettings,
                 held: HeldEngines, later: bool = False, on_trial: Optional[Callable] = None,
                 on_engine: Optional[Callable] = None, progress=None, launched_at: Optional[float] = None,
                 before_engines: Optional[Callable[..., None]] = None, clock: Optional[FirstTrialClock] = None):
        self.settings = settings
        self.clock = clock or FirstTrialClock(origin=time.time(), done=True)
        self.held = held
        self.actors = held.actors
        race = Race(plan=plan, enabled=settings.race, tie_band=settings.race_tie_band, seed=settings.order_seed,
                    converge=settings.converge)
        self.recorder = Recorder(keys=keys, sink=sink, race=race, on_trial=on_trial, on_engine=on_engine,
                                 progress=progress, launched_at=launched_at,
                                 engines_on_device=settings.engines_per_gpu)
        self.machine = LaneMachine(plan=plan, model_cfg=model_cfg, settings=settings,
                                   recorder=self.recorder, race=race, deadline=Deadline(deadline_s=settings.deadline_s),
                                   progress=progress, before_engines=before_engines, held=held, later=later,
                                   clock=self.clock)

    def run(self, *, skip_trial_ids: set[str]) -> None:
        import ray

        machine = self.machine
        machine.deadline.t0 = time.monotonic()
        with self.clock.timed("lanes and their bundles"):
            machine.lanes = self.make_lanes(skip_trial_ids)
        try:
            with self.clock.timed("engine pool claim"):
                self.claim_pooled(machine.lanes)
            live = [lane for lane in machine.lanes if machine.begin_step(lane)]
            while live:
                refs = [lane.ref for lane in live if lane.ref is not None]
                ready, _ = ray.wait(refs, num_returns=1, timeout=1.0) if refs else ([], [])
                for lane in list(live):
                    if lane.ref is not None and lane.ref in ready:
                        machine.handle(lane)
                    elif lane.overdue():
                        machine.on_timeout(lane)
                    if lane.ref is None and not machine.start_gate.is_waiting(lane.index) and \
                            not machine.begin_step(lane):
                        live.remove(lane)
                self.actors.reap()
            self.actors.reap(wait=True)
            self.actors.finish()
        except KeyboardInterrupt:
            self.abandon()
            raise Interrupted() from None
        except (DeadlineReached, ConfigError):  # ConfigError: a check deferred to the first engine failed
            self.abandon()
            raise

    def make_lanes(self, skip_trial_ids: set[str]) -> list[Lane]:
        s, plan = self.settings, self.machine.plan
        per_lane = lane_steps(plan, policy=s.policy, units=s.device_units, max_parallel=s.max_parallel_engines,
                              seed=s.order_seed, skip_trial_ids=skip_trial_ids)
        per_lane = self.held.arrange(per_lane)
        lanes = [Lane(index=i, steps=collections.deque(steps)) for i, steps in enumerate(per_lane) if steps]
        width = lane_width(plan, policy=s.policy)
        if s.policy.uses_placement_group and lanes and width <= s.device_units:
            bundles = self.held.bundles_for(lanes=len(lanes), width=width, timeout_s=s.start_timeout_s,
                                            detached_name=self.actors.kept.group_name(lanes=len(lanes), width=width))
            for lane, bundle in zip(lanes, bundles):
                lane.bundle = bundle
        for lane in lanes:
            self.held.take(lane)
            self.machine.plan_carried(lane, self.held.memory)
        return lanes

    def claim_pooled(self, lanes: list[Lane]) -> None:
        """The engines this run needs that its engine pool holds are claimed (woken, not loaded); no pool: none."""
        plan = self.machine.plan
        # Engines an earlier stage of this command left loaded are this command's already.
        held = {e for lane in lanes for e in lane.residents}
        needed = dict.fromkeys(step.engine_id for lane in lanes for step in lane.steps if step.engine_id not in held)
        self.actors.kept.claim([plan.engine(engine_id) for engine_id in needed],
                               say=lambda line: print(line, flush=True))

    def abandon(self) -> None:
        """Stop in seconds: the trial in flight is dropped (it reruns on resume), every engine is killed (a pooled
        one with its engine in goes back to the pool instead)."""
        actors = self.held.abandoned()
        loaded = list(actors)
        for lane in self.machine.lanes:
            actors += [r.actor for r in lane.residents.values()]
            loaded += [r.actor for r in lane.residents.values()]
            if lane.current is not None:
                actors.append(lane.current.actor)
                if lane.phase not in (Phase.PREPARE, Phase.START):
                    loaded.append(lane.current.actor)
            actors += [lane.spare] if lane.spare is not None else []
            actors += [p.resident.actor for p in lane.preloading.values()]
            lane.preloading.clear()
            lane.residents.clear()
            lane.current = lane.spare = lane.spare_ready = None
        self.actors.abandon(actors, loaded=loaded)
