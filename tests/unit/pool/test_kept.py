"""A command's side of its pool (runner.pool.kept): what it claimed waits parked for its lane (its own bundle
only), an engine used is parked again for its next turn, and claimed engines never woken go back at the end; a
pooled engine's start arguments are completed once, and its identity is taken from them; without a pool, nothing
is claimed or parked."""
from __future__ import annotations

from runner.config.sections import ModelSection
from runner.plan.grid import EngineConfig
from runner.plan.vllm_args import VllmArgs
from runner.pool.kept import ActorSite, KeptEngines, NoPool, command_side
from runner.pool.pools import Claimed, Holder
from runner.schema import EngineSettings
from tests.support.recorded import RecordedActor as Actor


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
    assert kept.parked["e0"].first is False and kept.parked["e0"].bundle == "g:0"  # back in its own bundle
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


def _engine(engine_id: str = "e0", tp: int = 1) -> EngineConfig:
    return EngineConfig(engine_id=engine_id, settings=EngineSettings(model="m", tensor_parallel_size=tp),
                        vllm_args=VllmArgs.of({"tensor_parallel_size": tp, "enforce_eager": True}))


def _kept(found: dict, *, sleeps: bool) -> KeptEngines:
    site = ActorSite(model=ModelSection(name="m"), device="cuda" if sleeps else "cpu", sleeps=sleeps,
                     env_of=lambda engine: {"VLLM_CPU_KVCACHE_SPACE": "1"})
    kept = KeptEngines(pool="p", ttl_s=60.0, site=site, engine_pool=Pool(found))
    kept._vllm_version = "0.32.0"
    return kept


def test_without_a_pool_a_start_takes_the_lanes_sleep_choice_and_an_engine_leaving_ends():
    log, said = [], []
    none = command_side(keep=False, pool="p", ttl_s=1.0, site=ActorSite())
    assert isinstance(none, NoPool) and not isinstance(none, KeptEngines)
    assert none.start_of(_engine(), sleep_mode=False).vllm_args.as_dict() == {"tensor_parallel_size": 1,
                                                                              "enforce_eager": True}
    assert none.start_of(_engine(), sleep_mode=True).sleep_mode
    assert none.start_of(_engine(tp=2), sleep_mode=False).vllm_args.as_dict()["distributed_executor_backend"] == "mp"
    assert none.claim([_engine()], say=said.append) == [] and said == []
    assert none.leave("e0", Actor(log, "a")) == ("shutdown a", True) and log == ["shutdown a"]
    assert none.take("e0", bundle=None) is None and not none.has("e0") and none.suits(Actor(log, "b"), "e0")
    assert none.stop([Actor(log, "c")], timeout_s=1.0) == set() and none.group_name(lanes=2, width=1) is None


def test_a_pooled_engine_is_completed_once_with_the_pools_sleep_mode_and_named_after_that():
    kept = _kept({}, sleeps=True)
    started = kept.start_of(_engine(), sleep_mode=False)  # a lane that would not let it sleep: the pool does
    assert started.sleep_mode and kept.start_of(_engine(), sleep_mode=True) is started
    identity = kept.identity(_engine())
    assert identity.vllm_args == started.vllm_args.as_dict() and identity.vllm_args["enable_sleep_mode"] is True
    cpu = _kept({}, sleeps=False)
    assert not cpu.start_of(_engine(), sleep_mode=True).sleep_mode  # vLLM's CPU build has no sleep mode
    assert cpu.identity(_engine()).actor_name != identity.actor_name


def test_a_claim_says_what_the_pool_gave_and_a_pooled_engine_leaving_is_parked_at_once():
    log, said = [], []
    a0, a1, plain = Actor(log, "a0"), Actor(log, "a1"), Actor(log, "plain")
    kept = _kept({"e0": Claimed(actor=a0, bundle=None, host_gib=1.0)}, sleeps=False)
    assert kept.claim([_engine("e0"), _engine("e1")], say=said.append) == ["e0"]
    assert said == ["engine pool 'p': 1 of 2 engine(s) found, woken instead of loaded (e0)"]
    kept.made(a1, engine_id="e1", bundle=None)
    assert kept.leave("e1", a1) == ("park a1", False) and kept.has("e1")  # wanted again: woken, its park first
    assert kept.leave("e2", plain) == ("shutdown plain", True) and not kept.has("e2")
    assert kept.stop([a1, plain], timeout_s=1.0) == {id(a0), id(a1)} and not kept.parked
    assert kept.engine_pool.parks == [[a1, a0]]
