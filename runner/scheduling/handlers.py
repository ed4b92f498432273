"""The lane state machine's answers: one handler per phase whose call returned, failed or timed out."""
from __future__ import annotations

import collections
import json
import time
from dataclasses import dataclass
from typing import Optional

from runner.execution.results import StartResult, TrialResult
from runner.plan.grid import EngineConfig
from runner.schema import EngineStatus, Phase, engine_start_failure
from runner.scheduling.lane import Lane, Resident
from runner.scheduling.order import least_soon_needed
from runner.scheduling.residency import MEMORY_FAILURES, MemoryReport, host_for_residents, lane_residency
from runner.scheduling.startup_order import first_failure, retries_start
from runner.scheduling.stops import may_retry
from runner.scheduling.transitions import LaneSteps


@dataclass(frozen=True, kw_only=True)
class CallFailed:
    """The call raised: the actor died (`actor_lost`), or the task itself raised in a live actor."""

    error: str
    actor_lost: bool


class LaneMachine(LaneSteps):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.restarts: collections.Counter = collections.Counter()
        self.handlers = {Phase.PREPARE: self.on_prepared, Phase.START: self.on_started,
                         Phase.PRELOAD: self.on_preloaded, Phase.WAKE: self.on_woken, Phase.SLEEP: self.on_slept,
                         Phase.TRIAL: self.on_trial}

    def handle(self, lane: Lane) -> None:
        """The lane's call has answered: its span goes on the timeline, then its phase's handler runs."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            result = ray.get(lane.ref)
        except (RayActorError, RayTaskError) as exc:
            lost = isinstance(exc, RayActorError) or not isinstance(exc, RayTaskError)
            self.failed(lane, CallFailed(error=f"{type(exc).__name__}: {exc}", actor_lost=lost))
            return
        ok, load_s = True, None
        if isinstance(result, StartResult):
            ok, load_s = result.ok, (result.columns.get("load_s") if lane.phase is Phase.START else None)
        phase = lane.phase
        self.clock.add(f"{phase.value} calls", time.monotonic() - lane.call.started)
        self.end_span(lane, ok=ok, load_s=load_s)
        with self.clock.timed(f"after {phase.value} (rows, logs, next call)"):
            self.handlers[phase](lane, result)

    def end_span(self, lane: Lane, *, ok: bool, load_s: Optional[float] = None) -> None:
        """The lane's call in flight has ended: its span goes on the timeline."""
        call = lane.call
        if call is None:
            return
        trial = lane.trial if call.phase is Phase.TRIAL else None
        self.recorder.span(lane=lane.index, phase=call.phase,
                           engine_id=lane.current.engine.engine_id if lane.current is not None else None,
                           trial_id=trial.trial_id if trial else None, round=lane.round,
                           started_at=call.started_epoch, duration_s=time.monotonic() - call.started, ok=ok,
                           load_s=load_s)
        if call.phase is Phase.START:
            self.start_next(lane)

    # ---- answers ----
    def on_prepared(self, lane: Lane, report: dict) -> None:
        """The lane's first actor reported its node's memory: the residency plan, then the load."""
        self.start_gate.place(lane.index, reported=(report or {}).get("device_key"))
        self.plan_lane(lane, report)
        self.start_engine(lane)

    def plan_lane(self, lane: Lane, report: dict) -> None:
        """How many engines the lane keeps loaded, from its node's memory (the first actor's report)."""
        if self.held.memory is None:
            self.held.memory = report  # later stages' lanes plan from it (their first engine may load nothing)
        memory = MemoryReport.of(report)
        engines = [self.plan.engine(i) for i in dict.fromkeys(st.engine_id for st in lane.steps)]
        engines += [r.engine for r in lane.residents.values()] + ([lane.current.engine] if lane.current else [])
        engines = list({e.engine_id: e for e in engines}.values())
        lane.max_resident = lane_residency(
            policy=self.policy, budgets=[e.settings.gpu_memory_utilization for e in engines], report=memory,
            any_resident=any(self.resident_mode(e) for e in engines), cpu_kv_gib=self.settings.cpu_kv_gib)
        self.host_gib = host_for_residents(memory.host_available_gib, claimed_gib=self.kept.claimed_host_gib)
        lane.planned = True

    def plan_carried(self, lane: Lane, report: Optional[dict]) -> None:
        """A later stage's lane, planned from the memory report an earlier stage's first actor gave."""
        if report is not None:
            self.plan_lane(lane, report)

    def on_started(self, lane: Lane, result: StartResult) -> None:
        engine, actor = lane.current.engine, lane.current.actor
        log_file = self.actors.save_log(engine, actor)
        if result.ok:
            lane.current.weights_gib = float(result.columns.get("weights_gib") or 0.0)
            retried = self.first_failures.get(engine.engine_id)
            columns = {**result.columns, **({"start_retried_after": retried} if retried else {})}
            self.recorder.engine_started(engine, columns=columns, log_file=log_file, device=self.policy.name)
            self.after_load(lane)
            return
        self.actors.kill(actor, graceful=False)
        self.failed_starts[engine.engine_id] += 1
        if retries_start(result.failure_kind, failed_starts=self.failed_starts[engine.engine_id],
                         engines_per_gpu=self.settings.engines_per_gpu):
            # A neighbour on the GPU moved its memory: once more, behind any start waiting there.
            self.first_failures.setdefault(engine.engine_id, first_failure(result.failure_kind,
                                                                           result.failure_reason))
            print(f"{engine.engine_id}: start failed for memory on a shared GPU ({result.failure_kind}); "
                  f"retrying once after its neighbour's start", flush=True)
            lane.current = Resident(engine=engine, actor=self.new_actor(lane, engine))
            self.start_engine(lane)
            return
        others = [r for r in lane.residents.values() if r.engine.engine_id != engine.engine_id]
        if result.failure_kind in MEMORY_FAILURES and others:
            # The residency plan was too generous: one fewer stays from now on, and this engine loads again.
            self.evict(lane, least_soon_needed(others, lane.steps), graceful=False)
            lane.max_resident = max(1, len(lane.residents) + 1)
            lane.current = Resident(engine=engine, actor=self.new_actor(lane, engine))
            self.start_engine(lane)
            return
        self.fail_engine(lane, engine, kind=result.failure_kind, reason=result.failure_reason, log_file=log_file,
                         failure_numbers_json=json.dumps(result.failure_numbers))
        lane.idle(drop_engine=True)

    def on_preloaded(self, lane: Lane, result: Optional[StartResult], *, error: Optional[str] = None) -> None:
        preload = lane.preloading.pop(lane.preload_id)
        engine, actor = preload.resident.engine, preload.resident.actor
        if error is None and result.ok:
            self.recorder.span(lane=lane.index, phase=Phase.START, engine_id=engine.engine_id,
                               started_at=preload.began, duration_s=time.time() - preload.began,
                               load_s=result.columns.get("load_s"))
            lane.residents[engine.engine_id] = preload.resident
            self.recorder.engine_started(engine, columns=result.columns, log_file=self.actors.save_log(engine, actor),
                                         device=self.policy.name)
        else:
            log_file = self.actors.save_log(engine, actor)
            self.actors.kill(actor, graceful=False)
            if error is not None:
                self.fail_engine(lane, engine, kind="actor_died_during_start", reason=error[:600], current=False)
            else:
                self.fail_engine(lane, engine, kind=result.failure_kind, reason=result.failure_reason,
                                 log_file=log_file, failure_numbers_json=json.dumps(result.failure_numbers),
                                 current=False)
        self.after_load(lane)

    def on_woken(self, lane: Lane, result) -> None:
        lane.current.asleep = False
        if isinstance(result, StartResult):  # a pooled engine, adopted
            self.on_adopted(lane, result)
            return
        self.next_trial(lane)

    def on_adopted(self, lane: Lane, result: StartResult) -> None:
        """A pooled engine woke for this command (no load): on its first use here it gets an engine row
        (reused_from_pool); it keeps the shapes it already warmed. One that is gone loads afresh."""
        engine, actor = lane.current.engine, lane.current.actor
        if not result.ok:
            self.actors.kill(actor, graceful=False)
            lane.idle(drop_engine=True)
            self.enter_engine(lane, engine)
            return
        lane.current.weights_gib = float(result.columns.get("weights_gib") or 0.0)
        if not lane.planned:
            self.plan_lane(lane, result.memory)
        if result.columns.get("reused_from_pool"):
            self.recorder.engine_started(engine, columns=result.columns, log_file=self.actors.save_log(engine, actor),
                                         device=self.policy.name)
        self.after_load(lane)

    def on_slept(self, lane: Lane, _seconds: float) -> None:
        lane.idle(drop_engine=True)
        if lane.entering is not None and not lane.preloading:  # it slept to make room for this one
            engine, lane.entering = lane.entering, None
            self.enter_engine(lane, engine)

    def on_trial(self, lane: Lane, result: TrialResult) -> None:
        self.recorder.trial(result.trial, result.requests, trial=lane.trial, first_run=result.first_run)
        self.next_trial(lane)

    # ---- failures ----
    def failed(self, lane: Lane, failure: CallFailed) -> None:
        self.end_span(lane, ok=False)
        if lane.phase is Phase.PRELOAD:
            self.on_preloaded(lane, None, error=failure.error)
        elif not failure.actor_lost and lane.phase is Phase.TRIAL:
            self.recorder.trial_failed(lane.current.engine, lane.trial, kind="trial_error",
                                       reason=failure.error[-600:])
            self.next_trial(lane)
        else:
            self.on_actor_lost(lane, failure.error)

    def on_actor_lost(self, lane: Lane, error: str) -> None:
        """The actor died (killed, segfault, device error): its engine reloads on a fresh actor, the trial retries."""
        engine = lane.current.engine
        self.actors.kill(lane.current.actor, graceful=False)
        lane.residents.pop(engine.engine_id, None)
        self.restarts[engine.engine_id] += 1
        if lane.phase in (Phase.PREPARE, Phase.START):
            self.fail_engine(lane, engine, kind="actor_died_during_start", reason=error[:600])
            lane.idle(drop_engine=True)
            return
        if lane.phase is Phase.TRIAL and lane.trial is not None:
            trial = lane.trial
            if may_retry(attempts=self.recorder.attempts.get(trial.trial_id, 1),
                         max_retries=self.settings.max_trial_retries):
                lane.trials.appendleft(trial)
            else:
                self.recorder.trial_failed(engine, trial, kind="actor_died", reason=error[:600])
        self.reload_or_idle(lane, engine)

    def on_timeout(self, lane: Lane) -> None:
        self.end_span(lane, ok=False)
        if lane.phase is Phase.PRELOAD:
            self.on_preloaded(lane, None, error=f"engine did not start within {self.settings.start_timeout_s} s")
            return
        current = lane.current
        self.actors.save_log(current.engine, current.actor)
        self.actors.kill(current.actor, graceful=False)
        lane.residents.pop(current.engine.engine_id, None)
        self.restarts[current.engine.engine_id] += 1
        if lane.phase is Phase.TRIAL:
            reason = f"trial exceeded execution.trial_timeout_s={self.settings.trial_timeout_s}"
            self.recorder.trial_failed(current.engine, lane.trial, kind="timeout", reason=reason)
            self.reload_or_idle(lane, current.engine)
            return
        self.fail_engine(lane, current.engine, kind="start_timeout",
                         reason=f"engine did not start within {self.settings.start_timeout_s} s")
        lane.idle(drop_engine=True)

    def reload_or_idle(self, lane: Lane, engine: EngineConfig) -> None:
        """After a lost actor: the step's trials left go on a fresh load of the same engine."""
        lane.idle(drop_engine=True)
        if lane.trials:
            self.enter_engine(lane, engine)

    def fail_engine(self, lane: Lane, engine: EngineConfig, *, kind: str, reason: str, current: bool = True,
                    **columns) -> None:
        """A failed start is a result: one failed engine row, and each of its trials left failed with the reason.
        `current`: the lane's own engine (its step's trials fail too), else one that was loading beside it."""
        if engine.engine_id in self.first_failures:
            columns.setdefault("start_retried_after", self.first_failures[engine.engine_id])
        self.recorder.write_engine(self.recorder.engine_record(engine, status=EngineStatus.FAILED, failure_kind=kind,
                                                               failure_reason=reason, started_at=time.time(),
                                                               **columns))
        trials = list(lane.trials) if current else []
        if current:
            lane.trials.clear()
        trials += [t for step in lane.steps if step.engine_id == engine.engine_id for t in step.trials]
        for trial in trials:  # its later rounds cannot run either
            self.recorder.trial_failed(engine, trial, kind=engine_start_failure(kind), reason=reason)
        lane.steps = collections.deque(st for st in lane.steps if st.engine_id != engine.engine_id)
