"""Engine pools on a Ray cluster, the driver's side: one interface (EnginePool) for a sweep's session and the `pool`
subcommand alike.

- claim: the engines of a command that its pool holds (the same engine, no other running command holding it),
  taken for the command: woken instead of loaded;
- park: engines back into the pool (asleep where they can sleep), held by no command;
- release: the pools' engines ended (each engine shut down, then its actor killed) and their placement groups;
- list: every pooled engine, with its state.

Every Ray call goes through RayCluster (Ray's public API only), so that the interface's logic is testable
without Ray. The actor's side is runner.pool.actor.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

from runner.pool.identity import ACTOR_PREFIX, NAMESPACE_PREFIX, PoolIdentity, adoptable, pool_namespace, \
    pool_of_namespace

CALL_TIMEOUT_S = 10.0
RELEASE_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True)
class PooledActor:
    pool: str
    namespace: str
    name: str


@dataclass(frozen=True, kw_only=True)
class PooledEngine:
    """One pooled engine, as `pool list` shows it."""

    pool: str
    name: str
    engine: str = ""
    model: str = ""
    device: str = ""
    vllm: str = ""
    state: str = "unreachable"
    idle_s: Optional[float] = None
    ttl_left_s: Optional[float] = None
    warm_shapes: Optional[int] = None
    pid: Optional[int] = None
    engine_pids: tuple = ()

    @classmethod
    def of(cls, actor: PooledActor, status: Optional[dict]) -> "PooledEngine":
        """From the actor's `pool_status` answer (None: it did not answer: unreachable)."""
        if status is None:
            return cls(pool=actor.pool, name=actor.name)
        identity = status.get("identity") or {}
        return cls(pool=actor.pool, name=actor.name, engine=status.get("summary") or "",
                   model=(identity.get("model") or {}).get("name") or "", device=identity.get("device") or "",
                   vllm=identity.get("vllm_version") or "", state=str(status.get("state")),
                   idle_s=status.get("idle_s"), ttl_left_s=status.get("ttl_left_s"),
                   warm_shapes=status.get("warm_shapes"), pid=status.get("pid"),
                   engine_pids=tuple(status.get("engine_pids") or ()))

    def as_dict(self) -> dict:
        return {**dataclasses.asdict(self), "engine_pids": list(self.engine_pids)}


@dataclass(frozen=True, kw_only=True)
class Claimed:
    """A pooled engine claimed for this command."""

    actor: object
    bundle: Optional[str]  # its placement-group bundle (group id:index), where it has one
    host_gib: float  # host RAM its sleeps hold


@dataclass(frozen=True, kw_only=True)
class Holder:
    """The command that holds pooled engines: its Ray job id, and the actor whose liveness is the command's
    (runner.pool.liveness.CommandHolder)."""

    job: str
    handle: object


class RayCluster:
    """The Ray calls the pools make (Ray's public API), on the connected cluster."""

    def named_actors(self) -> list[dict]:
        import ray

        return ray.util.list_named_actors(all_namespaces=True)

    def handle(self, actor: PooledActor):
        """The actor's handle; None: gone meanwhile (its time-to-live ran out)."""
        import ray

        try:
            return ray.get_actor(actor.name, namespace=actor.namespace)
        except ValueError:
            return None

    def answers(self, calls: dict, *, timeout_s: float = CALL_TIMEOUT_S) -> dict:
        """key → the call's answer, for the calls (key → ref) that answered within `timeout_s` (others: left out)."""
        import ray

        refs = {ref: key for key, ref in calls.items()}
        if not refs:
            return {}
        done, _ = ray.wait(list(refs), num_returns=len(refs), timeout=timeout_s)
        out = {}
        for ref in done:
            try:
                out[refs[ref]] = ray.get(ref)
            except Exception:  # a call that raised: no answer, as one that did not come in time
                continue
        return out

    def kill(self, handle) -> None:
        import ray

        ray.kill(handle)

    def groups(self) -> dict[str, dict]:
        """Placement-group id (hex) → its table entry (name, state)."""
        from ray.util import placement_group_table

        return placement_group_table()

    def remove_group(self, group_id: str) -> None:
        import ray
        from ray.util.placement_group import PlacementGroup, remove_placement_group

        remove_placement_group(PlacementGroup(ray.PlacementGroupID(bytes.fromhex(group_id))))

    def holder(self) -> Holder:
        import ray

        from runner.pool.liveness import CommandHolder

        # Not detached: Ray ends it with this command's driver, which is how a pooled engine sees the command gone.
        handle = ray.remote(num_cpus=0, max_restarts=0)(CommandHolder).remote()
        return Holder(job=ray.get_runtime_context().get_job_id(), handle=handle)


class EnginePool:
    """The pool `name` (None: every pool, for `list` and `release`) on the connected cluster."""

    def __init__(self, name: Optional[str] = None, *, cluster: Optional[RayCluster] = None):
        self.name = name
        self.cluster = cluster or RayCluster()
        self.notices: list[str] = []  # what a release could not do (placement groups left), for the caller to say

    def actors(self) -> list[PooledActor]:
        """Every pooled engine actor of this pool (of every pool where name is None)."""
        found = []
        for entry in self.cluster.named_actors():
            name, namespace = entry.get("name", ""), entry.get("namespace")
            owner = pool_of_namespace(namespace)
            if owner is not None and name.startswith(ACTOR_PREFIX) and self.name in (None, owner):
                found.append(PooledActor(pool=owner, namespace=namespace, name=name))
        return found

    def list(self) -> list[PooledEngine]:
        handles = self._handles()
        statuses = self.cluster.answers({actor: h.pool_status.remote() for actor, h in handles.items()})
        rows = [PooledEngine.of(actor, statuses.get(actor)) for actor in handles]
        return sorted(rows, key=lambda r: (r.pool, r.engine))

    def claim(self, wanted: dict[str, PoolIdentity], *, holder: Holder) -> dict[str, Claimed]:
        """engine_id → the claimed engine, for each wanted engine that the pool holds, the same engine, and that
        no other running command holds (nor one whose liveness cannot be checked)."""
        names = {identity.actor_name for identity in wanted.values()}
        handles = {actor.name: h for actor, h in self._handles(names).items()}
        statuses = self.cluster.answers({name: h.pool_status.remote() for name, h in handles.items()})
        matched = adoptable(wanted, {name: status.get("identity") for name, status in statuses.items()})
        leases = self.cluster.answers({eid: handles[name].lease.remote(holder=holder.job, holder_handle=holder.handle)
                                       for eid, name in matched.items()})
        return {eid: Claimed(actor=handles[matched[eid]], bundle=statuses[matched[eid]].get("bundle"),
                             host_gib=float(statuses[matched[eid]].get("weights_gib") or 0.0))
                for eid, answer in leases.items() if answer.get("ok")}

    def park(self, actors: list, *, timeout_s: float = CALL_TIMEOUT_S) -> None:
        """The engines back into the pool (bounded: a park past `timeout_s` goes on in the actor)."""
        self.cluster.answers({i: actor.park.remote() for i, actor in enumerate(actors)}, timeout_s=timeout_s)

    def release(self) -> list[PooledEngine]:
        """Ends the pool's engines (every pool's where name is None) and its placement groups; returns the rows of
        what was released."""
        rows = self.list()
        handles = self._handles()
        self.cluster.answers({actor: h.release.remote() for actor, h in handles.items()}, timeout_s=RELEASE_TIMEOUT_S)
        for handle in handles.values():
            try:
                self.cluster.kill(handle)
            except ValueError:  # Ray's refusal for what is not an actor handle: none here
                continue
        self._remove_groups()
        return rows

    # ---- helpers ----
    def _handles(self, names: Optional[set[str]] = None) -> dict[PooledActor, object]:
        handles = {}
        for actor in self.actors():
            if names is None or actor.name in names:
                handle = self.cluster.handle(actor)
                if handle is not None:
                    handles[actor] = handle
        return handles

    def _remove_groups(self) -> None:
        """The pool's detached placement groups (every pool's where name is None)."""
        prefix = f"{pool_namespace(self.name)}-lanes-" if self.name is not None else NAMESPACE_PREFIX
        try:
            groups = self.cluster.groups()
        except Exception as exc:  # said, not hidden: the groups hold GPUs until removed
            self.notices.append(f"the pool's placement groups could not be listed ({type(exc).__name__}: {exc}); "
                                f"`ray list placement-groups` shows them")
            return
        for group_id, info in groups.items():
            name = str(info.get("name", ""))
            if name.startswith(prefix) and info.get("state") != "REMOVED":
                try:
                    self.cluster.remove_group(group_id)
                except Exception as exc:
                    self.notices.append(f"placement group {name} ({group_id}) was not removed: "
                                        f"{type(exc).__name__}: {exc}")


def group_name(pool: str, *, lanes: int, width: int) -> str:
    """A pool's detached placement group for `lanes` lanes of `width` GPUs (CUDA lanes outlive the command)."""
    return f"{pool_namespace(pool)}-lanes-{lanes}x{width}"


def release_pools(pools: Optional[set[str]], *, cluster: Optional[RayCluster] = None,
                  say=None) -> list[PooledEngine]:
    """`pool release`: the named pools' engines (None: every pool's); what could not be done goes to `say`."""
    targets = [EnginePool(cluster=cluster)] if pools is None else [EnginePool(n, cluster=cluster) for n in sorted(pools)]
    rows = []
    for pool in targets:
        rows += pool.release()
        for line in pool.notices:
            (say or print)(f"warning: {line}")
    return rows
