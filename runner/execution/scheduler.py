"""The driver: engine groups onto actors, results onto disk as each trial ends.

Only the driver writes files, so a multi-node cluster needs no shared filesystem.
Every finished trial is written before the next one on its engine starts.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import os
import random
import signal
import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from runner.execution.failures import FAULTS_ENV
from runner.measurement.records import RunKeys, failed_trial_row
from runner.plan.grid import EngineConfig, Plan, Trial
from runner.schema import (RACE_ELIMINATED, EngineRecord, EngineStatus, Phase, PhaseRecord, TrialStatus,
                           engine_start_failure)


@dataclass(kw_only=True)
class ExecutionSettings:
    device: str = "cpu"  # "cpu" | "cuda"
    # Engines side by side at most (a count, whatever each engine occupies).
    max_parallel_engines: int = 1
    # Device units the cluster offers: GPUs on cuda, engine slots on CPU (None: max_parallel_engines).
    device_units: Optional[int] = None
    cpus_per_engine: float = 1
    env: dict = field(default_factory=dict)
    trial_timeout_s: float = 1800.0
    start_timeout_s: float = 1800.0
    max_trial_retries: int = 1
    slo: dict = field(default_factory=dict)
    warmup: str = "auto"  # "auto" | "off": each new trial shape runs once, unmeasured, on each engine
    warmup_output_cap: Optional[int] = 64
    resident: str = "auto"  # "auto" | "on" (CPU too, memory permitting) | "off"
    deadline_s: Optional[float] = None  # seconds from the scheduler's start
    order_seed: int = 0
    shutdown_timeout_s: float = 10.0  # a graceful engine shutdown, then ray.kill
    race: bool = False
    race_tie_band: float = 0.02
    cpu_kv_gib: float = 1.0  # VLLM_CPU_KVCACHE_SPACE, for the CPU residency plan
    # How vLLM's engine-core process starts in an actor: "auto" | "spawn" | "forkserver" (engine_process.py).
    engine_start: str = "auto"


class Interrupted(Exception):
    pass


class DeadlineReached(Exception):
    def __init__(self, left: int, reason: str):
        super().__init__(reason)
        self.left, self.reason = left, reason


@dataclass(kw_only=True)
class _Resident:
    engine: EngineConfig
    actor: object
    asleep: bool = False
    weights_gib: float = 0.0


@dataclass(kw_only=True)
class _Lane:
    """One device unit (GPU, TP group or CPU slot): its own rounds, its own resident engines."""

    index: int
    steps: collections.deque  # of Step
    bundle: Optional[tuple] = None  # (placement group, bundle index) on cuda
    max_resident: int = 1
    planned: bool = False
    residents: dict = field(default_factory=dict)  # engine_id -> _Resident
    spare: object = None  # an actor started ahead (process + imports + context), no engine yet
    spare_ready: object = None  # its prepare call: on CPU no trial starts before it has answered
    step: object = None
    trials: collections.deque = field(default_factory=collections.deque)
    current: Optional[_Resident] = None
    phase: Phase = Phase.IDLE
    ref: object = None
    trial: Optional[Trial] = None
    deadline: float = 0.0
    started: float = 0.0
    started_epoch: float = 0.0
    round: int = -1
    # Engines loading beside the current one (CPU, resident): engine_id -> (_Resident, ref, epoch started).
    preloading: dict = field(default_factory=dict)
    preload_id: Optional[str] = None
    entering: Optional[EngineConfig] = None  # the engine to enter once the preloads are in


@dataclass(kw_only=True)
class _Dying:
    engine: EngineConfig
    actor: object
    log_ref: object
    shutdown_ref: object
    deadline: float


class Scheduler:
    def __init__(self, *, plan: Plan, model_cfg, keys: RunKeys, sink, settings: ExecutionSettings,
                 log_dir: Path, on_trial: Callable | None = None, on_engine: Callable | None = None,
                 progress=None, launched_at: Optional[float] = None):
        self.plan = plan
        # The command's process start (epoch): the timeline's first span ends when the first actor call goes out.
        self.launched_at = launched_at
        self.model_cfg = model_cfg
        self.keys = keys
        self.sink = sink
        self.settings = settings
        self.log_dir = Path(log_dir)
        self.on_trial = on_trial or (lambda *a, **k: None)
        self.on_engine = on_engine or (lambda *a, **k: None)
        self.progress = progress
        self.lanes: list[_Lane] = []
        self.attempts: dict[str, int] = {}
        self.restarts: collections.Counter = collections.Counter()
        self.loads: dict[str, float] = {}  # engine_id -> measured load_s
        self.durations: dict[tuple, list] = collections.defaultdict(list)  # (engine_id, workload) -> trial s
        self.samples: list = []
        self.eliminated: dict[tuple, str] = {}
        self.position = next_position(getattr(sink, "rows", {}).get("trials", []))
        self.t0 = time.monotonic()
        self.placement_group = None
        self.dying: list[_Dying] = []
        self.logged: dict[str, dict] = {}  # engine_id -> {actor: its log}

    # ---- actors -------------------------------------------------------------------------------
    def _new_actor(self, lane: _Lane, engine: EngineConfig):
        import ray

        from runner.execution.actor import EngineActor

        s = self.settings
        options = actor_resources(device=s.device, width=units_needed(engine, device=s.device),
                                  share=lane_share(self._resident_mode(engine)), cpus_per_engine=s.cpus_per_engine)
        if lane.bundle is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=lane.bundle[0], placement_group_bundle_index=lane.bundle[1])
        env = actor_env(base=s.env, engine=engine)
        if s.device == "cpu" and len(self.lanes) > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in env:
            # Every CPU engine would otherwise pin its threads to the same cores.
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binding(slot=lane.index, cores_per_engine=s.cpus_per_engine,
                                                           total_cores=os.cpu_count() or 1)
        from runner.config.schema import EngineStart
        from runner.execution.engine_process import resolve

        actor = ray.remote(max_restarts=0, **options)(EngineActor).remote(
            env=env, keys=self.keys, slo=s.slo, warmup=s.warmup, warmup_output_cap=s.warmup_output_cap,
            engine_start=resolve(EngineStart(s.engine_start)).value)
        return actor

    def _resident_mode(self, engine: EngineConfig) -> bool:
        """Whether this engine may stay loaded between its turns (before the memory plan)."""
        s = self.settings
        if s.resident == "off":
            return False
        if s.device == "cuda":
            return units_needed(engine, device="cuda") == 1  # Ray shares only a fraction of one GPU
        return s.resident == "on" or CPU_IDLE_ENGINE_HARMLESS

    def _save_log(self, engine: EngineConfig, actor) -> Optional[str]:
        import ray

        try:
            text = ray.get(actor.read_log.remote(), timeout=10)
        except Exception:
            return None
        return self._write_log(engine, actor, text)

    def _write_log(self, engine: EngineConfig, actor, text: str) -> str:
        """One log per engine: each of its actors' whole output (a reload's after the first's), rewritten."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{engine.engine_id}.log"
        texts = self.logged.setdefault(engine.engine_id, {})
        texts[id(actor)] = text
        path.write_text("".join(texts.values()))
        return str(path)

    def _kill(self, actor, *, graceful: bool) -> None:
        """Bounded teardown: a graceful shutdown for at most shutdown_timeout_s, then kill."""
        import ray

        if actor is None:
            return
        if graceful:
            try:
                ray.get(actor.shutdown.remote(), timeout=self.settings.shutdown_timeout_s)
            except Exception:
                pass
        try:
            ray.kill(actor)
        except Exception:
            pass

    def _evict(self, lane: _Lane, resident: _Resident, *, graceful: bool = True) -> None:
        lane.residents.pop(resident.engine.engine_id, None)
        if graceful:
            self._retire(resident.engine, resident.actor)
        else:
            self._kill(resident.actor, graceful=False)

    def _retire(self, engine: EngineConfig, actor) -> None:
        """Teardown off the critical path: the log and a graceful shutdown are asked for now, the actor is
        killed once they answer or shutdown_timeout_s passes (`_reap`), while the next engine gets going."""
        log_ref = actor.read_log.remote()
        self.dying.append(_Dying(engine=engine, actor=actor, log_ref=log_ref, shutdown_ref=actor.shutdown.remote(),
                                 deadline=time.monotonic() + self.settings.shutdown_timeout_s))

    def _reap(self, *, wait: bool = False) -> None:
        import ray

        while self.dying:
            for dying in list(self.dying):
                done, _ = ray.wait([dying.shutdown_ref], timeout=0)
                if not done and time.monotonic() < dying.deadline:
                    continue
                self.dying.remove(dying)
                try:
                    text = ray.get(dying.log_ref, timeout=1)
                    self._write_log(dying.engine, dying.actor, text)
                except Exception:
                    pass
                self._kill(dying.actor, graceful=False)
            if not wait or not self.dying:
                return
            time.sleep(0.1)

    def _free_device(self) -> None:
        """CUDA: an engine retired a moment ago still holds its budget of the GPU until its shutdown ends, and
        a wake or a load beside it fails for want of memory (seen on the H200: every wake right after the
        previous engine's last turn failed, and the engine loaded again). Its teardown finishes first (at most
        shutdown_timeout_s, then kill)."""
        if self.settings.device == "cuda" and self.dying:
            self._reap(wait=True)

    def _call(self, lane: _Lane, phase: Phase, ref, timeout_s: float) -> None:
        if self.launched_at is not None:
            self._write_phase(lane=-1, phase=Phase.LAUNCH.value, engine_id=None, started_at=self.launched_at,
                              duration_s=time.time() - self.launched_at)
            self.launched_at = None
        lane.phase, lane.ref = phase, ref
        lane.started = time.monotonic()
        lane.started_epoch = time.time()
        lane.deadline = lane.started + timeout_s

    def _end_phase(self, lane: _Lane, *, ok: bool, load_s: Optional[float] = None) -> None:
        """The lane's call in flight has ended: its span goes on the timeline."""
        if lane.ref is None or lane.phase == Phase.IDLE:
            return
        trial = lane.trial if lane.phase == Phase.TRIAL else None
        engine = lane.current.engine.engine_id if lane.current is not None else None
        self._write_phase(lane=lane.index, phase=lane.phase.value, engine_id=engine,
                          trial_id=trial.trial_id if trial else None, round=lane.round,
                          started_at=lane.started_epoch, duration_s=time.monotonic() - lane.started, ok=ok,
                          load_s=load_s)

    def _write_phase(self, **columns) -> None:
        write = getattr(self.sink, "write_phase", None)
        if write is None:
            return
        with signals_deferred():
            write(PhaseRecord(sweep=self.keys.sweep, run_id=self.keys.run_id, **columns))

    # ---- results -----------------------------------------------------------------------------
    def _engine_record(self, engine: EngineConfig, **columns) -> EngineRecord:
        return EngineRecord(**dataclasses.asdict(engine.settings), sweep=self.keys.sweep,
                            run_id=self.keys.run_id, engine_id=engine.engine_id, **columns)

    def _write_engine(self, record) -> None:
        with signals_deferred():
            self.sink.write_engine(record)
        self.on_engine(record)

    def _record_trial(self, record, requests, *, trial: Trial) -> None:
        record = dataclasses.replace(record, round=trial.repeat, position=self.position)
        with signals_deferred():
            self.sink.write_trial(record, requests)
        self.position += 1
        if record.status == TrialStatus.OK and record.duration_s is not None:
            self.durations[(record.engine_id, record.workload)].append(float(record.duration_s))
        if self.settings.race and record.status == TrialStatus.OK:
            self._add_sample(record, requests)
        self.on_trial(record, requests)
        if self.progress is not None:
            self.progress.update(1)

    def _fail_trial(self, engine: EngineConfig, trial: Trial, *, kind: str, reason: str,
                    status: TrialStatus = TrialStatus.FAILED) -> None:
        row = failed_trial_row(keys=self.keys, trial=trial, settings=engine.settings, kind=kind, reason=reason,
                               attempts=self.attempts.get(trial.trial_id, 1))
        self._record_trial(dataclasses.replace(row, status=status), [], trial=trial)

    def _fail_engine(self, lane: _Lane, engine: EngineConfig, *, kind: str, reason: str, current: bool = True,
                     **columns) -> None:
        """A failed start is a result: one failed engine row, and each of its trials left failed with the reason.
        `current`: the lane's own engine (its step's trials fail too), else one that was loading beside it."""
        self._write_engine(self._engine_record(engine, status=EngineStatus.FAILED, failure_kind=kind,
                                               failure_reason=reason, started_at=time.time(), **columns))
        if current:
            for trial in list(lane.trials):
                self._fail_trial(engine, trial, kind=engine_start_failure(kind), reason=reason)
            lane.trials.clear()
        for step in lane.steps:  # its later rounds cannot run either
            if step.engine_id == engine.engine_id:
                for trial in step.trials:
                    self._fail_trial(engine, trial, kind=engine_start_failure(kind), reason=reason)
        lane.steps = collections.deque(st for st in lane.steps if st.engine_id != engine.engine_id)

    # ---- race --------------------------------------------------------------------------------
    def _add_sample(self, record, requests) -> None:
        race = _race_module()
        value = race.trial_sample(record, requests)
        if value is None:
            return
        from runner.measurement.workloads import workload_class

        metric = workload_class(record.workload).deciding
        self.samples.append(race.RaceSample(
            engine_id=record.engine_id, arm=self._arm(record.engine_id), workload=record.workload,
            point=f"{record.workload_params_json} c={record.concurrency}", round=int(record.round),
            value=float(value), higher_is_better=bool(getattr(metric, "higher_is_better", True))))

    def _arm(self, engine_id: str) -> str:
        if not hasattr(self, "_arms"):
            try:
                from runner.plan.labels import engine_labels

                labels = engine_labels([e.settings for e in self.plan.engines], apis=[e.api for e in self.plan.engines])
                self._arms = {e.engine_id: label for e, label in zip(self.plan.engines, labels)}
            except Exception:  # labels are another module's; the engine id always names the arm
                self._arms = {}
        return self._arms.get(engine_id, engine_id)

    def _race_after_round(self, finished_round: int) -> None:
        if not self.settings.race or not self.samples:
            return
        race = _race_module()
        found = race.race_eliminations(self.samples, tie_band=self.settings.race_tie_band,
                                       seed=self.settings.order_seed)
        for key, reason in found.items():
            self.eliminated.setdefault(tuple(key), f"{reason} (round {finished_round})")

    # ---- deadline ----------------------------------------------------------------------------
    def _left_s(self) -> Optional[float]:
        if self.settings.deadline_s is None:
            return None
        return self.settings.deadline_s - (time.monotonic() - self.t0)

    def _check_deadline(self, *, phase: Phase, what: str, estimate_s: Optional[float]) -> None:
        """Raises DeadlineReached when the call about to go out (phase START or TRIAL) would pass the deadline."""
        left = self._left_s()
        if left is None or estimate_s is None or estimate_s <= left:
            return
        todo = sum(len(st.trials) for lane in self.lanes for st in lane.steps) + \
            sum(len(lane.trials) for lane in self.lanes) + (1 if phase is Phase.TRIAL else 0)
        raise DeadlineReached(left=todo, reason=f"{what} would take ~{estimate_s:.0f} s, {max(left, 0):.0f} s left "
                                                f"before execution.deadline_s={self.settings.deadline_s:g}")

    # ---- lane steps --------------------------------------------------------------------------
    def _begin_step(self, lane: _Lane) -> bool:
        """Takes the lane's next (round, engine) step; returns False when the lane is done."""
        while lane.steps:
            step = lane.steps.popleft()
            if step.round != lane.round:
                if lane.round >= 0:
                    self._race_after_round(lane.round)
                lane.round = step.round
            engine = self.plan.engine(step.engine_id)
            trials = collections.deque()
            for trial in step.trials:
                reason = self.eliminated.get((trial.engine_id, trial.workload))
                if reason is not None:
                    self._fail_trial(engine, trial, kind=RACE_ELIMINATED, reason=reason, status=TrialStatus.SKIPPED)
                else:
                    trials.append(trial)
            if not trials:
                continue
            lane.step, lane.trials = step, trials
            self._enter_engine(lane, engine)
            return True
        for resident in list(lane.residents.values()):
            self._evict(lane, resident)
        if lane.spare is not None:
            self._kill(lane.spare, graceful=False)
            lane.spare = lane.spare_ready = None
        return False

    def _enter_engine(self, lane: _Lane, engine: EngineConfig) -> None:
        if lane.preloading:  # engines still loading beside a failed one: they come in first
            lane.entering = engine
            self._after_load(lane)
            return
        resident = lane.residents.get(engine.engine_id)
        if resident is not None:
            lane.current = resident
            if resident.asleep:
                self._free_device()
                self._call(lane, Phase.WAKE, resident.actor.wake_up.remote(), self.settings.start_timeout_s)
                return
            self._next_trial(lane)
            return
        # Room first: the engine least soon needed again goes.
        while len(lane.residents) >= lane.max_resident and lane.residents:
            self._evict(lane, least_soon_needed(list(lane.residents.values()), lane.steps))
        self._check_deadline(phase=Phase.START, what=f"loading {engine.engine_id}",
                             estimate_s=self._load_estimate(engine))
        self._free_device()
        actor = lane.spare if lane.spare is not None else self._new_actor(lane, engine)
        lane.spare = lane.spare_ready = None
        lane.current = _Resident(engine=engine, actor=actor)
        if not lane.planned:
            self._call(lane, Phase.PREPARE, actor.prepare.remote(), self.settings.start_timeout_s)
            return
        self._start_engine(lane)

    def _start_engine(self, lane: _Lane) -> None:
        engine = lane.current.engine
        sleepy = self.settings.device == "cuda" and lane.max_resident > 1
        ref = lane.current.actor.start.remote(engine=engine_for_actor(engine, sleep_mode=sleepy),
                                              model=self.model_cfg)
        self._call(lane, Phase.START, ref, self.settings.start_timeout_s)
        if self.settings.device == "cpu":
            self._preload(lane)
            self._start_spare(lane)

    def _preload(self, lane: _Lane) -> None:
        """CPU, engines resident: the lane's next engines load now, beside this one (loads overlap loads; no
        trial starts until every one of them is in), so later turns switch without a load."""
        if lane.max_resident <= 1 or not self._resident_mode(lane.current.engine):
            return
        room = min(lane.max_resident - 1 - len([e for e in lane.residents if e != lane.current.engine.engine_id]),
                   parallel_cpu_loads(cores=os.cpu_count() or 1, cpus_per_engine=self.settings.cpus_per_engine,
                                      lanes=len(self.lanes)) - 1)
        for step in lane.steps:
            engine_id = step.engine_id
            if room <= len(lane.preloading):
                return
            if engine_id == lane.current.engine.engine_id or engine_id in lane.residents or \
                    engine_id in lane.preloading:
                continue
            engine = self.plan.engine(engine_id)
            actor = lane.spare if lane.spare is not None else self._new_actor(lane, engine)
            lane.spare = lane.spare_ready = None
            ref = actor.start.remote(engine=engine_for_actor(engine), model=self.model_cfg)
            lane.preloading[engine_id] = (_Resident(engine=engine, actor=actor), ref, time.time())

    def _after_load(self, lane: _Lane) -> None:
        """Trials start once the engines loading beside this one are in (their loads would slow the trials)."""
        if lane.preloading:
            engine_id, (_, ref, _) = next(iter(lane.preloading.items()))
            lane.preload_id = engine_id
            self._call(lane, Phase.PRELOAD, ref, self.settings.start_timeout_s)
            return
        if lane.current is None:
            engine, lane.entering = lane.entering, None
            lane.phase, lane.ref = Phase.IDLE, None
            if engine is not None:
                self._enter_engine(lane, engine)
            return
        self._next_trial(lane)

    def _on_preloaded(self, lane: _Lane, result, *, error: Optional[str] = None) -> None:
        resident, _, began = lane.preloading.pop(lane.preload_id)
        engine = resident.engine
        if error is None and result.ok:
            columns = {k: v for k, v in result.columns.items() if k != "device_kind"}
            self._write_phase(lane=lane.index, phase=Phase.START.value, engine_id=engine.engine_id,
                              started_at=began, duration_s=time.time() - began, load_s=columns.get("load_s"))
            if columns.get("load_s") is not None:
                self.loads[engine.engine_id] = float(columns["load_s"])
            lane.residents[engine.engine_id] = resident
            self._write_engine(self._engine_record(engine, status=EngineStatus.OK,
                                                   log_file=self._save_log(engine, resident.actor),
                                                   started_at=time.time(), device_kind=self.settings.device,
                                                   **columns))
        else:
            log_file = self._save_log(engine, resident.actor)
            self._kill(resident.actor, graceful=False)
            if error is not None:
                self._fail_engine(lane, engine, kind="actor_died_during_start", reason=error[:600], current=False)
            else:
                self._fail_engine(lane, engine, kind=result.failure_kind, reason=result.failure_reason,
                                  log_file=log_file, failure_numbers_json=json.dumps(result.failure_numbers),
                                  current=False)
        self._after_load(lane)

    def _next_trial(self, lane: _Lane) -> None:
        if not lane.trials:
            self._end_step(lane)
            return
        if self.dying and self.settings.device == "cpu":
            self._reap(wait=True)  # an engine shutting down would take cores from the trial
        if lane.spare_ready is not None and self.settings.device == "cpu":
            self._await_spare(lane)  # so would the next engine's imports
        trial = lane.trials[0]
        engine = lane.current.engine
        self._check_deadline(phase=Phase.TRIAL, what=f"trial {trial.trial_id}",
                             estimate_s=self._trial_estimate(engine, trial))
        lane.trials.popleft()
        attempt = self.attempts.get(trial.trial_id, 0) + 1
        self.attempts[trial.trial_id] = attempt
        lane.trial = trial
        self._call(lane, Phase.TRIAL, lane.current.actor.run_trial.remote(trial=trial, attempt=attempt),
                   self.settings.trial_timeout_s)
        if self.settings.device == "cuda":
            self._start_spare(lane)
        if self.progress is not None:
            self.progress.set_postfix_str(f"r{trial.repeat} {engine_label(engine, self.plan.engines)}", refresh=True)

    def _start_spare(self, lane: _Lane) -> None:
        """The next engine's process and imports start ahead: on CUDA while this engine runs trials; on CPU
        while this engine loads (during trials the imports would take cores from the trial being measured;
        CPU load_s then includes that contention)."""
        if lane.spare is not None or lane.current is None:
            return
        nxt = next((st for st in lane.steps if st.engine_id != lane.current.engine.engine_id), None)
        if nxt is None or nxt.engine_id in lane.residents:
            return
        if self.settings.device == "cuda" and lane.max_resident <= 1 and not self._resident_mode(lane.current.engine):
            return  # a whole-GPU (or TP) bundle has no fraction to spare
        lane.spare = self._new_actor(lane, self.plan.engine(nxt.engine_id))
        lane.spare_ready = lane.spare.prepare.remote()

    def _await_spare(self, lane: _Lane) -> None:
        """Blocks until the spare's imports are done (a failed prepare shows again when the spare starts); the
        wait goes on the timeline as the next engine's `prepare`."""
        import ray

        started, started_epoch = time.monotonic(), time.time()
        done, _ = ray.wait([lane.spare_ready], timeout=0)
        if not done:
            ray.wait([lane.spare_ready], timeout=self.settings.start_timeout_s)
            nxt = next((st.engine_id for st in lane.steps if st.engine_id != lane.current.engine.engine_id), None)
            self._write_phase(lane=lane.index, phase=Phase.PREPARE.value, engine_id=nxt, round=lane.round,
                              started_at=started_epoch, duration_s=time.monotonic() - started, ok=True)
        lane.spare_ready = None

    def _end_step(self, lane: _Lane) -> None:
        current = lane.current
        lane.current, lane.trial = None, None
        if lane.steps and lane.steps[0].engine_id == current.engine.engine_id:
            # Its own next turn comes next (one engine per lane, or a rotation that repeats it): it stays as it is.
            lane.residents[current.engine.engine_id] = current
            lane.phase, lane.ref = Phase.IDLE, None
            return
        again = any(st.engine_id == current.engine.engine_id for st in lane.steps)
        if again and lane.max_resident > 1 and self._host_allows(lane, current) and \
                self._back_before_deadline(lane, current):
            lane.residents[current.engine.engine_id] = current
            if self.settings.device == "cuda":
                current.asleep = True
                lane.current = current
                self._call(lane, Phase.SLEEP, current.actor.sleep.remote(), self.settings.start_timeout_s)
                return
        elif not again and self.settings.device == "cpu" and self._resident_mode(current.engine) and \
                len(lane.residents) < lane.max_resident and self._next_is_resident(lane):
            # Done for the sweep, but its teardown would take cores from the next engine's trials (seen: 2-3x
            # slower decode while an engine shut down beside them); idle, it costs nothing until the lane ends.
            lane.residents[current.engine.engine_id] = current
        else:
            lane.residents.pop(current.engine.engine_id, None)
            self._retire(current.engine, current.actor)
        lane.phase, lane.ref = Phase.IDLE, None

    def _next_is_resident(self, lane: _Lane) -> bool:
        return bool(lane.steps) and lane.steps[0].engine_id in lane.residents

    def _back_before_deadline(self, lane: _Lane, resident: _Resident) -> bool:
        """Keeping an engine (a first sleep costs 10-15 s on an H200) pays only if its next turn starts before
        execution.deadline_s; the steps before that turn are estimated from the sweep so far."""
        left = self._left_s()
        if left is None:
            return True
        ahead = 0.0
        for step in lane.steps:
            if step.engine_id == resident.engine.engine_id:
                return ahead < left
            engine = self.plan.engine(step.engine_id)
            if step.engine_id not in lane.residents:
                ahead += self._load_estimate(engine) or 0.0
            ahead += sum(self._trial_estimate(engine, t) or 0.0 for t in step.trials)
        return False

    def _host_allows(self, lane: _Lane, resident: _Resident) -> bool:
        """An asleep engine keeps its weights in host RAM: all of them must fit what the node has free."""
        if self.settings.device != "cuda":
            return True
        held = sum(r.weights_gib for r in lane.residents.values() if r is not resident) + resident.weights_gib
        return held <= HOST_SHARE_FOR_ASLEEP * getattr(self, "_host_gib", float("inf"))

    def _load_estimate(self, engine: EngineConfig) -> Optional[float]:
        if engine.engine_id in self.loads:
            return self.loads[engine.engine_id]
        return statistics.median(self.loads.values()) if self.loads else None

    def _trial_estimate(self, engine: EngineConfig, trial: Trial) -> Optional[float]:
        return trial_estimate(self.durations, engine_id=engine.engine_id, workload=trial.workload)

    # ---- results of calls --------------------------------------------------------------------
    def _handle(self, lane: _Lane) -> None:
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            result = ray.get(lane.ref)
        except (RayActorError, RayTaskError) as exc:
            self._end_phase(lane, ok=False)
            if lane.phase == Phase.PRELOAD:
                self._on_preloaded(lane, None, error=f"{type(exc).__name__}: {exc}")
                return
            if isinstance(exc, RayTaskError) and not isinstance(exc, RayActorError) and lane.phase == Phase.TRIAL:
                self._fail_trial(lane.current.engine, lane.trial, kind="trial_error", reason=str(exc)[-600:])
                self._next_trial(lane)
                return
            self._on_actor_lost(lane, f"{type(exc).__name__}: {exc}")
            return
        columns = getattr(result, "columns", None) or {}
        self._end_phase(lane, ok=bool(getattr(result, "ok", True)),
                        load_s=columns.get("load_s") if lane.phase == Phase.START else None)
        phase = lane.phase
        if phase == Phase.PREPARE:
            self._plan_lane(lane, result or {})
            self._start_engine(lane)
        elif phase == Phase.START:
            self._on_start(lane, result)
        elif phase == Phase.PRELOAD:
            self._on_preloaded(lane, result)
        elif phase == Phase.WAKE:
            lane.current.asleep = False
            self._next_trial(lane)
        elif phase == Phase.SLEEP:
            lane.current, lane.phase, lane.ref = None, Phase.IDLE, None
        else:
            self._record_trial(result.trial, result.requests, trial=lane.trial)
            self._next_trial(lane)

    def _plan_lane(self, lane: _Lane, report: dict) -> None:
        s = self.settings
        engines = [self.plan.engine(i) for i in dict.fromkeys(st.engine_id for st in lane.steps)]
        engines.append(lane.current.engine)
        engines = list({e.engine_id: e for e in engines}.values())
        if not any(self._resident_mode(e) for e in engines):
            lane.max_resident = 1
        else:
            lane.max_resident = plan_residency(
                device=s.device, budgets=[e.settings.gpu_memory_utilization for e in engines],
                device_total_gib=report.get("device_total_gib"), host_available_gib=report.get("host_available_gib"),
                context_gib=report.get("context_gib") or CONTEXT_GIB, cpu_engine_gib=s.cpu_kv_gib + CPU_ENGINE_BASE_GIB,
            ).max_resident
        self._host_gib = report.get("host_available_gib") or float("inf")
        lane.planned = True

    def _on_start(self, lane: _Lane, result) -> None:
        engine, actor = lane.current.engine, lane.current.actor
        log_file = self._save_log(engine, actor)
        if result.ok:
            columns = {k: v for k, v in result.columns.items() if k != "device_kind"}
            if columns.get("load_s") is not None:
                self.loads[engine.engine_id] = float(columns["load_s"])
            lane.current.weights_gib = float(columns.get("weights_gib") or 0.0)
            self._write_engine(self._engine_record(engine, status=EngineStatus.OK, log_file=log_file,
                                                   started_at=time.time(), device_kind=self.settings.device,
                                                   **columns))
            self._after_load(lane)
            return
        self._kill(actor, graceful=False)
        others = [r for r in lane.residents.values() if r.engine.engine_id != engine.engine_id]
        if result.failure_kind in MEMORY_FAILURES and others:
            # The residency plan was too generous: resident engines took the room this one needed. One fewer
            # stays from now on, and this engine loads again; its failure is the plan's, not the engine's.
            self._evict(lane, least_soon_needed(others, lane.steps), graceful=False)
            lane.max_resident = max(1, len(lane.residents) + 1)
            lane.current = _Resident(engine=engine, actor=self._new_actor(lane, engine))
            self._start_engine(lane)
            return
        self._fail_engine(lane, engine, kind=result.failure_kind, reason=result.failure_reason, log_file=log_file,
                          failure_numbers_json=json.dumps(result.failure_numbers))
        lane.current, lane.phase, lane.ref = None, Phase.IDLE, None

    def _on_actor_lost(self, lane: _Lane, error: str) -> None:
        """The actor died (killed, segfault, device error): its engine reloads on a fresh actor, the trial retries."""
        current = lane.current
        engine = current.engine
        self._kill(current.actor, graceful=False)
        lane.residents.pop(engine.engine_id, None)
        self.restarts[engine.engine_id] += 1
        if lane.phase in (Phase.PREPARE, Phase.START):
            self._fail_engine(lane, engine, kind="actor_died_during_start", reason=error[:600])
            lane.current, lane.phase, lane.ref = None, Phase.IDLE, None
            return
        if lane.phase == Phase.TRIAL and lane.trial is not None:
            trial = lane.trial
            if self.attempts.get(trial.trial_id, 1) <= self.settings.max_trial_retries:
                lane.trials.appendleft(trial)
            else:
                self._fail_trial(engine, trial, kind="actor_died", reason=error[:600])
        lane.current, lane.trial = None, None
        if lane.trials:
            self._enter_engine(lane, engine)
        else:
            lane.phase, lane.ref = Phase.IDLE, None

    def _on_timeout(self, lane: _Lane) -> None:
        self._end_phase(lane, ok=False)
        if lane.phase == Phase.PRELOAD:
            self._on_preloaded(lane, None, error=f"engine did not start within {self.settings.start_timeout_s} s")
            return
        current = lane.current
        self._save_log(current.engine, current.actor)
        self._kill(current.actor, graceful=False)
        lane.residents.pop(current.engine.engine_id, None)
        self.restarts[current.engine.engine_id] += 1
        if lane.phase == Phase.TRIAL:
            self._fail_trial(current.engine, lane.trial, kind="timeout",
                             reason=f"trial exceeded execution.trial_timeout_s={self.settings.trial_timeout_s}")
            lane.current, lane.trial = None, None
            if lane.trials:
                self._enter_engine(lane, current.engine)
            else:
                lane.phase, lane.ref = Phase.IDLE, None
            return
        self._fail_engine(lane, current.engine, kind="start_timeout",
                          reason=f"engine did not start within {self.settings.start_timeout_s} s")
        lane.current, lane.phase, lane.ref = None, Phase.IDLE, None

    # ---- loop --------------------------------------------------------------------------------
    def run(self, *, skip_trial_ids: set[str]) -> None:
        import ray

        self.t0 = time.monotonic()
        self.lanes = self._make_lanes(skip_trial_ids)
        try:
            live = [lane for lane in self.lanes if self._begin_step(lane)]
            while live:
                refs = [lane.ref for lane in live if lane.ref is not None]
                ready, _ = ray.wait(refs, num_returns=1, timeout=1.0) if refs else ([], [])
                for lane in list(live):
                    if lane.ref is not None and lane.ref in ready:
                        self._handle(lane)
                    elif lane.ref is not None and time.monotonic() > lane.deadline:
                        self._on_timeout(lane)
                    if lane.ref is None and not self._begin_step(lane):
                        live.remove(lane)
                self._reap()
            self._reap(wait=True)
        except KeyboardInterrupt:
            self._abandon()
            raise Interrupted() from None
        except DeadlineReached:
            self._abandon()
            raise
        finally:
            self._remove_placement_group()

    def _abandon(self) -> None:
        """Stop in seconds: the trial in flight is dropped (it reruns on resume), every engine is killed."""
        import ray

        with signals_deferred():
            actors = []
            for lane in self.lanes:
                actors += [r.actor for r in lane.residents.values()]
                if lane.current is not None:
                    actors.append(lane.current.actor)
                if lane.spare is not None:
                    actors.append(lane.spare)
                actors += [r.actor for r, _, _ in lane.preloading.values()]
                lane.preloading.clear()
                lane.residents.clear()
                lane.current = lane.spare = lane.spare_ready = None
            actors += [d.actor for d in self.dying]
            self.dying.clear()
            actors = list({id(a): a for a in actors}.values())
            # Engines first (ray.kill alone may orphan an engine core child), all at once and bounded.
            refs = []
            for actor in actors:
                try:
                    refs.append(actor.shutdown.remote())
                except Exception:
                    pass
            if refs:
                try:
                    ray.wait(refs, num_returns=len(refs), timeout=ABANDON_SHUTDOWN_S)
                except Exception:
                    pass
            for actor in actors:
                try:
                    ray.kill(actor)
                except Exception:
                    pass

    def _make_lanes(self, skip_trial_ids: set[str]) -> list[_Lane]:
        s = self.settings
        units = s.device_units or s.max_parallel_engines
        width = max([units_needed(e, device=s.device) for e in self.plan.engines] or [1])
        count = max(1, min(units // width if units >= width else 1, s.max_parallel_engines))
        assignment = assign_lanes(self.plan, lanes=count, device=s.device, skip_trial_ids=skip_trial_ids)
        lanes = []
        for i, engine_ids in enumerate(assignment):
            steps = round_steps(self.plan, engine_ids=engine_ids, skip_trial_ids=skip_trial_ids,
                                seed=s.order_seed, lane=i)
            if steps:
                lanes.append(_Lane(index=i, steps=collections.deque(steps)))
        if s.device == "cuda" and lanes and width <= units:
            import ray
            from ray.util.placement_group import placement_group

            # One bundle per lane: resident engines of a lane share its GPU(s), and no other lane's.
            self.placement_group = placement_group([{"GPU": width, "CPU": 1} for _ in lanes], strategy="PACK")
            ray.get(self.placement_group.ready(), timeout=s.start_timeout_s)
            for lane in lanes:
                lane.bundle = (self.placement_group, lane.index)
        return lanes

    def _remove_placement_group(self) -> None:
        if self.placement_group is None:
            return
        try:
            from ray.util.placement_group import remove_placement_group

            remove_placement_group(self.placement_group)
        except Exception:
            pass
        self.placement_group = None


def _race_module():
    try:
        from runner.measurement import race
    except ImportError as exc:
        raise RuntimeError(f"sweep.race=true needs runner/measurement/race.py ({exc}) (fix: sweep.race=false)") from exc
    return race


# ---- pure helpers (planning, env) --------------------------------------------------------------
# Engine arguments that fix the KV size per engine; they win over the process-wide VLLM_CPU_KVCACHE_SPACE.
PER_ENGINE_KV_ARGS = ("kv_cache_memory_bytes",)


def units_needed(engine: EngineConfig, *, device: str) -> int:
    """Device units one engine occupies: its TP GPUs on cuda, one slot on CPU."""
    return max(1, int(engine.settings.tensor_parallel_size)) if device == "cuda" else 1


def engine_for_actor(engine: EngineConfig, *, sleep_mode: bool = False) -> EngineConfig:
    """TP > 1 inside one actor needs vLLM's multiprocessing executor (Ray's would nest a second cluster);
    a resident CUDA engine needs vLLM's sleep mode (its cumem allocator) from the start."""
    args = dict(engine.engine_args)
    if engine.settings.tensor_parallel_size > 1 and "distributed_executor_backend" not in args:
        args["distributed_executor_backend"] = "mp"
    if sleep_mode:
        args.setdefault("enable_sleep_mode", True)
    return engine if args == engine.engine_args else dataclasses.replace(engine, engine_args=args)


# ---- residency and rounds (pure) ------------------------------------------------------------------
# Measured on this 2-core machine (`python bench/efficiency.py --idle-engine 4`, 2026-12-03, other work niced beside
# it): decode tok/s of an engine alone vs beside a loaded idle engine, medians of 8: bs1 148.7 vs 147.3 (0.990),
# bs4 393.3 vs 401.5 (1.021); per-run spread ±25 %. (2026-12-02, under heavy shared load: 0.72 / 1.25, inconclusive.)
# An idle vLLM engine blocks on its input queue; it takes no core. So CPU engines stay loaded between turns.
CPU_IDLE_ENGINE_HARMLESS = True
ASLEEP_HELD_GIB = 1.8  # what a CUDA engine asleep at level 1 still holds (H200, vLLM 0.26, MiMo-7B-shaped)
CONTEXT_GIB = 0.6      # one more process's CUDA context: the next engine's actor, started ahead
CPU_ENGINE_BASE_GIB = 1.5  # a CPU engine's process, weights of a small model, runtime (beside its KV)
HOST_SHARE_FOR_ASLEEP = 0.8  # of the node's available RAM, for the weights asleep engines keep there
ABANDON_SHUTDOWN_S = 4.0
# Start-up failures that resident engines may have caused (they hold device memory): retried with one fewer.
MEMORY_FAILURES = ("not_enough_free_memory_for_budget", "out_of_memory_while_loading", "no_kv_cache_memory")  # on a stop signal: the engines' own shutdown gets this long, then kill


def parallel_cpu_loads(*, cores: int, cpus_per_engine: float, lanes: int) -> int:
    """CPU engines one lane loads at once. A load's threads spin on every core it is bound to: on 2 cores three
    loads side by side took 135 s against ~30 s each one after the other (bench/efficiency.py, 2026-12-03), so a
    lane loads side by side only where each load gets cores of its own."""
    per_lane = cores / max(1, lanes)
    return max(1, int(per_lane // (2 * max(1.0, cpus_per_engine))))


@dataclass(frozen=True, kw_only=True)
class Residency:
    max_resident: int
    reason: str


def plan_residency(*, device: str, budgets: list[float], device_total_gib: Optional[float],
                   host_available_gib: Optional[float], asleep_held_gib: float = ASLEEP_HELD_GIB,
                   context_gib: float = CONTEXT_GIB, cpu_engine_gib: float = 2.5) -> Residency:
    """How many of one device's engines stay loaded at once (1: load-run-stop).

    CUDA: the awake engine's budget is a share of the WHOLE GPU and vLLM's start-up check counts what other
    processes hold, so the largest budget + every other resident engine asleep + the next actor's context must
    fit the GPU. CPU: every resident engine keeps its KV and weights in RAM.
    """
    n = len(budgets)
    if n <= 1:
        return Residency(max_resident=1, reason="one engine on this device")
    if device == "cuda":
        if not device_total_gib:
            return Residency(max_resident=1, reason="GPU memory unknown")
        free_for_asleep = device_total_gib * (1.0 - max(budgets)) - context_gib
        asleep = int(max(0.0, free_for_asleep) // asleep_held_gib)
        k = min(n, 1 + asleep)
        return Residency(max_resident=k, reason=(
            f"budget {max(budgets)} of {device_total_gib:.1f} GiB leaves {free_for_asleep:.1f} GiB for engines "
            f"asleep ({asleep_held_gib} GiB each): {k} resident"))
    if host_available_gib is None:
        return Residency(max_resident=min(n, 2), reason="host memory unknown: 2 resident")
    k = max(1, min(n, int(HOST_SHARE_FOR_ASLEEP * host_available_gib // cpu_engine_gib)))
    return Residency(max_resident=k, reason=f"{host_available_gib:.1f} GiB RAM free, {cpu_engine_gib} GiB per engine: "
                                            f"{k} resident")


def lane_share(resident: bool) -> int:
    """How many actors share one device slot's Ray resources: residents need room beside each other."""
    return RESIDENT_ACTORS_PER_SLOT if resident else 2  # 2: the engine running + the next one's actor


RESIDENT_ACTORS_PER_SLOT = 16


def actor_resources(*, device: str, width: int, share: int, cpus_per_engine: float) -> dict:
    """Ray options of one engine actor. Several actors live on one device slot (resident engines, the next
    engine started ahead); the scheduler, not Ray, keeps one of them busy at a time."""
    if device == "cuda":
        if width > 1:  # Ray has no fraction of several GPUs: a TP group's actors take the whole group
            return {"num_gpus": width, "num_cpus": 0}
        return {"num_gpus": round(1.0 / share, 4), "num_cpus": 0}
    # CPU: the slot's cores are the scheduler's to hand out (VLLM_CPU_OMP_THREADS_BIND); idle residents hold none.
    return {"num_cpus": 0}


@dataclass(frozen=True, kw_only=True)
class Step:
    """One engine's trials of one round, in the order they run."""

    round: int
    engine_id: str
    trials: tuple


def round_steps(plan: Plan, *, engine_ids: list[str], skip_trial_ids: set[str] = frozenset(), seed: int = 0,
                lane: int = 0) -> list[Step]:
    """Round r holds repeat r of every engine's trials. Engines rotate from round to round from a seeded
    start; trials within an engine are shuffled (seeded). Finished trials drop out, so a resume continues
    the interrupted round."""
    rounds = sorted({t.repeat for e in engine_ids for t in plan.trials_of(e)})
    if not engine_ids:
        return []
    offset = random.Random(f"{seed}:{lane}:rotation").randrange(len(engine_ids))
    steps = []
    for index, r in enumerate(rounds):
        shift = (offset + index) % len(engine_ids)
        for engine_id in engine_ids[shift:] + engine_ids[:shift]:
            todo = [t for t in plan.trials_of(engine_id) if t.repeat == r and t.trial_id not in skip_trial_ids]
            random.Random(f"{seed}:{engine_id}:{r}").shuffle(todo)
            if todo:
                steps.append(Step(round=r, engine_id=engine_id, trials=tuple(todo)))
    return merge_adjacent(steps)


def merge_adjacent(steps: list[Step]) -> list[Step]:
    """A resume may leave one engine twice in a row (end of one round, start of the next): one visit."""
    out: list[Step] = []
    for step in steps:
        if out and out[-1].engine_id == step.engine_id and out[-1].round == step.round:
            out[-1] = dataclasses.replace(out[-1], trials=out[-1].trials + step.trials)
        else:
            out.append(step)
    return out


def assign_lanes(plan: Plan, *, lanes: int, device: str, skip_trial_ids: set[str] = frozenset()) -> list[list[str]]:
    """Engines onto device lanes, longest group first onto the least loaded lane (each lane runs its own rounds)."""
    load = [[0, i, []] for i in range(max(1, lanes))]
    for group in pending_groups(plan, skip_trial_ids=set(skip_trial_ids)):
        chosen = min(load, key=lambda s: (s[0], s[1]))
        chosen[0] += len(group.trials)
        chosen[2].append(group.engine.engine_id)
    return [ids for _, _, ids in load]


def least_soon_needed(residents: list, steps) -> object:
    """The resident engine whose next turn is furthest away (never again: first)."""
    order = [st.engine_id for st in steps]

    def next_turn(resident) -> int:
        try:
            return order.index(resident.engine.engine_id)
        except ValueError:
            return len(order) + 1
    return max(residents, key=next_turn)


def trial_estimate(durations: dict, *, engine_id: str, workload: str) -> Optional[float]:
    """A trial's expected duration: the median of this engine's trials of the workload, else of the workload's
    on any engine; None before any such trial ran (the first one always starts)."""
    own = durations.get((engine_id, workload))
    if own:
        return statistics.median(own)
    other = [d for (e, w), values in durations.items() if w == workload for d in values]
    return statistics.median(other) if other else None


def next_position(trial_rows: list[dict]) -> int:
    """Positions continue across resumes: one past the largest on disk."""
    positions = [r.get("position") for r in trial_rows if r.get("position") is not None]
    return max(positions) + 1 if positions else 0


def describe_rounds(plan: Plan, *, device: str, resident: str, lanes: int) -> list[str]:
    """The plan's lines about rounds and what switching engines costs."""
    repeats = len({t.repeat for t in plan.trials})
    engines = len(plan.engines)
    if repeats <= 1 or engines <= 1:
        return [f"rounds: {repeats}; engines load once each"]
    if resident == "off" or (device == "cpu" and resident != "on" and not CPU_IDLE_ENGINE_HARMLESS):
        return [f"rounds: {repeats}, engines interleaved; resident engines off: every engine loads once per round "
                f"({engines * repeats} loads instead of {engines}; execution.resident=auto keeps them loaded)"]
    how = "asleep at level 1 between turns (sleep mode)" if device == "cuda" else "loaded, idle between turns"
    return [f"rounds: {repeats}, engines interleaved and rotated per round, trials shuffled "
            f"(execution.order_seed); engines stay resident where memory allows, {how}; "
            f"where they do not fit, one load per engine per round"]


@dataclass(kw_only=True)
class _Group:
    engine: EngineConfig
    trials: collections.deque


def cpu_binding(*, slot: int, cores_per_engine: float, total_cores: int) -> str:
    """vLLM's VLLM_CPU_OMP_THREADS_BIND for one CPU engine slot: its own run of cores, e.g. "2-3"."""
    width = max(1, int(cores_per_engine))
    first = (slot * width) % max(1, total_cores)
    last = min(first + width, total_cores) - 1
    return str(first) if first == last else f"{first}-{last}"


def actor_env(*, base: dict, engine: EngineConfig, environ: Optional[dict] = None) -> dict:
    """The actor's environment. None removes a variable the node may have set."""
    environ = os.environ if environ is None else environ
    env = dict(base)
    if engine.settings.tensor_parallel_size > 1:
        env.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
    if any(name in engine.engine_args for name in PER_ENGINE_KV_ARGS):
        env["VLLM_CPU_KVCACHE_SPACE"] = None  # vLLM's CPU platform would override the engine's own size
    if FAULTS_ENV in environ:  # test hook, travels to remote nodes too
        env[FAULTS_ENV] = environ[FAULTS_ENV]
    return env


def pending_groups(plan: Plan, *, skip_trial_ids: set[str]) -> list[_Group]:
    """Engine groups with trials left, longest first so no device idles at the end while one long group runs."""
    groups = []
    for engine in plan.engines:
        todo = [t for t in plan.trials_of(engine.engine_id) if t.trial_id not in skip_trial_ids]
        if todo:
            groups.append(_Group(engine=engine, trials=collections.deque(todo)))
    return sorted(groups, key=lambda g: -len(g.trials))  # stable: plan order among equals


def layout(plan: Plan, *, device: str, units: int, skip_trial_ids: set[str] = frozenset()) -> list[list[str]]:
    """Which engine groups each device slot would run, by trial count (what `dry_run=true` shows)."""
    slots = [[0, i, []] for i in range(max(1, units))]
    for group in pending_groups(plan, skip_trial_ids=set(skip_trial_ids)):
        need = min(units_needed(group.engine, device=device), len(slots))
        chosen = sorted(slots, key=lambda s: (s[0], s[1]))[:need]
        finish = max(s[0] for s in chosen) + len(group.trials)
        for s in chosen:
            s[0] = finish
            s[2].append(group.engine.engine_id)
    return [s[2] for s in slots]


def connect_ray(*, address: Optional[str]) -> None:
    """Starts a local Ray, or joins a running cluster; quiet either way (engine logs go to files)."""
    import logging

    if address:
        use_cluster_token()  # before Ray reads its config
    import ray

    kwargs = dict(log_to_driver=False, logging_level=logging.ERROR)
    if address:
        # Remote nodes need the runner's code, not a shared filesystem: ship the package.
        package = str(Path(__file__).resolve().parents[1])
        ray.init(address=address, runtime_env={"py_modules": [package], "excludes": ["__pycache__"]}, **kwargs)
    else:
        # "local", not None: None would join whatever cluster `ray start` last left on this machine.
        ray.init(address="local", include_dashboard=False, **kwargs)


def use_cluster_token(environ: Optional[dict] = None) -> None:
    """`ray start` (Ray ≥ 2.5x) turns token authentication on and leaves the token in ~/.ray/auth_token;
    a driver joining that cluster must say so before Ray reads its config (a retry cannot)."""
    environ = os.environ if environ is None else environ
    if environ.get("RAY_AUTH_MODE"):
        return
    if environ.get("RAY_AUTH_TOKEN") or environ.get("RAY_AUTH_TOKEN_PATH") or \
            Path("~/.ray/auth_token").expanduser().exists():
        environ["RAY_AUTH_MODE"] = "token"


@dataclass(frozen=True, kw_only=True)
class Capacity:
    device_units: int  # GPUs on cuda, engine slots on CPU
    max_parallel_engines: int


def cluster_capacity(*, cluster, device: str, resources: Optional[dict] = None) -> Capacity:
    """What the cluster offers; `resources` is Ray's cluster_resources() (None: from the running Ray)."""
    if device == "cuda":
        if resources is None:
            import ray

            resources = ray.cluster_resources()
        units = int(resources.get("GPU", 0))
    else:
        units = int(cluster.cpu_engine_slots or 1)
    cap = int(cluster.max_parallel_engines or max(units, 1))
    return Capacity(device_units=max(units, 1), max_parallel_engines=cap)


def describe_devices(plan: Plan, *, device: str, capacity: Optional[Capacity], done: set[str]) -> list[str]:
    """The plan's lines about devices: slots, what one engine occupies, and a likely layout."""
    tps = sorted({e.settings.tensor_parallel_size for e in plan.engines}) or [1]
    if device == "cuda":
        per = "one actor per GPU" if tps == [1] else f"one actor per TP group of {'/'.join(map(str, tps))} GPUs"
        if capacity is None:
            return [f"devices: cuda, {per}; as many engines side by side as the Ray cluster's GPUs allow "
                    f"(known once Ray starts)"]
        head = f"devices: {capacity.device_units} GPU(s), {per}"
    else:
        if capacity is None:
            capacity = Capacity(device_units=1, max_parallel_engines=1)
        head = f"devices: cpu, {capacity.device_units} engine slot(s) (cluster.cpu_engine_slots)"
    lines = [f"{head}, at most {capacity.max_parallel_engines} engine(s) at a time, longest group first"]
    for i, ids in enumerate(layout(plan, device=device, units=capacity.device_units, skip_trial_ids=done)):
        lines.append(f"  slot {i}: {' -> '.join(ids) if ids else '(idle)'}")
    return lines


@contextlib.contextmanager
def signals_deferred():
    """Ctrl-C / SIGTERM wait until a result is on disk (main thread only; elsewhere a no-op)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    mask = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, mask)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def engine_label(engine: EngineConfig, engines: Optional[list[EngineConfig]] = None) -> str:
    """The engine's id and label; with the plan's engines, the label names each setting in which they differ
    (runner.plan.labels), else every setting."""
    from runner.plan.labels import full_label, plan_labels

    label = plan_labels(engines).get(engine.engine_id) if engines else None
    return f"{engine.engine_id} {label or full_label(engine.settings)}"
