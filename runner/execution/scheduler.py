"""The driver: engine groups onto actors, results onto disk as each trial ends.

Only the driver writes files, so a multi-node cluster needs no shared filesystem.
Every finished trial is written before the next one on its engine starts.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from runner.measurement.records import RunKeys, failed_trial_row
from runner.plan.grid import EngineConfig, Plan, Trial
from runner.schema import EngineRecord


@dataclass(kw_only=True)
class ExecutionSettings:
    device: str = "cpu"  # "cpu" | "cuda"
    max_parallel_engines: int = 1
    cpus_per_engine: float = 1
    env: dict = field(default_factory=dict)
    trial_timeout_s: float = 1800.0
    start_timeout_s: float = 1800.0
    max_trial_retries: int = 1
    slo: dict = field(default_factory=dict)


@dataclass(kw_only=True)
class _Group:
    engine: EngineConfig
    trials: collections.deque
    actor: object = None
    ref: object = None
    kind: str = ""  # "start" | "trial"
    trial: Optional[Trial] = None
    deadline: float = 0.0
    attempts: dict = field(default_factory=dict)
    restarts: int = 0


class Interrupted(Exception):
    pass


class Scheduler:
    def __init__(self, *, plan: Plan, model_cfg: dict, keys: RunKeys, sink, settings: ExecutionSettings,
                 log_dir: Path, on_trial: Callable | None = None, on_engine: Callable | None = None,
                 progress=None):
        self.plan = plan
        self.model_cfg = model_cfg
        self.keys = keys
        self.sink = sink
        self.settings = settings
        self.log_dir = Path(log_dir)
        self.on_trial = on_trial or (lambda *a, **k: None)
        self.on_engine = on_engine or (lambda *a, **k: None)
        self.progress = progress
        self.active: list[_Group] = []

    # ---- actors -------------------------------------------------------------------------------
    def _actor_class(self):
        import ray

        from runner.execution.actor import EngineActor

        s = self.settings
        if s.device == "cuda":
            tp = self.plan.engines[0].settings.tensor_parallel_size if self.plan.engines else 1
            return ray.remote(num_gpus=tp, num_cpus=1, max_restarts=0)(EngineActor)
        return ray.remote(num_cpus=s.cpus_per_engine, max_restarts=0)(EngineActor)

    def _new_actor(self, group: _Group) -> None:
        cls = self._actor_class()
        env = dict(self.settings.env)
        if group.engine.settings.tensor_parallel_size > 1:
            env.setdefault("VLLM_WORKER_MULTIPROC_METHOD", "spawn")
        group.actor = cls.remote(env=env, keys=self.keys, slo=self.settings.slo)
        group.ref = group.actor.start.remote(engine=group.engine, model=self._model_source())
        group.kind, group.trial = "start", None
        group.deadline = time.monotonic() + self.settings.start_timeout_s

    def _model_source(self):
        from runner.models.source import resolve_model_source

        return resolve_model_source(self.model_cfg)

    def _next_trial(self, group: _Group) -> bool:
        if not group.trials:
            return False
        trial = group.trials.popleft()
        attempt = group.attempts.get(trial.trial_id, 0) + 1
        group.attempts[trial.trial_id] = attempt
        group.ref = group.actor.run_trial.remote(trial=trial, attempt=attempt)
        group.kind, group.trial = "trial", trial
        group.deadline = time.monotonic() + self.settings.trial_timeout_s
        if self.progress is not None:
            self.progress.set_postfix_str(_engine_label(group.engine), refresh=True)
        return True

    def _save_log(self, group: _Group) -> Optional[str]:
        import ray

        try:
            text = ray.get(group.actor.read_log.remote(), timeout=30)
        except Exception:
            return None
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{group.engine.engine_id}.log"
        mode = "a" if group.restarts else "w"
        with open(path, mode) as f:
            f.write(text)
        return str(path)

    def _stop_actor(self, group: _Group, *, graceful: bool = True) -> None:
        import ray

        if group.actor is None:
            return
        if graceful:
            try:
                ray.get(group.actor.shutdown.remote(), timeout=60)
            except Exception:
                pass
        try:
            ray.kill(group.actor)
        except Exception:
            pass
        group.actor = None

    # ---- results -----------------------------------------------------------------------------
    def _engine_record(self, group: _Group, **columns) -> EngineRecord:
        return EngineRecord(**dataclasses.asdict(group.engine.settings), sweep=self.keys.sweep,
                            run_id=self.keys.run_id, engine_id=group.engine.engine_id, **columns)

    def _record_trial(self, record, requests) -> None:
        self.sink.write_trial(record, requests)
        self.on_trial(record, requests)
        if self.progress is not None:
            self.progress.update(1)

    def _fail_trial(self, group: _Group, trial: Trial, *, kind: str, reason: str) -> None:
        row = failed_trial_row(keys=self.keys, trial=trial, settings=group.engine.settings, kind=kind,
                               reason=reason, attempts=group.attempts.get(trial.trial_id, 1))
        self._record_trial(row, [])

    def _on_start(self, group: _Group, result) -> bool:
        log_file = self._save_log(group)
        if result.ok:
            record = self._engine_record(group, status="ok", log_file=log_file, started_at=time.time(),
                                         device_kind=self.settings.device, **{
                                             k: v for k, v in result.columns.items() if k != "device_kind"})
            self.sink.write_engine(record)
            self.on_engine(record)
            return self._next_trial(group)
        record = self._engine_record(group, status="failed", failure_kind=result.failure_kind,
                                     failure_reason=result.failure_reason, log_file=log_file,
                                     failure_numbers_json=json.dumps(result.failure_numbers), started_at=time.time())
        self.sink.write_engine(record)
        self.on_engine(record)
        while group.trials:
            trial = group.trials.popleft()
            self._fail_trial(group, trial, kind=f"engine_start:{result.failure_kind}", reason=result.failure_reason)
        return False

    def _on_actor_lost(self, group: _Group, error: str) -> bool:
        """The actor died (killed, segfault, device error): retry its trial on a fresh actor."""
        self._stop_actor(group, graceful=False)
        group.restarts += 1
        if group.kind == "trial" and group.trial is not None:
            trial = group.trial
            if group.attempts.get(trial.trial_id, 1) <= self.settings.max_trial_retries:
                group.trials.appendleft(trial)
            else:
                self._fail_trial(group, trial, kind="actor_died", reason=error[:600])
        elif group.kind == "start":
            record = self._engine_record(group, status="failed", failure_kind="actor_died_during_start",
                                         failure_reason=error[:600], started_at=time.time())
            self.sink.write_engine(record)
            while group.trials:
                self._fail_trial(group, group.trials.popleft(), kind="engine_start:actor_died", reason=error[:600])
            return False
        if not group.trials:
            return False
        self._new_actor(group)
        return True

    def _handle(self, group: _Group) -> bool:
        """Consumes the group's finished call; returns whether the group goes on."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        try:
            result = ray.get(group.ref)
        except (RayActorError, RayTaskError) as exc:
            if isinstance(exc, RayTaskError) and not isinstance(exc, RayActorError) and group.kind == "trial":
                self._fail_trial(group, group.trial, kind="trial_error", reason=str(exc)[-600:])
                return self._next_trial(group)
            return self._on_actor_lost(group, f"{type(exc).__name__}: {exc}")
        if group.kind == "start":
            return self._on_start(group, result)
        self._record_trial(result.trial, result.requests)
        return self._next_trial(group)

    def _on_timeout(self, group: _Group) -> bool:
        self._save_log(group)
        self._stop_actor(group, graceful=False)
        group.restarts += 1
        if group.kind == "trial":
            self._fail_trial(group, group.trial, kind="timeout",
                             reason=f"trial exceeded execution.trial_timeout_s={self.settings.trial_timeout_s}")
            if group.trials:
                self._new_actor(group)
                return True
            return False
        record = self._engine_record(group, status="failed", failure_kind="start_timeout",
                                     failure_reason=f"engine did not start within {self.settings.start_timeout_s} s",
                                     started_at=time.time())
        self.sink.write_engine(record)
        while group.trials:
            self._fail_trial(group, group.trials.popleft(), kind="engine_start:start_timeout",
                             reason=record.failure_reason)
        return False

    # ---- loop --------------------------------------------------------------------------------
    def run(self, *, skip_trial_ids: set[str]) -> None:
        import ray

        queue = collections.deque()
        for engine in self.plan.engines:
            todo = [t for t in self.plan.trials_of(engine.engine_id) if t.trial_id not in skip_trial_ids]
            if todo:
                queue.append(_Group(engine=engine, trials=collections.deque(todo)))
        try:
            while queue or self.active:
                while queue and len(self.active) < self.settings.max_parallel_engines:
                    group = queue.popleft()
                    self._new_actor(group)
                    self.active.append(group)
                ready, _ = ray.wait([g.ref for g in self.active], num_returns=1, timeout=1.0)
                for group in list(self.active):
                    if group.ref in ready:
                        goes_on = self._handle(group)
                    elif time.monotonic() > group.deadline:
                        goes_on = self._on_timeout(group)
                    else:
                        continue
                    if not goes_on:
                        if group.actor is not None:
                            self._save_log(group)
                            self._stop_actor(group)
                        self.active.remove(group)
        except KeyboardInterrupt:
            for group in self.active:
                self._stop_actor(group)
            self.active.clear()
            raise Interrupted() from None


def _engine_label(engine: EngineConfig) -> str:
    s = engine.settings
    spec = "off" if s.spec_method == "off" else f"{s.spec_method}:{s.num_speculative_tokens}"
    return f"{engine.engine_id} spec={spec} pc={'on' if s.enable_prefix_caching else 'off'} " \
           f"mem={s.gpu_memory_utilization} len={s.max_model_len}"
