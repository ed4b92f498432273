"""A command's side of its engine pool, on the driver: one interface, two kinds. KeptEngines (execution.keep_engines:
the pooled engines it claimed or made, those parked again between their turns, the lane bundle each lives in, the
host RAM their sleeps hold) and NoPool (every engine is the command's own). The driver (runner.scheduling) asks it
and never branches on the pool; every Ray call to the pool goes through EnginePool."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional

from runner.plan.grid import EngineConfig
from runner.pool.identity import PoolIdentity, identity_of, summary_of
from runner.pool.member import PoolEntry
from runner.pool.pools import EnginePool, Holder, group_name


@dataclass(kw_only=True)
class Parked:
    """A pooled engine this command may wake: `first` while it has not yet served this command (it was found in
    the pool: its engine row says reused_from_pool)."""

    actor: object
    first: bool
    bundle: Optional[str] = None  # its placement-group bundle (CUDA lanes: bundle_key), where it has one


@dataclass(frozen=True, kw_only=True)
class ActorSite:
    """What a pooled engine's identity takes from where its actor runs: the model (a ModelSection), the device, and
    the actor's environment for an engine (runner.scheduling.actor_spec.actor_env)."""

    model: object = None
    device: str = "cpu"
    env_of: Callable[[EngineConfig], dict] = field(default=lambda engine: {})
    sleeps: bool = False  # the device has sleep mode: a pooled engine sleeps in the pool


def _make_actor(actor_class, options: dict, kwargs: dict, **named):
    """A Ray actor of `actor_class` (`named`: its name and lifetime; ValueError: the name is taken)."""
    import ray

    made = ray.remote(max_restarts=0, **options)(actor_class)
    return (made.options(**named) if named else made).remote(**kwargs)


class NoPool:
    """No engine pool: nothing is claimed, parked or woken; an engine leaving its lane ends."""

    keeps_engines = False  # its engines stay between turns only where residency keeps them
    claimed_host_gib = 0.0

    def start_of(self, engine: EngineConfig, *, sleep_mode: bool) -> EngineConfig:
        """`engine` as this start runs it (`sleep_mode`: it may sleep between its turns)."""
        return engine.for_start(sleep_mode=sleep_mode)

    def claim(self, engines: list[EngineConfig], *, say: Callable[[str], None]) -> list[str]:
        return []

    def group_name(self, *, lanes: int, width: int) -> Optional[str]:
        """The lanes' placement group's name where it outlives the command (None: it does not)."""
        return None

    def has(self, engine_id: str) -> bool:
        return False

    def take(self, engine_id: str, *, bundle: Optional[str]) -> Optional[Parked]:
        return None

    def suits(self, actor, engine_id: str) -> bool:
        return True

    def make(self, engine: EngineConfig, *, options: dict, kwargs: dict, bundle: Optional[str]):
        from runner.execution.actor import EngineActor

        return _make_actor(EngineActor, options, kwargs)

    def leave(self, engine_id: str, actor) -> tuple[object, bool]:
        """The call that takes `actor` out of this command's use, and whether the actor ends (else: it is parked)."""
        return actor.shutdown.remote(), True

    def forget(self, actor) -> None:
        pass

    def finish(self, *, timeout_s: float) -> None:
        pass

    def stop(self, loaded: list, *, timeout_s: float) -> set[int]:
        """A stop signal: the actors that go back to the pool instead of ending (their ids)."""
        return set()


class KeptEngines(NoPool):
    keeps_engines = True  # a pooled engine stays between turns like a resident one (asleep where it can)

    def __init__(self, *, pool: str, ttl_s: float, site: ActorSite = ActorSite(),
                 engine_pool: Optional[EnginePool] = None):
        self.pool, self.ttl_s, self.site = pool, ttl_s, site
        self.engine_pool = engine_pool or EnginePool(pool)
        self.parked: dict[str, Parked] = {}  # engine_id -> a pooled engine, loaded, out of any lane
        self.named: dict[int, str] = {}  # id(actor) -> the engine its pool name is for
        self.bundles: dict[int, Optional[str]] = {}  # id(actor) -> its bundle (bundle_key)
        self.started: dict[str, EngineConfig] = {}  # engine_id -> the engine as its starts run it (once)
        # Host RAM the claimed pooled engines' sleeps already hold: the node's free RAM, measured with it taken,
        # must not count against this command's own residents twice.
        self.claimed_host_gib = 0.0
        self._holder: Optional[Holder] = None
        self._vllm_version: Optional[str] = None

    @property
    def holder(self) -> Holder:
        """This command as the holder of pooled engines (its Ray job, and the actor whose liveness is its own)."""
        if self._holder is None:
            self._holder = self.engine_pool.cluster.holder()
        return self._holder

    # ---- the engine's identity ----
    def start_of(self, engine: EngineConfig, *, sleep_mode: bool) -> EngineConfig:
        """`engine` as each of its starts runs it, completed once: a pooled engine sleeps in the pool where its
        device has sleep mode (which a lane's own wish to let it sleep between turns implies)."""
        if engine.engine_id not in self.started:
            self.started[engine.engine_id] = engine.for_start(sleep_mode=self.site.sleeps)
        return self.started[engine.engine_id]

    def identity(self, engine: EngineConfig) -> PoolIdentity:
        """The engine's pooled identity, taken from its start's arguments."""
        started = self.start_of(engine, sleep_mode=self.site.sleeps)
        if self._vllm_version is None:
            from runner.plan.engine_args import installed_vllm_version

            self._vllm_version = installed_vllm_version()
        return identity_of(started, model=self.site.model, device=self.site.device, vllm_version=self._vllm_version,
                           env=self.site.env_of(engine))

    # ---- claims ----
    def claim(self, engines: list[EngineConfig], *, say: Callable[[str], None]) -> list[str]:
        """The pool's engines among `engines`, claimed for this command (woken instead of loaded); their ids."""
        found = self.found_in_pool({e.engine_id: self.identity(e) for e in engines}) if engines else []
        say(pool_line(self.pool, found=found, needed=len(engines)))
        return found

    def found_in_pool(self, wanted: dict[str, PoolIdentity]) -> list[str]:
        """The pool's engines among `wanted` (engine_id → identity), claimed for this command; their ids."""
        found = self.engine_pool.claim(wanted, holder=self.holder)
        for engine_id, claimed in found.items():
            self.parked[engine_id] = Parked(actor=claimed.actor, first=True, bundle=claimed.bundle)
            self.made(claimed.actor, engine_id=engine_id, bundle=claimed.bundle)  # parked again in its own bundle
            self.claimed_host_gib += claimed.host_gib
        return sorted(found)

    def group_name(self, *, lanes: int, width: int) -> Optional[str]:
        """Pooled engines live in the lanes' bundles: their placement group outlives the command."""
        return group_name(self.pool, lanes=lanes, width=width)

    # ---- pooled actors ----
    def entry(self, identity: PoolIdentity, *, summary: str, bundle: Optional[str]) -> PoolEntry:
        """What a pooled actor this command makes is told at its creation (held by this command from the start)."""
        return PoolEntry(pool=self.pool, name=identity.actor_name, identity=identity.as_dict(), summary=summary,
                         ttl_s=self.ttl_s, holder=self.holder.job, holder_handle=self.holder.handle, bundle=bundle)

    def make(self, engine: EngineConfig, *, options: dict, kwargs: dict, bundle: Optional[str]):
        """A pooled actor for `engine`, named after its identity (detached: it outlives the command); a plain one
        where the pool's engine of that name is held by another running command."""
        from runner.pool.actor import PooledEngineActor

        entry = self.entry(self.identity(engine), summary=summary_of(engine), bundle=bundle)
        try:
            actor = _make_actor(PooledEngineActor, options, {**kwargs, "pool_entry": entry}, name=entry.name,
                                lifetime="detached")
        except ValueError:  # the pool's engine of that name is held by another running command
            return super().make(engine, options=options, kwargs=kwargs, bundle=bundle)
        self.made(actor, engine_id=engine.engine_id, bundle=entry.bundle)
        return actor

    def made(self, actor, *, engine_id: str, bundle: Optional[str]) -> None:
        self.named[id(actor)] = engine_id
        self.bundles[id(actor)] = bundle

    def pooled(self, actor) -> bool:
        return id(actor) in self.named

    def suits(self, actor, engine_id: str) -> bool:
        """Whether a spare actor may host `engine_id`: a pooled one is named after the engine it was made for."""
        return self.named.get(id(actor), engine_id) == engine_id

    def forget(self, actor) -> None:
        """The actor is killed: no longer this command's pooled engine."""
        self.named.pop(id(actor), None)

    # ---- parks and wakes ----
    def leave(self, engine_id: str, actor) -> tuple[object, bool]:
        """A pooled engine goes back to the pool (asleep where it has sleep mode), parked for its next turn here
        at once: a wake sent while its park runs is ordered after it by the actor. Any other actor ends."""
        if not self.pooled(actor):
            return super().leave(engine_id, actor)
        ref = actor.park.remote()
        self.parked_again(engine_id, actor)
        return ref, False

    def parked_again(self, engine_id: str, actor) -> None:
        """An engine this command used is back in the pool (its park sent), for its next turn."""
        self.parked[engine_id] = Parked(actor=actor, first=False, bundle=self.bundles.get(id(actor)))

    def has(self, engine_id: str) -> bool:
        return engine_id in self.parked

    def take(self, engine_id: str, *, bundle: Optional[str]) -> Optional[Parked]:
        """The parked engine out of the pool and into the lane of `bundle`; None: none (or one in another lane's
        placement-group bundle: it stays where it is)."""
        parked = self.parked.get(engine_id)
        if parked is None or parked.bundle != bundle:
            return None
        return self.parked.pop(engine_id)

    def adopt_call(self, parked: Parked, *, keys, settings):
        """The call that wakes a pooled engine for this command (runner.pool.actor.PooledEngineActor.adopt)."""
        s = settings
        return parked.actor.adopt.remote(holder=self.holder.job, holder_handle=self.holder.handle, keys=keys,
                                         slo=s.slo, warmup=s.warmup, warmup_output_cap=s.warmup_output_cap,
                                         first=parked.first, ttl_s=self.ttl_s, first_trial_twice=s.first_trial_twice)

    def unused(self) -> list:
        """Claimed engines this command never woke."""
        return [p.actor for p in self.parked.values() if p.first]

    def park(self, actors: list, *, timeout_s: float) -> None:
        if actors:
            self.engine_pool.park(actors, timeout_s=timeout_s)

    def finish(self, *, timeout_s: float) -> None:
        """The run is over: pooled engines it claimed and never woke go back to the pool (no holder)."""
        self.park(self.unused(), timeout_s=timeout_s)

    def stop(self, loaded: list, *, timeout_s: float) -> set[int]:
        """A stop signal: the pooled engines among `loaded` (those with an engine in) and every parked one go back
        to the pool, asleep where they can (bounded); their ids."""
        keep = {id(a): a for a in loaded if self.pooled(a)}
        keep.update({id(p.actor): p.actor for p in self.parked.values()})
        self.parked.clear()
        self.park(list(keep.values()), timeout_s=timeout_s)
        return set(keep)


def pool_line(pool: str, *, found: list[str], needed: int) -> str:
    """What the engine pool gave this command: engines woken instead of loaded, or none yet."""
    if not found:
        return f"engine pool {pool!r}: none of this run's {needed} engine(s) there yet; they load, and stay after it"
    return (f"engine pool {pool!r}: {len(found)} of {needed} engine(s) found, woken instead of loaded "
            f"({', '.join(found)})")


def command_side(*, keep: bool, pool: str, ttl_s: float, site: ActorSite) -> NoPool:
    """This command's side of its engine pool: its kept engines (execution.keep_engines), else no pool."""
    return KeptEngines(pool=pool, ttl_s=ttl_s, site=site) if keep else NoPool()
