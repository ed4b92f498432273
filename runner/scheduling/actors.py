"""The engine actors: start one, retire it off the critical path, reap, kill, abandon all, keep their logs."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from runner.measurement.records import RunKeys
from runner.plan.grid import EngineConfig
from runner.scheduling.actor_spec import actor_env, cpu_binding
from runner.scheduling.device import lane_share
from runner.scheduling.recorder import signals_deferred
from runner.scheduling.settings import ExecutionSettings

ABANDON_SHUTDOWN_S = 4.0  # on a stop signal: the engines' own shutdown gets this long, then kill


@dataclass(kw_only=True)
class _Dying:
    engine: EngineConfig
    actor: object
    log_ref: object
    shutdown_ref: object
    deadline: float


class ActorPool:
    def __init__(self, *, settings: ExecutionSettings, keys: RunKeys, log_dir: Path):
        self.settings, self.keys, self.log_dir = settings, keys, Path(log_dir)
        self.policy = settings.policy
        self.dying: list[_Dying] = []
        self.logged: dict[str, dict] = {}  # engine_id -> {actor: its log}

    def new(self, engine: EngineConfig, *, lane: int, lanes: int, bundle: Optional[tuple]):
        """A fresh actor for `engine` on lane `lane` of `lanes` (its process only: no engine yet)."""
        import ray

        from runner.execution.actor import EngineActor
        from runner.execution.engine_process import resolve

        s, policy = self.settings, self.policy
        options = policy.actor_resources(width=policy.units_needed(engine),
                                         share=lane_share(policy.may_stay_resident(engine, s.resident)))
        if bundle is not None:
            from runner.scheduling.cluster import scheduling_strategy

            options["scheduling_strategy"] = scheduling_strategy(bundle)
        env = actor_env(base=s.env, engine=engine,
                        sleeps=policy.residents_sleep and policy.may_stay_resident(engine, s.resident))
        if policy.binds_cores and lanes > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in env:
            # Every CPU engine would otherwise pin its threads to the same cores.
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binding(slot=lane, cores_per_engine=s.cpus_per_engine,
                                                           total_cores=os.cpu_count() or 1)
        return ray.remote(max_restarts=0, **options)(EngineActor).remote(
            env=env, keys=self.keys, slo=s.slo, warmup=s.warmup, warmup_output_cap=s.warmup_output_cap,
            engine_start=resolve(s.engine_start))

    # ---- logs ----
    def save_log(self, engine: EngineConfig, actor) -> Optional[str]:
        import ray

        try:
            text = ray.get(actor.read_log.remote(), timeout=10)
        except Exception:
            return None
        return self.write_log(engine, actor, text)

    def write_log(self, engine: EngineConfig, actor, text: str) -> str:
        """One log per engine: each of its actors' whole output (a reload's after the first's), rewritten."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        path = self.log_dir / f"{engine.engine_id}.log"
        texts = self.logged.setdefault(engine.engine_id, {})
        texts[id(actor)] = text
        path.write_text("".join(texts.values()))
        return str(path)

    # ---- ends ----
    def kill(self, actor, *, graceful: bool) -> None:
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

    def retire(self, engine: EngineConfig, actor) -> None:
        """Teardown off the critical path: the log and a graceful shutdown are asked for now, the actor is
        killed once they answer or shutdown_timeout_s passes (`reap`), while the next engine gets going."""
        log_ref = actor.read_log.remote()
        self.dying.append(_Dying(engine=engine, actor=actor, log_ref=log_ref, shutdown_ref=actor.shutdown.remote(),
                                 deadline=time.monotonic() + self.settings.shutdown_timeout_s))

    def reap(self, *, wait: bool = False) -> None:
        import ray

        while self.dying:
            for dying in list(self.dying):
                done, _ = ray.wait([dying.shutdown_ref], timeout=0)
                if not done and time.monotonic() < dying.deadline:
                    continue
                self.dying.remove(dying)
                try:
                    self.write_log(dying.engine, dying.actor, ray.get(dying.log_ref, timeout=1))
                except Exception:
                    pass
                self.kill(dying.actor, graceful=False)
            if not wait or not self.dying:
                return
            time.sleep(0.1)

    def free_device(self) -> None:
        """A retired engine still holds its device memory until its shutdown ends: a wake or a load beside it
        would fail for want of memory, so its teardown finishes first (at most shutdown_timeout_s, then kill)."""
        if self.policy.frees_before_load and self.dying:
            self.reap(wait=True)

    def abandon(self, actors: list) -> None:
        """Stop in seconds: every engine (and those retiring) shut down at once, bounded, then killed."""
        import ray

        with signals_deferred():
            actors = actors + [d.actor for d in self.dying]
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
