"""The engine actors: start one, retire it off the critical path, reap, kill, abandon all, keep their logs; with
execution.keep_engines, pooled ones: found in the pool and claimed, parked instead of killed, woken again."""
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


@dataclass(kw_only=True)
class Parked:
    """A pooled engine this command may wake: `first` while it has not yet served this command (it was found in
    the pool: its engine row says reused_from_pool)."""

    actor: object
    first: bool
    bundle: Optional[str] = None  # its placement-group bundle (CUDA lanes: bundle_key), where it has one


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
        self.parked: dict[str, Parked] = {}  # engine_id -> a pooled engine, loaded, out of any lane
        self.named: dict[int, str] = {}  # id(actor) -> the engine its pool name is for
        # Host RAM the claimed pooled engines' sleeps already hold: the node's free RAM, measured with it taken,
        # must not count against this command's own residents twice.
        self.claimed_host_gib = 0.0
        self.bundles: dict[int, Optional[str]] = {}  # id(actor) -> its bundle (bundle_key)
        self._holder = None  # runner.pool.pools.Holder: made once, where this command holds pooled engines
        self._engine_pool = None  # runner.pool.pools.EnginePool: this command's pool (settings.pool)
        self._vllm_version: Optional[str] = None

    # ---- the pool (execution.keep_engines) ----
    @property
    def engine_pool(self):
        """This command's pool (runner.pool.pools.EnginePool): claim and park go through it."""
        if self._engine_pool is None:
            from runner.pool.pools import EnginePool

            self._engine_pool = EnginePool(self.settings.pool)
        return self._engine_pool

    @property
    def holder(self):
        """This command as the holder of pooled engines (its Ray job, and the actor whose liveness is its own)."""
        if self._holder is None:
            self._holder = self.engine_pool.cluster.holder()
        return self._holder

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
        found = self.engine_pool.claim({e.engine_id: self.identity(e) for e in engines}, holder=self.holder)
        for engine_id, claimed in found.items():
            self.parked[engine_id] = Parked(actor=claimed.actor, first=True, bundle=claimed.bundle)
            self.named[id(claimed.actor)] = engine_id
            self.claimed_host_gib += claimed.host_gib
        return sorted(found)

    def has_parked(self, engine_id: str) -> bool:
        if not self.keep:
            return False
        return engine_id in self.parked or any(d.parks and d.engine.engine_id == engine_id for d in self.dying)

    def take_parked(self, engine: EngineConfig, *, bundle: Optional[tuple] = None) -> Optional[Parked]:
        """The pooled engine for `engine`, out of the pool (or on its way there) and into a lane; None: none
        (or one in another lane's placement-group bundle: it stays where it is)."""
        if not self.keep:
            return None
        for dying in list(self.dying):
            if dying.parks and dying.engine.engine_id == engine.engine_id:
                self.dying.remove(dying)  # its park still runs: the actor wakes it after
                self.parked[engine.engine_id] = Parked(actor=dying.actor, first=False,
                                                       bundle=self.bundles.get(id(dying.actor)))
        parked = self.parked.get(engine.engine_id)
        if parked is None:
            return None
        if parked.bundle != bundle_key(bundle):  # on another lane's GPU (or none): it stays in the pool
            return None
        return self.parked.pop(engine.engine_id)

    def adopt_call(self, parked: Parked):
        """The call that wakes a pooled engine for this command (runner.pool.actor.PooledEngineActor.adopt)."""
        s = self.settings
        return parked.actor.adopt.remote(holder=self.holder.job, holder_handle=self.holder.handle, keys=self.keys,
                                         slo=s.slo, warmup=s.warmup, warmup_output_cap=s.warmup_output_cap,
                                         first=parked.first, ttl_s=s.pool_ttl_s,
                                         first_trial_twice=s.first_trial_twice)

    def suits(self, actor, engine: EngineConfig) -> bool:
        """Whether a spare actor may host `engine`: a pooled one is named after the engine it was made for."""
        return self.named.get(id(actor), engine.engine_id) == engine.engine_id

    def pooled(self, actor) -> bool:
        return self.keep and id(actor) in self.named

    def _pool_entry(self, engine: EngineConfig, bundle: Optional[tuple]):
        from runner.pool.identity import summary_of
        from runner.pool.member import PoolEntry

        identity = self.identity(engine)
        return PoolEntry(pool=self.settings.pool, name=identity.actor_name, identity=identity.as_dict(),
                         summary=summary_of(engine), ttl_s=self.settings.pool_ttl_s, holder=self.holder.job,
                         holder_handle=self.holder.handle, bundle=bundle_key(bundle))

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
            self.named[id(actor)] = engine.engine_id
            self.bundles[id(actor)] = entry.bundle
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
        self.named.pop(id(actor), None)
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
                    self.parked[dying.engine.engine_id] = Parked(actor=dying.actor, first=False,
                                                                 bundle=self.bundles.get(id(dying.actor)))
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
        unused = [p.actor for p in self.parked.values() if p.first]
        if unused:
            self.engine_pool.park(unused, timeout_s=self.settings.shutdown_timeout_s)

    def abandon(self, actors: list, *, loaded: Optional[list] = None) -> None:
        """Stop in seconds: every engine (and those retiring) shut down at once, bounded, then killed. Pooled
        engines among `loaded` (those with an engine in) go back to the pool instead, asleep where they can."""
        import ray

        with signals_deferred():
            keep = {id(a): a for a in (loaded or []) if self.pooled(a)}
            keep.update({id(d.actor): d.actor for d in self.dying if d.parks})
            keep.update({id(p.actor): p.actor for p in self.parked.values()})
            actors = [a for a in actors + [d.actor for d in self.dying] if id(a) not in keep]
            self.dying.clear()
            self.parked.clear()
            if keep:
                self.engine_pool.park(list(keep.values()), timeout_s=self.settings.shutdown_timeout_s)
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
