"""A command's side of its pool (runner.pool.kept): what it claimed waits parked for its lane (its own bundle
only), an engine used is parked again for its next turn, and claimed engines never woken go back at the end."""
from __future__ import annotations

from runner.pool.kept import KeptEngines
from runner.pool.pools import Claimed, Holder


class Pool:
    def __init__(self, found: dict):
        self.found, self.parks, self.claims = found, [], []
        self.cluster = self

    def holder(self) -> Holder:
        return Holder(job="01000000", handle="holder")

    def claim(self, wanted, *, holder):
        self.claims.append((sorted(wanted), holder.job))
        return {k: v for k, v in self.found.items() if k in wanted}

    def park(self, actors, *, timeout_s):
        self.parks.append(list(actors))


def test_claimed_engines_wait_for_the_lane_of_their_bundle_and_go_back_unused():
    pool = Pool({"e0": Claimed(actor="a0", bundle="g:0", host_gib=2.0), "e1": Claimed(actor="a1", bundle=None,
                                                                                     host_gib=1.0)})
    kept = KeptEngines(pool="p", ttl_s=60.0, engine_pool=pool)
    assert kept.found_in_pool({"e0": None, "e1": None, "e2": None}) == ["e0", "e1"]
    assert pool.claims == [(["e0", "e1", "e2"], "01000000")] and kept.claimed_host_gib == 3.0
    assert kept.take("e0", bundle="g:1") is None and "e0" in kept.parked  # another lane's GPU: it stays
    taken = kept.take("e0", bundle="g:0")
    assert taken.actor == "a0" and taken.first and "e0" not in kept.parked
    kept.parked_again("e0", "a0")
    assert kept.parked["e0"].first is False
    kept.park(kept.unused(), timeout_s=1.0)
    assert pool.parks == [["a1"]]  # e0 served this command: it is parked by its own retirement


def test_a_made_actor_is_the_commands_pooled_engine_until_killed():
    kept = KeptEngines(pool="p", ttl_s=60.0, engine_pool=Pool({}))
    kept.made("a", engine_id="e0", bundle="g:0")
    assert kept.pooled("a") and kept.suits("a", "e0") and not kept.suits("a", "e1") and kept.suits("b", "e1")
    entry = kept.entry(type("Identity", (), {"actor_name": "engine-x", "as_dict": lambda self: {}})(),
                       summary="e0 off", bundle="g:0")
    assert (entry.holder, entry.holder_handle, entry.ttl_s, entry.pool) == ("01000000", "holder", 60.0, "p")
    kept.forget("a")
    assert not kept.pooled("a")
