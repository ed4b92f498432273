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
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from runner.execution.failures import FAULTS_ENV
from runner.measurement.records import RunKeys, failed_trial_row
from runner.plan.grid import EngineConfig, Plan, Trial
from runner.schema import EngineRecord


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
    slot: Optional[int] = None  # CPU engine slot, for core binding


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
    def _actor_class(self, engine: EngineConfig):
        import ray

        from runner.execution.actor import EngineActor

        s = self.settings
        if s.device == "cuda":
            # One actor per GPU, or per TP group: vLLM's `mp` executor runs the TP workers inside it.
            return ray.remote(num_gpus=units_needed(engine, device=s.device), num_cpus=1, max_restarts=0)(EngineActor)
        return ray.remote(num_cpus=s.cpus_per_engine, max_restarts=0)(EngineActor)

    def _new_actor(self, group: _Group) -> None:
        cls = self._actor_class(group.engine)
        env = actor_env(base=self.settings.env, engine=group.engine)
        if self.settings.device == "cpu" and self.settings.max_parallel_engines > 1 \
                and "VLLM_CPU_OMP_THREADS_BIND" not in env:
            # Every CPU engine would otherwise pin its threads to the same cores.
            if group.slot is None:
                taken = {g.slot for g in self.active if g is not group}
                group.slot = next(i for i in range(len(taken) + 1) if i not in taken)
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binding(slot=group.slot, cores_per_engine=self.settings.cpus_per_engine,
                                                           total_cores=os.cpu_count() or 1)
        group.actor = cls.remote(env=env, keys=self.keys, slo=self.settings.slo)
        # The model config, not a path: the actor's node resolves (builds or finds) its own copy.
        group.ref = group.actor.start.remote(engine=engine_for_actor(group.engine), model=dict(self.model_cfg))
        group.kind, group.trial = "start", None
        group.deadline = time.monotonic() + self.settings.start_timeout_s

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
            self.progress.set_postfix_str(engine_label(group.engine), refresh=True)
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

    def _write_engine(self, record) -> None:
        with signals_deferred():
            self.sink.write_engine(record)
        self.on_engine(record)

    def _record_trial(self, record, requests) -> None:
        with signals_deferred():
            self.sink.write_trial(record, requests)
        self.on_trial(record, requests)
        if self.progress is not None:
            self.progress.update(1)

    def _fail_trial(self, group: _Group, trial: Trial, *, kind: str, reason: str) -> None:
        row = failed_trial_row(keys=self.keys, trial=trial, settings=group.engine.settings, kind=kind,
                               reason=reason, attempts=group.attempts.get(trial.trial_id, 1))
        self._record_trial(row, [])

    def _fail_engine(self, group: _Group, *, kind: str, reason: str, **columns) -> None:
        """A failed start is a result: one failed engine row, and each of its trials failed with the reason."""
        self._write_engine(self._engine_record(group, status="failed", failure_kind=kind, failure_reason=reason,
                                               started_at=time.time(), **columns))
        while group.trials:
            self._fail_trial(group, group.trials.popleft(), kind=f"engine_start:{kind}", reason=reason)

    def _on_start(self, group: _Group, result) -> bool:
        log_file = self._save_log(group)
        if result.ok:
            record = self._engine_record(group, status="ok", log_file=log_file, started_at=time.time(),
                                         device_kind=self.settings.device, **{
                                             k: v for k, v in result.columns.items() if k != "device_kind"})
            self._write_engine(record)
            return self._next_trial(group)
        self._fail_engine(group, kind=result.failure_kind, reason=result.failure_reason, log_file=log_file,
                          failure_numbers_json=json.dumps(result.failure_numbers))
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
            self._fail_engine(group, kind="actor_died_during_start", reason=error[:600])
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
        self._fail_engine(group, kind="start_timeout",
                          reason=f"engine did not start within {self.settings.start_timeout_s} s")
        return False

    # ---- loop --------------------------------------------------------------------------------
    def run(self, *, skip_trial_ids: set[str]) -> None:
        import ray

        queue = collections.deque(pending_groups(self.plan, skip_trial_ids=skip_trial_ids))
        capacity = self.settings.device_units or self.settings.max_parallel_engines
        try:
            while queue or self.active:
                while queue and self._fits(queue[0], capacity=capacity):
                    group = queue.popleft()
                    self._new_actor(group)
                    self.active.append(group)
                if not self.active:  # a group larger than the whole cluster: let Ray (and start_timeout_s) say so
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

    def _fits(self, group: _Group, *, capacity: int) -> bool:
        if len(self.active) >= self.settings.max_parallel_engines:
            return False
        used = sum(units_needed(g.engine, device=self.settings.device) for g in self.active)
        return used + units_needed(group.engine, device=self.settings.device) <= capacity


# ---- pure helpers (planning, env) --------------------------------------------------------------
# Engine arguments that fix the KV size per engine; they win over the process-wide VLLM_CPU_KVCACHE_SPACE.
PER_ENGINE_KV_ARGS = ("kv_cache_memory_bytes",)


def units_needed(engine: EngineConfig, *, device: str) -> int:
    """Device units one engine occupies: its TP GPUs on cuda, one slot on CPU."""
    return max(1, int(engine.settings.tensor_parallel_size)) if device == "cuda" else 1


def engine_for_actor(engine: EngineConfig) -> EngineConfig:
    """TP > 1 inside one actor needs vLLM's multiprocessing executor (Ray's would nest a second cluster)."""
    if engine.settings.tensor_parallel_size > 1 and "distributed_executor_backend" not in engine.engine_args:
        return dataclasses.replace(engine, engine_args={**engine.engine_args, "distributed_executor_backend": "mp"})
    return engine


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


def cluster_capacity(*, cluster: dict, device: str, resources: Optional[dict] = None) -> Capacity:
    """What the cluster offers; `resources` is Ray's cluster_resources() (None: from the running Ray)."""
    if device == "cuda":
        if resources is None:
            import ray

            resources = ray.cluster_resources()
        units = int(resources.get("GPU", 0))
    else:
        units = int(cluster.get("cpu_engine_slots") or 1)
    cap = int(cluster.get("max_parallel_engines") or max(units, 1))
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
