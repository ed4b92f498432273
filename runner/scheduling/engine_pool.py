"""Engine pools on a Ray cluster (execution.keep_engines): detached, named engine actors in the namespace
`vllm-sweep-pool-<pool>`. The driver's side: find a run's engines in its pool and claim them, list every pool,
release pools. The actor's side is runner.execution.pooled."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from runner.scheduling.pool_identity import (ACTOR_PREFIX, NAMESPACE_PREFIX, PoolIdentity, adoptable, pool_namespace,
                                             pool_of_namespace)

CALL_TIMEOUT_S = 10.0


@dataclass(frozen=True, kw_only=True)
class PooledActor:
    pool: str
    namespace: str
    name: str


def holder_id() -> str:
    """This command's Ray job: what a pooled engine it holds watches (a job gone puts the engine back)."""
    import ray

    return ray.get_runtime_context().get_job_id()


def pooled_actors(pool: Optional[str] = None) -> list[PooledActor]:
    """Every pooled engine actor on the connected cluster (of `pool` alone where given)."""
    import ray

    found = []
    for entry in ray.util.list_named_actors(all_namespaces=True):
        name, namespace = entry.get("name", ""), entry.get("namespace")
        owner = pool_of_namespace(namespace)
        if owner is not None and name.startswith(ACTOR_PREFIX) and (pool is None or owner == pool):
            found.append(PooledActor(pool=owner, namespace=namespace, name=name))
    return found


def _answers(calls: dict, *, timeout_s: float = CALL_TIMEOUT_S) -> dict:
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
        except Exception:
            continue
    return out


def claim(wanted: dict[str, PoolIdentity], *, pool: str, holder: str) -> dict[str, tuple]:
    """engine_id → (actor handle, its placement-group bundle or None, the host RAM its sleeps hold in GiB): each
    wanted engine that its pool holds, the same engine, and no other running command holds (claimed for this one)."""
    import ray

    names = {a.name: a for a in pooled_actors(pool)}
    handles = {}
    for identity in wanted.values():
        actor = names.get(identity.actor_name)
        if actor is not None:
            try:
                handles[actor.name] = ray.get_actor(actor.name, namespace=actor.namespace)
            except ValueError:  # gone meanwhile (its time-to-live ran out)
                continue
    statuses = _answers({name: h.pool_status.remote() for name, h in handles.items()})
    matched = adoptable(wanted, {name: status.get("identity") for name, status in statuses.items()})
    claims = _answers({eid: handles[name].claim.remote(holder=holder) for eid, name in matched.items()})
    return {eid: (handles[matched[eid]], statuses[matched[eid]].get("bundle"),
                  float(statuses[matched[eid]].get("weights_gib") or 0.0)) for eid, answer in claims.items()
            if answer.get("ok")}


def pool_rows() -> list[dict]:
    """One row per pooled engine, for `pool list`."""
    import ray

    handles = {}
    for actor in pooled_actors():
        try:
            handles[actor] = ray.get_actor(actor.name, namespace=actor.namespace)
        except ValueError:
            continue
    statuses = _answers({actor: h.pool_status.remote() for actor, h in handles.items()})
    rows = []
    for actor in handles:
        status = statuses.get(actor) or {"state": "unreachable"}
        identity = status.get("identity") or {}
        rows.append({"pool": actor.pool, "name": actor.name, "engine": status.get("summary") or "",
                     "model": (identity.get("model") or {}).get("name") or "", "device": identity.get("device") or "",
                     "vllm": identity.get("vllm_version") or "", "state": status.get("state"),
                     "idle_s": status.get("idle_s"), "ttl_left_s": status.get("ttl_left_s"),
                     "warm_shapes": status.get("warm_shapes"), "pid": status.get("pid"),
                     "engine_pids": status.get("engine_pids") or []})
    return sorted(rows, key=lambda r: (r["pool"], r["engine"]))


def release(pools: Optional[set[str]]) -> list[dict]:
    """Ends the pools' engines (each engine shut down, then its actor killed) and their placement groups; `pools`
    None: every pool. Returns the rows of what was released."""
    import ray

    rows = [r for r in pool_rows() if pools is None or r["pool"] in pools]
    handles = {}
    for actor in pooled_actors():
        if pools is None or actor.pool in pools:
            try:
                handles[actor] = ray.get_actor(actor.name, namespace=actor.namespace)
            except ValueError:
                continue
    _answers({actor: h.release.remote() for actor, h in handles.items()}, timeout_s=30.0)
    for handle in handles.values():
        try:
            ray.kill(handle)
        except Exception:
            pass
    _remove_groups(pools)
    return rows


def group_name(pool: str, *, lanes: int, width: int) -> str:
    """A pool's detached placement group for `lanes` lanes of `width` GPUs (CUDA lanes outlive the command)."""
    return f"{pool_namespace(pool)}-lanes-{lanes}x{width}"


def _remove_groups(pools: Optional[set[str]]) -> None:
    """The pools' detached placement groups (`pools` None: every pool's)."""
    try:
        from ray._raylet import PlacementGroupID
        from ray.util import placement_group_table
        from ray.util.placement_group import PlacementGroup, remove_placement_group

        table = placement_group_table()
    except Exception:
        return
    prefixes = tuple(f"{pool_namespace(p)}-lanes-" for p in pools) if pools is not None else (NAMESPACE_PREFIX,)
    for group_id, info in table.items():
        if str(info.get("name", "")).startswith(prefixes) and info.get("state") != "REMOVED":
            try:
                remove_placement_group(PlacementGroup(PlacementGroupID(bytes.fromhex(group_id))))
            except Exception:
                continue
