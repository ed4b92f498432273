"""Pure scheduling and fault-hook helpers (no Ray, no engine); the faults on real engines are in
tests/engine/test_faults.py."""
from __future__ import annotations

import json

import pytest


# ---- pure scheduling helpers (no Ray) ----------------------------------------------------------
def _plan(*, tps_and_trials):
    from runner.plan.grid import EngineConfig, Plan, Trial
    from runner.schema import EngineSettings

    engines, trials = [], []
    for i, (tp, n) in enumerate(tps_and_trials):
        engine = EngineConfig(engine_id=f"e{i}", settings=EngineSettings(model="m", tensor_parallel_size=tp),
                              engine_args={})
        engines.append(engine)
        trials += [Trial(trial_id=f"t{i}-{j}", engine_id=engine.engine_id, workload="decode", params={})
                   for j in range(n)]
    return Plan(sweep="s", engines=engines, trials=trials)


def test_longest_group_first_and_tp_groups_take_their_gpus():
    from runner.execution.scheduler import engine_for_actor, layout, pending_groups, units_needed

    plan = _plan(tps_and_trials=[(1, 1), (1, 5), (2, 3)])
    assert [g.engine.engine_id for g in pending_groups(plan, skip_trial_ids={"t1-0"})] == ["e1", "e2", "e0"]
    assert layout(plan, device="cuda", units=4) == [["e1"], ["e2"], ["e2"], ["e0"]]
    assert units_needed(plan.engines[2], device="cuda") == 2 and units_needed(plan.engines[2], device="cpu") == 1
    assert engine_for_actor(plan.engines[2]).engine_args == {"distributed_executor_backend": "mp"}
    assert engine_for_actor(plan.engines[0]).engine_args == {}


def test_actor_env_unsets_the_process_wide_kv_size_for_a_per_engine_one():
    from runner.execution.scheduler import actor_env

    plan = _plan(tps_and_trials=[(1, 1)])
    engine = plan.engines[0].__class__(engine_id="e", settings=plan.engines[0].settings,
                                       engine_args={"kv_cache_memory_bytes": 1 << 24})
    env = actor_env(base={"VLLM_CPU_KVCACHE_SPACE": "1"}, engine=engine, environ={"RUNNER_FAULTS": "[]"})
    assert env == {"VLLM_CPU_KVCACHE_SPACE": None, "RUNNER_FAULTS": "[]"}
    assert actor_env(base={"VLLM_CPU_KVCACHE_SPACE": "1"}, engine=plan.engines[0], environ={}) == {
        "VLLM_CPU_KVCACHE_SPACE": "1"}


def test_cluster_capacity():
    from runner.config.schema import ClusterSection
    from runner.execution.scheduler import cluster_capacity

    assert cluster_capacity(cluster=ClusterSection(cpu_engine_slots=2), device="cpu", resources={}).device_units == 2
    gpu = cluster_capacity(cluster=ClusterSection(), device="cuda", resources={"GPU": 8.0})
    assert (gpu.device_units, gpu.max_parallel_engines) == (8, 8)
    assert cluster_capacity(cluster=ClusterSection(max_parallel_engines=3), device="cuda",
                            resources={"GPU": 8}).max_parallel_engines == 3


def test_fault_hook_matches_named_trials_and_attempts_only():
    from runner.execution.failures import injected_fault
    from runner.plan.grid import Trial

    trial = Trial(trial_id="t1", engine_id="e", workload="decode", params={}, concurrency=2)
    spec = json.dumps([{"fault": "kill", "concurrency": 2}, {"fault": "hang", "trial_id": "t1", "attempts": [2]}])
    assert injected_fault(trial=trial, attempt=1, spec=spec) == "kill"
    assert injected_fault(trial=trial, attempt=2, spec=spec) == "hang"
    assert injected_fault(trial=trial, attempt=3, spec=spec) is None
    assert injected_fault(trial=trial, attempt=1, spec="") is None
    with pytest.raises(ValueError, match="unknown fault"):
        injected_fault(trial=trial, attempt=1, spec='[{"fault": "explode"}]')
