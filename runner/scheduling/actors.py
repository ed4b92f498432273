"""The engine actors: start one, retire it off the critical path, reap, kill, abandon all, keep their logs; with
execution.keep_engines, pooled ones (their bookkeeping: runner.pool.kept): claimed from the pool, parked instead of
killed, woken again."""
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
    shutdown_ref: object  # its shutdown, or its park (a pooled engine going back to the pool)
    deadline: float
    parks: bool = False


def bundle_key(bundle: Optional[tuple]) -> Optional[str]:
    """A lane's placement-group bundle as text (group id:index), the same for every command; None: no bundle."""
    if bundle is None:
        return None
    group, index = bundle
    group_id = getattr(group, "id", None)
    return f"{group_id.hex() if hasattr(group_id, 'hex') else group}:{index}"


class ActorPool:
    def __init__(self, *, settings: ExecutionSettings, keys: RunKeys, log_dir: Path, model_cfg=None):
        self.settings, self.keys, self.log_dir = settings, keys, Path(log_dir)
        self.policy = settings.policy
        self.dying: list[_Dying] = []
        self.logged: dict[str, dict] = {}  # engine_id -> {actor: its log}
        self.keep = settings.keep_engines
        self.model_cfg = model_cfg
        self.kept = None  # runner.pool.kept.KeptEngines: this command's side of its pool (keep_engines only)
        if self.keep:
            from runner.pool.kept import KeptEngines

            self.kept = KeptEngines(pool=settings.pool, ttl_s=settings.pool_ttl_s)
        self._vllm_version: Optional[str] = None

    # ---- the pool (execution.keep_engines) ----
    @property
    def claimed_host_gib(self) -> float:
        return self.kept.claimed_host_gib if self.keep else 0.0

    def identity(self, engine: EngineConfig):
        """The engine's pooled identity, as its actor runs it."""
        from runner.plan.engine_args import installed_vllm_version
        from runner.scheduling.actor_spec import engine_for_actor
        from runner.pool.identity import identity_of

        if self._vllm_version is None:
            self._vllm_version = installed_vllm_version()
        return identity_of(engine_for_actor(engine, sleep_mode=self.policy.residents_sleep), model=self.model_cfg,
                           device=self.policy.name, vllm_version=self._vllm_version,
                           env=actor_env(base=self.settings.env, engine=engine))

    def take_from_pool(self, engines: list[EngineConfig]) -> list[str]:
        """The pool's engines among `engines`, claimed for this command (woken instead of loaded); their ids."""
        if not self.keep or not engines:
            return []
        return self.kept.found_in_pool({e.engine_id: self.identity(e) for e in engines})

    def has_parked(self, engine_id: str) -> bool:
        if not self.keep:
            return False
        return engine_id in self.kept.parked or any(d.parks and d.engine.engine_id == engine_id for d in self.dying)

    def take_parked(self, engine: EngineConfig, *, bundle: Optional[tuple] = None):
        """The pooled engine for `engine`, out of the pool (or on its way there) and into a lane; None: none
        (or one in another lane's placement-group bundle: it stays where it is)."""
        if not self.keep:
            return None
        for dying in list(self.dying):
            if dying.parks and dying.engine.engine_id == engine.engine_id:
                self.dying.remove(dying)  # its park still runs: the actor wakes it after
                self.kept.parked_again(engine.engine_id, dying.actor)
        return self.kept.take(engine.engine_id, bundle=bundle_key(bundle))

    def adopt_call(self, parked):
        """The call that wakes a pooled engine for this command (runner.pool.kept.KeptEngines.adopt_call)."""
        return self.kept.adopt_call(parked, keys=self.keys, settings=self.settings)

    def suits(self, actor, engine: EngineConfig) -> bool:
        """Whether a spare actor may host `engine`: a pooled one is named after the engine it was made for."""
        return not self.keep or self.kept.suits(actor, engine.engine_id)

    def pooled(self, actor) -> bool:
        return self.keep and self.kept.pooled(actor)

    def _pool_entry(self, engine: EngineConfig, bundle: Optional[tuple]):
        from runner.pool.identity import summary_of

        return self.kept.entry(self.identity(engine), summary=summary_of(engine), bundle=bundle_key(bundle))

    def new(self, engine: EngineConfig, *, lane: int, lanes: int, bundle: Optional[tuple]):
        """A fresh actor for `engine` on lane `lane` of `lanes` (its process only: no engine yet)."""
        import ray

        from runner.execution.actor import EngineActor

        s, policy = self.settings, self.policy
        # A pooled engine stays between turns like a resident one (a pooled CUDA engine sleeps in the pool).
        stays = policy.may_stay_resident(engine, s.resident) or self.keep
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
        actor_class = ray.remote(max_restarts=0, **options)(EngineActor)
        kwargs = dict(env=env, keys=self.keys, slo=s.slo, warmup=s.warmup, warmup_output_cap=s.warmup_output_cap,
                      first_trial_twice=s.first_trial_twice, engine_start=s.engine_start.resolved())
        if self.keep:
            from runner.pool.actor import PooledEngineActor

            entry = self._pool_entry(engine, bundle)
            pooled_class = ray.remote(max_restarts=0, **options)(PooledEngineActor)
            try:
                actor = pooled_class.options(name=entry.name, lifetime="detached").remote(**kwargs, pool_entry=entry)
            except ValueError:  # the pool's engine of that name is held by another running command
                return actor_class.remote(**kwargs)
            self.kept.made(actor, engine_id=engine.engine_id, bundle=entry.bundle)
            return actor
        return actor_class.remote(**kwargs)

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
        if self.keep:
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
        parks = self.pooled(actor)
        self.dying.append(_Dying(engine=engine, actor=actor, log_ref=log_ref, parks=parks,
                                 shutdown_ref=actor.park.remote() if parks else actor.shutdown.remote(),
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
                if dying.parks:  # a park past its deadline goes on in the actor; a wake waits for it there
                    self.kept.parked_again(dying.engine.engine_id, dying.actor)
                else:
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
        if self.keep:
            self.kept.park(self.kept.unused(), timeout_s=self.settings.shutdown_timeout_s)

    def abandon(self, actors: list, *, loaded: Optional[list] = None) -> None:
        """Stop in seconds: every engine (and those retiring) shut down at once, bounded, then killed. Pooled
        engines among `loaded` (those with an engine in) go back to the pool instead, asleep where they can."""
        import ray

        with signals_deferred():
            keep = {id(a): a for a in (loaded or []) if self.pooled(a)}
            keep.update({id(d.actor): d.actor for d in self.dying if d.parks})
            if self.keep:
                keep.update({id(p.actor): p.actor for p in self.kept.parked.values()})
                self.kept.parked.clear()
            actors = [a for a in actors + [d.actor for d in self.dying] if id(a) not in keep]
            self.dying.clear()
            if keep:
                self.kept.park(list(keep.values()), timeout_s=self.settings.shutdown_timeout_s)
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
