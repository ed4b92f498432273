"""The engine actors: make one, retire it off the critical path, reap, kill, abandon all, keep their logs. Whether
an actor is a pooled one, and whether it leaves by ending or by a park, is the engine pool's side (runner.pool.kept:
kept engines, or no pool)."""
from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from runner.measurement.records import RunKeys
from runner.plan.grid import EngineConfig
from runner.pool.kept import ActorSite, command_side
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
    shutdown_ref: object  # its shutdown, or its park (a pooled engine going back to the pool)
    deadline: float
    ends: bool = True  # killed once its shutdown answers (else: parked, it stays)


def bundle_key(bundle: Optional[tuple]) -> Optional[str]:
    """A lane's placement-group bundle as text (group id:index), the same for every command; None: no bundle."""
    if bundle is None:
        return None
    group, index = bundle
    group_id = getattr(group, "id", None)
    return f"{group_id.hex() if hasattr(group_id, 'hex') else group}:{index}"


class EngineActors:
    """The command's engine actors. Its side of the engine pool is `kept` (runner.pool.kept: kept engines, or no
    pool), which makes each actor and says how it leaves."""

    def __init__(self, *, settings: ExecutionSettings, keys: RunKeys, log_dir: Path, model_cfg=None):
        self.settings, self.keys, self.log_dir = settings, keys, Path(log_dir)
        self.policy = settings.policy
        self.dying: list[_Dying] = []
        self.logged: dict[str, dict] = {}  # engine_id -> {actor: its log}
        site = ActorSite(model=model_cfg, device=self.policy.name, sleeps=self.policy.residents_sleep,
                         env_of=lambda engine: actor_env(base=settings.env, engine=engine))
        self.kept = command_side(keep=settings.keep_engines, pool=settings.pool, ttl_s=settings.pool_ttl_s, site=site)

    def new(self, engine: EngineConfig, *, lane: int, lanes: int, bundle: Optional[tuple]):
        """A fresh actor for `engine` on lane `lane` of `lanes` (its process only: no engine yet)."""
        s, policy = self.settings, self.policy
        # A pooled engine stays between turns like a resident one (a pooled CUDA engine sleeps in the pool).
        stays = policy.may_stay_resident(engine, s.resident) or self.kept.keeps_engines
        options = policy.actor_resources(width=policy.units_needed(engine), share=lane_share(stays),
                                         engines_per_gpu=s.engines_per_gpu)
        if bundle is not None:
            from runner.scheduling.cluster import scheduling_strategy

            options["scheduling_strategy"] = scheduling_strategy(bundle)
        env = actor_env(base=s.env, engine=engine, sleeps=policy.residents_sleep and stays, pin_ahead=s.sleep_pin_ahead)
        if policy.binds_cores and lanes > 1 and "VLLM_CPU_OMP_THREADS_BIND" not in env:
            # Every CPU engine would otherwise pin its threads to the same cores.
            env["VLLM_CPU_OMP_THREADS_BIND"] = cpu_binding(slot=lane, cores_per_engine=s.cpus_per_engine,
                                                           total_cores=os.cpu_count() or 1)
        kwargs = dict(env=env, keys=self.keys, slo=s.slo, warmup=s.warmup, warmup_output_cap=s.warmup_output_cap,
                      first_trial_twice=s.first_trial_twice, engine_start=s.engine_start.resolved())
        return self.kept.make(engine, options=options, kwargs=kwargs, bundle=bundle_key(bundle))

    def taken_back(self, actor) -> None:
        """A pooled engine woken while its park may still run: no longer waited for (the actor wakes it after)."""
        self.dying = [d for d in self.dying if d.actor is not actor]

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
        self.kept.forget(actor)
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
        killed once they answer or shutdown_timeout_s passes (`reap`), while the next engine gets going. A pooled
        engine is parked instead (asleep where it has sleep mode) and stays, for this command or a later one."""
        log_ref = actor.read_log.remote()
        ref, ends = self.kept.leave(engine.engine_id, actor)
        self.dying.append(_Dying(engine=engine, actor=actor, log_ref=log_ref, shutdown_ref=ref, ends=ends,
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
                if dying.ends:  # (a park past its deadline goes on in the actor; a wake waits for it there)
                    self.kill(dying.actor, graceful=False)
            if not wait or not self.dying:
                return
            time.sleep(0.1)

    def free_device(self) -> None:
        """A retired engine still holds its device memory until its shutdown ends: a wake or a load beside it
        would fail for want of memory, so its teardown finishes first (at most shutdown_timeout_s, then kill)."""
        if self.policy.frees_before_load and self.dying:
            self.reap(wait=True)

    def finish(self) -> None:
        """The run is over: pooled engines it claimed and never woke go back to the pool (no holder)."""
        self.kept.finish(timeout_s=self.settings.shutdown_timeout_s)

    def abandon(self, actors: list, *, loaded: Optional[list] = None) -> None:
        """Stop in seconds: every engine (and those retiring) shut down at once, bounded, then killed. Pooled
        engines among `loaded` (those with an engine in) go back to the pool instead, asleep where they can."""
        import ray

        with signals_deferred():
            parked = self.kept.stop(loaded or [], timeout_s=self.settings.shutdown_timeout_s)
            actors = [a for a in actors + [d.actor for d in self.dying] if id(a) not in parked]
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
