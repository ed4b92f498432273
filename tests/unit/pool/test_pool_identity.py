"""Engine pools, pure parts: a pooled engine's identity and name, matching a plan's engines to what a pool reports,
the pooled actor's lease and idle clock, the config's pool keys."""
from __future__ import annotations

import dataclasses
import json

import pytest

from runner.config.checks import ConfigError
from runner.config.execution import ExecutionSection
from runner.config.sections import ModelSection
from runner.plan.grid import EngineConfig
from runner.plan.vllm_args import VllmArgs
from runner.pool.identity import (PoolIdentity, adoptable, engine_env, identity_of, pool_namespace,
                                  pool_of_namespace)
from runner.pool.member import Membership, PoolEntry
from runner.schema import EngineSettings

MODEL = ModelSection(name="tiny-mtp", builtin="tiny_mtp")


def engine(engine_id="e-1", **settings) -> EngineConfig:
    return EngineConfig(engine_id=engine_id, settings=EngineSettings(model="tiny-mtp", **settings),
                        vllm_args=VllmArgs.of({"enforce_eager": True, "tensor_parallel_size": 1}))


def ident(e=None, *, model=MODEL, device="cpu", vllm="0.32.0", env=None) -> PoolIdentity:
    return identity_of(e or engine(), model=model, device=device, vllm_version=vllm,
                       env={"VLLM_CPU_KVCACHE_SPACE": "1"} if env is None else env)


def test_the_same_engine_has_the_same_identity_and_name():
    a, b = ident(), ident()
    assert a == b and a.key == b.key and a.actor_name == b.actor_name
    assert a.actor_name.startswith("engine-") and len(a.key) == 16


@pytest.mark.parametrize("other", [
    ident(engine(spec_method="mtp", num_speculative_tokens=2)),  # settings
    ident(engine(max_model_len=1024)),
    ident(model=ModelSection(name="tiny-mtp", builtin="tiny_mtp", weights="dummy", load_format="dummy")),  # weights
    ident(model=ModelSection(name="tiny-mtp", path="/models/other")),  # where the model comes from
    ident(device="cuda"),
    ident(vllm="0.26.0"),
    ident(env={"VLLM_CPU_KVCACHE_SPACE": "4"}),  # the KV the engine gets
    ident(engine().for_start(sleep_mode=True)),  # the arguments its start completed
    ident(dataclasses.replace(engine(), vllm_args=VllmArgs.of({"enforce_eager": False, "tensor_parallel_size": 1}))),
], ids=["spec", "len", "weights", "path", "device", "vllm", "kv_env", "sleep_mode", "vllm_args"])
def test_any_difference_that_changes_the_engine_changes_its_identity_and_name(other):
    assert other != ident() and other.actor_name != ident().actor_name
    assert not other.matches(ident().as_dict())


def test_only_engine_relevant_environment_counts():
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "PYTHONPATH": "/x", "RUNNER_CACHE_DIR": "/c", "VLLM_LOGGING_LEVEL": "DEBUG",
           "OMP_NUM_THREADS": "2", "NCCL_NVLS_ENABLE": "0"}
    assert engine_env(env) == {"OMP_NUM_THREADS": "2", "VLLM_CPU_KVCACHE_SPACE": "1"}
    assert ident(env=env) == ident(env={"VLLM_CPU_KVCACHE_SPACE": "1", "OMP_NUM_THREADS": "2"})


def test_a_reported_identity_matches_after_a_round_trip_through_json():
    a = ident(engine(spec_schedule="[[1,1,3]]"))
    assert a.matches(json.loads(json.dumps(a.as_dict())))
    assert not a.matches(None) and not a.matches({**a.as_dict(), "vllm_version": "0.26.0"})


def test_adoptable_takes_only_engines_whose_actor_reports_the_same_identity():
    want = {"e-1": ident(engine("e-1")), "e-2": ident(engine("e-2", max_model_len=1024)),
            "e-3": ident(engine("e-3", max_model_len=4096))}
    found = {want["e-1"].actor_name: want["e-1"].as_dict(),
             want["e-2"].actor_name: {**want["e-2"].as_dict(), "device": "cuda"},  # a hash collision, say
             "engine-unrelated": ident(engine("e-9")).as_dict()}
    assert adoptable(want, found) == {"e-1": want["e-1"].actor_name}


def test_pool_namespaces_name_their_pool_and_nothing_else():
    assert pool_namespace("default") == "vllm-sweep-pool-default"
    assert pool_of_namespace(pool_namespace("study-a")) == "study-a"
    assert pool_of_namespace("anonymous") is None and pool_of_namespace("vllm-sweep-pool-") is None
    assert pool_of_namespace(None) is None


def entry(ttl_s=60.0) -> PoolEntry:
    return PoolEntry(pool="default", name="engine-x", identity={}, summary="e-1 off", ttl_s=ttl_s)


def test_a_free_engine_expires_after_its_ttl_and_a_claim_resets_the_clock():
    m = Membership(entry=entry(ttl_s=60), idle_since=0.0)
    assert m.expired(now=61.0) and m.ttl_left_s(now=30.0) == 30.0
    m.holder = "02000000"
    assert not m.expired(now=1000.0)  # held: its command may come back to it
    m.holder = None
    m.touch()
    assert not m.expired()


def test_a_trial_in_progress_is_never_idle():
    m = Membership(entry=entry(ttl_s=1), idle_since=0.0, busy_calls=1)
    assert m.idle_s(now=100.0) == 0.0 and not m.expired(now=100.0)


def test_a_claim_is_refused_only_while_another_running_command_holds_the_engine():
    from runner.pool.liveness import HolderCheck, Liveness

    alive, gone = HolderCheck(liveness=Liveness.ALIVE), HolderCheck(liveness=Liveness.GONE)
    m = Membership(entry=entry())
    assert m.refusal("a") is None  # free: no check needed
    m.hold("a", None)
    assert m.refusal("a") is None  # its own
    assert not m.needs_check("a") and m.needs_check("b")
    assert "held by the running command" in m.refusal("b", alive)
    assert m.refusal("b", gone) is None  # its command was killed


@pytest.mark.parametrize("values,fix", [
    ({"pool_ttl_s": 0}, "fix: execution.pool_ttl_s=1800"),
    ({"pool_ttl_s": -5}, "fix: execution.pool_ttl_s=1800"),
    ({"pool": "a/b"}, "fix: execution.pool=a-b"),
    ({"pool": ""}, "fix: execution.pool=default"),
])
def test_bad_pool_settings_are_refused_with_their_fix(values, fix):
    with pytest.raises(ConfigError) as error:
        ExecutionSection(**values)
    assert fix in str(error.value)


def test_pool_defaults():
    e = ExecutionSection()
    assert (e.keep_engines, e.pool, e.pool_ttl_s) == (False, "default", 1800)


def test_the_pool_head_starts_without_a_ray_script_on_path(monkeypatch, tmp_path):
    from runner.pool import head as pool_head

    monkeypatch.setattr(pool_head.shutil, "which", lambda name: None)
    monkeypatch.setattr(pool_head.sys, "executable", str(tmp_path / "python3"))
    command = pool_head._ray_command()
    assert command[:2] == [str(tmp_path / "python3"), "-c"] and "ray.scripts.scripts" in command[2]


def test_the_pool_line_says_what_was_woken_or_that_nothing_was_there():
    from runner.pool.kept import pool_line

    assert pool_line("default", found=[], needed=4) == \
        "engine pool 'default': none of this run's 4 engine(s) there yet; they load, and stay after it"
    assert pool_line("default", found=["e-1", "e-2"], needed=4) == \
        "engine pool 'default': 2 of 4 engine(s) found, woken instead of loaded (e-1, e-2)"
