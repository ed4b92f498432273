"""What an actor is given (pure): environment, cores."""
from __future__ import annotations

import dataclasses

from runner.vllm.ngram_jit import NGRAM_JIT_ENV
from runner.vllm.sleep_pinning import PIN_AHEAD_ENV
from runner.plan.vllm_args import VllmArgs
from runner.scheduling.actor_spec import actor_env, cpu_binding
from tests.unit.scheduling.plans import tp_plan


def test_actor_env_unsets_the_process_wide_kv_size_for_a_per_engine_one():
    plan = tp_plan(tps_and_trials=[(1, 1)])
    engine = plan.engines[0].__class__(engine_id="e", settings=plan.engines[0].settings,
                                       vllm_args=VllmArgs.of({"kv_cache_memory_bytes": 1 << 24}))
    env = actor_env(base={"VLLM_CPU_KVCACHE_SPACE": "1"}, engine=engine, environ={"RUNNER_FAULTS": "[]"})
    assert env == {"VLLM_CPU_KVCACHE_SPACE": None, "RUNNER_FAULTS": "[]"}
    assert actor_env(base={"VLLM_CPU_KVCACHE_SPACE": "1"}, engine=plan.engines[0], environ={}) == {
        "VLLM_CPU_KVCACHE_SPACE": "1"}


def test_each_cpu_slot_gets_its_own_cores():
    assert [cpu_binding(slot=i, cores_per_engine=1, total_cores=2) for i in range(3)] == ["0", "1", "0"]
    assert cpu_binding(slot=1, cores_per_engine=2, total_cores=8) == "2-3"


def test_an_engine_that_sleeps_pins_its_host_memory_on_threads_unless_the_node_says_otherwise():
    engine = tp_plan(tps_and_trials=[(1, 1)]).engines[0]
    assert actor_env(base={}, engine=engine, environ={}, sleeps=True)["PYTORCH_CUDA_ALLOC_CONF"].startswith(
        "pinned_use_cuda_host_register:True")
    assert "PYTORCH_CUDA_ALLOC_CONF" not in actor_env(base={}, engine=engine, environ={})
    assert "PYTORCH_CUDA_ALLOC_CONF" not in actor_env(base={}, engine=engine, sleeps=True,
                                                      environ={"PYTORCH_CUDA_ALLOC_CONF": "x"})


def test_an_engine_that_sleeps_pins_its_sleep_buffers_during_its_init_where_asked():
    engine = tp_plan(tps_and_trials=[(1, 1)]).engines[0]
    assert actor_env(base={}, engine=engine, environ={}, sleeps=True, pin_ahead=True)[PIN_AHEAD_ENV] == "1"
    assert PIN_AHEAD_ENV not in actor_env(base={}, engine=engine, environ={}, sleeps=True)
    assert PIN_AHEAD_ENV not in actor_env(base={}, engine=engine, environ={}, pin_ahead=True)


def test_an_ngram_engine_compiles_its_proposer_during_its_init_and_no_other_does():
    engine = tp_plan(tps_and_trials=[(1, 1)]).engines[0]
    ngram = dataclasses.replace(engine, settings=dataclasses.replace(engine.settings, spec_method="ngram",
                                                                     num_speculative_tokens=3))
    assert actor_env(base={}, engine=ngram, environ={})[NGRAM_JIT_ENV] == "1"
    assert NGRAM_JIT_ENV not in actor_env(base={}, engine=engine, environ={})
