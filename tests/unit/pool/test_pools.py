"""The pools' one interface (runner.pool.pools.EnginePool: claim, park, release, list) over a recording cluster:
which actors belong to a pool, what a claim takes, what a release ends, and what it says it could not do."""
from __future__ import annotations

from runner.plan.grid import EngineConfig
from runner.pool.identity import identity_of, pool_namespace
from runner.pool.pools import EnginePool, Holder, release_pools
from runner.config.sections import ModelSection
from runner.schema import EngineSettings


class _Call:
    def __init__(self, log: list, what: str, answer):
        self.log, self.what, self.answer = log, what, answer

    def remote(self, **kwargs):
        self.log.append((self.what, kwargs))
        return self.answer


class Handle:
    def __init__(self, log: list, name: str, status: dict, lease: dict):
        self.name = name
        self.pool_status = _Call(log, f"status {name}", status)
        self.lease = _Call(log, f"lease {name}", lease)
        self.park = _Call(log, f"park {name}", "parked")
        self.release = _Call(log, f"release {name}", None)


class Cluster:
    """Named actors and their answers, recorded (calls answer at once with what the handle holds)."""

    def __init__(self, actors: dict, *, groups: dict | None = None, failing_group: str | None = None):
        self.log: list = []
        self.actors = actors  # (namespace, name) -> Handle
        self.killed: list = []
        self.group_table = groups or {}
        self.removed: list = []
        self.failing_group = failing_group

    def named_actors(self):
        return [{"namespace": ns, "name": name} for ns, name in self.actors] + [{"namespace": "other", "name": "x"}]

    def handle(self, actor):
        return self.actors.get((actor.namespace, actor.name))

    def answers(self, calls, *, timeout_s=10.0):
        return {key: ref for key, ref in calls.items()}

    def kill(self, handle):
        self.killed.append(handle.name)

    def groups(self):
        return self.group_table

    def remove_group(self, group_id):
        if group_id == self.failing_group:
            raise RuntimeError("GCS unreachable")
        self.removed.append(group_id)


def engine(engine_id: str, k: int) -> EngineConfig:
    return EngineConfig(engine_id=engine_id, settings=EngineSettings(model="tiny-mtp", spec_method="mtp",
                                                                      num_speculative_tokens=k))


def identity(e: EngineConfig):
    return identity_of(e, model=ModelSection(name="tiny-mtp", builtin="tiny_mtp"), device="cpu", vllm_version="0.1",
                       env={})


def test_a_claim_takes_the_same_engine_that_its_pool_holds_and_that_no_running_command_holds():
    ours, busy, other = identity(engine("e1", 1)), identity(engine("e2", 2)), identity(engine("e3", 3))
    log: list = []
    ns = pool_namespace("default")
    cluster = Cluster({
        (ns, ours.actor_name): Handle(log, "a1", {"identity": ours.as_dict(), "bundle": None, "weights_gib": 1.5},
                                      {"ok": True}),
        (ns, busy.actor_name): Handle(log, "a2", {"identity": busy.as_dict()}, {"ok": False, "reason": "held"}),
        # The same name in another pool is not this pool's engine.
        (pool_namespace("other"), other.actor_name): Handle(log, "a3", {"identity": other.as_dict()}, {"ok": True}),
    })
    holder = Holder(job="01000000", handle="holder-actor")
    found = EnginePool("default", cluster=cluster).claim({"e1": ours, "e2": busy, "e3": other}, holder=holder)
    assert sorted(found) == ["e1"] and found["e1"].host_gib == 1.5 and found["e1"].actor.name == "a1"
    leases = [kwargs for what, kwargs in log if what.startswith("lease")]
    assert leases and all(k == {"holder": "01000000", "holder_handle": "holder-actor"} for k in leases)
    assert not any(what == "lease a3" for what, _ in log)


def test_a_claim_of_an_engine_that_reports_another_identity_takes_nothing():
    ours, theirs = identity(engine("e1", 1)), identity(engine("e1", 2))
    log: list = []
    cluster = Cluster({(pool_namespace("default"), ours.actor_name):
                       Handle(log, "a1", {"identity": theirs.as_dict()}, {"ok": True})})
    assert EnginePool("default", cluster=cluster).claim({"e1": ours}, holder=Holder(job="j", handle=None)) == {}
    assert not any(what.startswith("lease") for what, _ in log)


def test_list_names_every_pools_engines_and_an_unanswered_one_as_unreachable():
    log: list = []
    status = {"identity": {"model": {"name": "tiny-mtp"}, "device": "cpu", "vllm_version": "0.1"},
              "summary": "e1 mtp:1", "state": "asleep", "idle_s": 3.0, "engine_pids": [7]}
    cluster = Cluster({(pool_namespace("a"), "engine-1"): Handle(log, "a1", status, {}),
                       (pool_namespace("b"), "engine-2"): Handle(log, "a2", None, {})})
    rows = EnginePool(cluster=cluster).list()
    assert [(r.pool, r.state) for r in rows] == [("a", "asleep"), ("b", "unreachable")]
    assert rows[0].as_dict()["engine_pids"] == [7] and rows[0].model == "tiny-mtp"
    assert [r.pool for r in EnginePool("b", cluster=cluster).list()] == ["b"]


def test_park_sends_each_engine_back():
    log: list = []
    handles = [Handle(log, f"a{i}", {}, {}) for i in range(2)]
    EnginePool("default", cluster=Cluster({})).park(handles)
    assert [what for what, _ in log] == ["park a0", "park a1"]


def test_release_ends_the_named_pools_engines_and_groups_and_says_what_it_could_not_remove():
    log: list = []
    cluster = Cluster({(pool_namespace("a"), "engine-1"): Handle(log, "a1", {"state": "awake"}, {}),
                       (pool_namespace("b"), "engine-2"): Handle(log, "a2", {"state": "awake"}, {})},
                      groups={"g1": {"name": f"{pool_namespace('a')}-lanes-1x1", "state": "CREATED"},
                              "g2": {"name": f"{pool_namespace('a')}-lanes-2x1", "state": "CREATED"},
                              "g3": {"name": f"{pool_namespace('b')}-lanes-1x1", "state": "CREATED"}},
                      failing_group="g2")
    said: list = []
    rows = release_pools({"a"}, cluster=cluster, say=said.append)
    assert [r.pool for r in rows] == ["a"] and cluster.killed == ["a1"] and cluster.removed == ["g1"]
    assert ("release a1", {}) in log and ("release a2", {}) not in log
    assert len(said) == 1 and "was not removed" in said[0] and "GCS unreachable" in said[0]
