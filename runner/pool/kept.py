"""A command's side of its engine pool (execution.keep_engines), on the driver: the pooled engines it claimed or
made, those parked again between their turns, the lane bundle each lives in, and the host RAM their sleeps hold.
The command's actor pool (runner.scheduling.actors) keeps one; every Ray call to the pool goes through EnginePool."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from runner.pool.identity import PoolIdentity
from runner.pool.member import PoolEntry
from runner.pool.pools import EnginePool, Holder


@dataclass(kw_only=True)
class Parked:
    """A pooled engine this command may wake: `first` while it has not yet served this command (it was found in
    the pool: its engine row says reused_from_pool)."""

    actor: object
    first: bool
    bundle: Optional[str] = None  # its placement-group bundle (CUDA lanes: bundle_key), where it has one


class KeptEngines:
    def __init__(self, *, pool: str, ttl_s: float, engine_pool: Optional[EnginePool] = None):
        self.pool, self.ttl_s = pool, ttl_s
        self.engine_pool = engine_pool or EnginePool(pool)
        self.parked: dict[str, Parked] = {}  # engine_id -> a pooled engine, loaded, out of any lane
        self.named: dict[int, str] = {}  # id(actor) -> the engine its pool name is for
        self.bundles: dict[int, Optional[str]] = {}  # id(actor) -> its bundle (bundle_key)
        # Host RAM the claimed pooled engines' sleeps already hold: the node's free RAM, measured with it taken,
        # must not count against this command's own residents twice.
        self.claimed_host_gib = 0.0
        self._holder: Optional[Holder] = None

    @property
    def holder(self) -> Holder:
        """This command as the holder of pooled engines (its Ray job, and the actor whose liveness is its own)."""
        if self._holder is None:
            self._holder = self.engine_pool.cluster.holder()
        return self._holder

    def found_in_pool(self, wanted: dict[str, PoolIdentity]) -> list[str]:
        """The pool's engines among `wanted` (engine_id → identity), claimed for this command; their ids."""
        found = self.engine_pool.claim(wanted, holder=self.holder)
        for engine_id, claimed in found.items():
            self.parked[engine_id] = Parked(actor=claimed.actor, first=True, bundle=claimed.bundle)
            self.named[id(claimed.actor)] = engine_id
            self.claimed_host_gib += claimed.host_gib
        return sorted(found)

    def entry(self, identity: PoolIdentity, *, summary: str, bundle: Optional[str]) -> PoolEntry:
        """What a pooled actor this command makes is told at its creation (held by this command from the start)."""
        return PoolEntry(pool=self.pool, name=identity.actor_name, identity=identity.as_dict(), summary=summary,
                         ttl_s=self.ttl_s, holder=self.holder.job, holder_handle=self.holder.handle, bundle=bundle)

    def made(self, actor, *, engine_id: str, bundle: Optional[str]) -> None:
        self.named[id(actor)] = engine_id
        self.bundles[id(actor)] = bundle

    def parked_again(self, engine_id: str, actor) -> None:
        """An engine this command used is back in the pool (its park sent), for its next turn."""
        self.parked[engine_id] = Parked(actor=actor, first=False, bundle=self.bundles.get(id(actor)))

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

    def suits(self, actor, engine_id: str) -> bool:
        """Whether a spare actor may host `engine_id`: a pooled one is named after the engine it was made for."""
        return self.named.get(id(actor), engine_id) == engine_id

    def pooled(self, actor) -> bool:
        return id(actor) in self.named

    def forget(self, actor) -> None:
        """The actor is killed: no longer this command's pooled engine."""
        self.named.pop(id(actor), None)

    def unused(self) -> list:
        """Claimed engines this command never woke."""
        return [p.actor for p in self.parked.values() if p.first]

    def park(self, actors: list, *, timeout_s: float) -> None:
        if actors:
            self.engine_pool.park(actors, timeout_s=timeout_s)
